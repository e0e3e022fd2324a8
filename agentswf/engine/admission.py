"""The `admit` checks the run's sockets are served with: identity by peer process, recorded.

The decision is `launcher/identity.py`'s; this puts the kernel's answers into it (the
peer's pid, its parents from /proc) and records every refusal, with the refused
process's command line, before it is answered. The peer is the one read as its connection
was taken (`peer.identify`): a decision stands only if its pid still names that process
after it was made (`peer.is_connector`), so nothing a pid given out again says is taken for
the connector's. Where a process's parent can't be read (no /proc: macOS), no check is made
and the run says so once: the sockets are then held by their owner-only modes and the
unlisted run directory alone. Nothing here outlives a run: each run says it for itself.
"""

from __future__ import annotations

import os

import anyio
import structlog

from ..actors import ActorRef
from ..harnesses.keeper import MARK_VARIABLE
from ..launcher.identity import LiveAttempts, agent_refusal, operator_refusal
from ..launcher.listener import Admit
from ..launcher.peer import Peer, command_of, environment_value, is_connector, parent_of, parents_readable
from .clock import wall
from .record.lines import ConnectionRefused

_log = structlog.get_logger("agentswf.admission")
SPAWN_ADMIT_WAIT_SECONDS = 5.0  # at most, for a starting attempt's keeper pid before refusing


async def _record(recorder: ActorRef, socket: str, peer: Peer, reason: str) -> None:
    command = command_of(peer.pid)
    if not is_connector(peer):  # read from a pid given to another process since: not the connector's
        command = []
    await recorder.tell(ConnectionRefused(wall(), socket, peer.pid, command, reason))


def gone_refusal(whose: str, pid: int | None) -> str:
    return (
        f"this is {whose}, and process {pid}, which connected to it, is gone: its pid is another "
        "process's now. Nothing was done."
    )


def agent_admit(agent: str, attempts: LiveAttempts, recorder: ActorRef) -> Admit | None:
    """Admit on `agent`'s socket the run's own process and the processes of `agent`'s live
    attempts. A connection while `agent` is starting waits for its keeper's pid (up to
    SPAWN_ADMIT_WAIT_SECONDS). Whatever admits it, the pid must name, after the decision, the
    process that connected (`is_connector`): a connector gone, its pid given to one of
    `agent`'s processes (its keeper, say), is not `agent`'s. None where no check can be made
    (the run's `operator_admit` said so)."""
    if not parents_readable():
        return None
    run_pid = os.getpid()

    def decide(pid: int | None) -> str | None:
        return agent_refusal(pid, agent=agent, run_pid=run_pid, roots=attempts.of(agent), parent_of=parent_of)

    async def admit(peer: Peer) -> str | None:
        refusal = decide(peer.pid)
        if refusal is not None and peer.pid is not None and attempts.is_starting(agent):  # its keeper is on its way
            with anyio.move_on_after(SPAWN_ADMIT_WAIT_SECONDS):
                while refusal is not None and attempts.is_starting(agent):
                    await attempts.changed()
                    refusal = decide(peer.pid)
        if refusal is None and not is_connector(peer):
            refusal = gone_refusal(f"{agent}'s socket", peer.pid)
        if refusal is not None:
            await _record(recorder, f"agent {agent}", peer, refusal)
        return refusal

    return admit


def operator_admit(attempts: LiveAttempts, recorder: ActorRef, run_mark: str) -> Admit | None:
    """Admit on the operator socket any process but those of the run's live attempts, those
    under a keeper an agent holds (its pane's), and those carrying `run_mark`; and only while
    its pid names the process that connected. None where no check can be made, which it says:
    once a run, as each run has one operator socket."""
    if not parents_readable():
        _log.warning("processes' parents can't be read here (no /proc): the run can't check who connects")
        return None

    def mark_of(pid: int) -> str | None:
        return environment_value(pid, MARK_VARIABLE)

    async def admit(peer: Peer) -> str | None:
        refusal = operator_refusal(
            peer.pid, attempts=attempts.everyone, parent_of=parent_of, run_mark=run_mark, mark_of=mark_of
        )
        if refusal is None and not is_connector(peer):
            refusal = gone_refusal("the run's operator socket", peer.pid)
        if refusal is not None:
            await _record(recorder, "operator", peer, refusal)
        return refusal

    return admit
