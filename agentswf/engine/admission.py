"""The `admit` checks the run's sockets are served with: identity by peer process, recorded.

The decision is `launcher/identity.py`'s; this puts the kernel's answers into it (the
peer's pid, its parents from /proc) and records every refusal, with the refused
process's command line, before it is answered. Where a process's parent can't be read
(no /proc: macOS), no check is made and the run says so once: the sockets are then held
by their owner-only modes and the unlisted run directory alone.
"""

from __future__ import annotations

import os
import time

import anyio
import structlog

from ..actors import ActorRef
from ..harnesses.keeper import MARK_VARIABLE
from ..launcher.identity import LiveAttempts, agent_refusal, operator_refusal
from ..launcher.listener import Admit
from ..launcher.peer import command_of, environment_value, parent_of, parents_readable, started_at
from .recorder import ConnectionRefused

_log = structlog.get_logger("agentswf.admission")
SPAWN_ADMIT_WAIT_SECONDS = 5.0  # at most, for a starting attempt's keeper pid before refusing
_warned: list[bool] = []


def _checkable() -> bool:
    if parents_readable():
        return True
    if not _warned:
        _warned.append(True)
        _log.warning("processes' parents can't be read here (no /proc): the run can't check who connects")
    return False


async def _record(recorder: ActorRef, socket: str, pid: int | None, reason: str) -> None:
    await recorder.tell(ConnectionRefused(time.time(), socket, pid, command_of(pid), reason))


def gone_refusal(agent: str, pid: int) -> str:
    return (
        f"this is {agent}'s socket, and process {pid}, which connected while {agent} was starting, "
        "is gone (its pid may be another process's now): nothing was done."
    )


def agent_admit(agent: str, attempts: LiveAttempts, recorder: ActorRef) -> Admit | None:
    """Admit on `agent`'s socket the run's own process and the processes of `agent`'s live attempts."""
    if not _checkable():
        return None
    run_pid = os.getpid()

    def decide(pid: int | None) -> str | None:
        return agent_refusal(pid, agent=agent, run_pid=run_pid, roots=attempts.of(agent), parent_of=parent_of)

    async def admit(pid: int | None) -> str | None:
        refusal = decide(pid)
        if refusal is None:  # the common case: no deadline to keep, so no cancel scope
            return None
        if pid is not None and attempts.is_starting(agent):  # its keeper's pid is on its way
            started = started_at(pid)  # the connector's, as the listener checked it runs
            with anyio.move_on_after(SPAWN_ADMIT_WAIT_SECONDS):
                while refusal is not None and attempts.is_starting(agent):
                    await attempts.changed()
                    refusal = decide(pid)
            if refusal is None and (started is None or started_at(pid) != started):
                refusal = gone_refusal(agent, pid)
        if refusal is not None:
            await _record(recorder, f"agent {agent}", pid, refusal)
        return refusal

    return admit


def operator_admit(attempts: LiveAttempts, recorder: ActorRef, run_mark: str) -> Admit | None:
    """Admit on the operator socket any process but those of the run's live attempts, and
    those carrying `run_mark`."""
    if not _checkable():
        return None

    def mark_of(pid: int) -> str | None:
        return environment_value(pid, MARK_VARIABLE)

    async def admit(pid: int | None) -> str | None:
        refusal = operator_refusal(pid, attempts=attempts.roots, parent_of=parent_of, run_mark=run_mark, mark_of=mark_of)
        if refusal is not None:
            await _record(recorder, "operator", pid, refusal)
        return refusal

    return admit
