"""A RouteActor: one route between two ends, its purpose and its budget of messages.

The switchboard asks it for its state and spends from its budget; it never asks back,
so no cycle of asks can form. Each message it carries is a mailbox event, traced.
"""

from __future__ import annotations

from dataclasses import replace

import msgspec

from ...actors import Actor, handler
from .rules import RouteView


class Describe(msgspec.Struct, frozen=True):
    pass


class Spend(msgspec.Struct, frozen=True):
    """Take `cost` messages from the budget; answers the route's state after."""

    message_id: str
    cost: int


class CloseRoute(msgspec.Struct, frozen=True):
    pass


class RouteActor(Actor):
    def __init__(self, view: RouteView) -> None:
        super().__init__()
        self.view = view

    @handler
    def describe(self, msg: Describe) -> RouteView:
        return self.view

    @handler
    def spend(self, msg: Spend) -> RouteView:
        self.view = replace(self.view, used=self.view.used + msg.cost)
        return self.view

    @handler
    def close_route(self, msg: CloseRoute) -> RouteView:
        self.view = replace(self.view, open=False)
        return self.view
