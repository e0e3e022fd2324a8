"""Actors and messages shared by the actor kernel tests."""

from __future__ import annotations

import anyio
import msgspec

from agentswf.actors import Actor, handler


class Add(msgspec.Struct):
    k: int


class Get(msgspec.Struct):
    pass


class Boom(msgspec.Struct):
    pass


class Hold(msgspec.Struct):
    """Handled by waiting until the test sets ``release``."""

    release: anyio.Event
    entered: anyio.Event | None = None


class Unknown(msgspec.Struct):
    pass


class Counter(Actor):
    """Adds, answers its total, raises on Boom, parks on Hold; logs its lifecycle."""

    def __init__(self, start: int = 0, log: list[str] | None = None) -> None:
        super().__init__()
        self.n = start
        self.log = log if log is not None else []
        self.seen: list[int] = []

    async def on_start(self) -> None:
        self.log.append(f"start {self.name}")

    async def on_stop(self) -> None:
        self.log.append(f"stop {self.name}")

    @handler
    async def add(self, msg: Add) -> int:
        self.n += msg.k
        self.seen.append(msg.k)
        return self.n

    @handler
    def get(self, msg: Get) -> int:
        return self.n

    @handler
    def boom(self, msg: Boom) -> None:
        raise ValueError("boom")

    @handler
    async def hold(self, msg: Hold) -> str:
        if msg.entered is not None:
            msg.entered.set()
        await msg.release.wait()
        return "released"
