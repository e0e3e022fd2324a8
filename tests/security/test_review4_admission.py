"""Review 4: a connection refused while its agent starts is checked again later for a pid only.

An agent's socket listens from the start of its turn, before its attempt's keeper is spawned;
a request on it then waits for the keeper's pid (`admission.agent_admit`, up to
SPAWN_ADMIT_WAIT_SECONDS) and is decided again once it is known. `peer_pid` checked, through
the connection's pidfd, that the connecting process ran when the request arrived, but the
second decision is made for the pid alone, seconds later maybe: by then the connector may have
exited and its pid gone to another process. If that process is the keeper (sibling b's connector
connects as a's socket appears, exits once refused, and b has cycled the pids so that the next one
given is its connector's, as `test_a_sibling_cant_call_anothers_tool_by_reusing_a_pid` cycles
them), b's request is admitted as a's. Here the connector is a real process that exits and is
reaped; the keeper given its pid is the table's (a real pid cycle can't be timed in a test).
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import anyio
import pytest

from agentswf.engine.admission import agent_admit
from agentswf.launcher.identity import LiveAttempts

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the identity check reads /proc"),
]


class Recorded:
    """The Recorder's part in a refusal: the refusal is told to it."""

    def __init__(self) -> None:
        self.told: list[Any] = []

    async def tell(self, message: Any) -> None:
        self.told.append(message)


async def test_a_connector_gone_while_its_agent_started_isnt_admitted_as_the_keeper_given_its_pid() -> None:
    attempts = LiveAttempts()
    attempts.begin("a")  # a's turn has begun; its keeper is being spawned
    recorder = Recorded()
    admit = agent_admit("a", attempts, recorder)  # type: ignore[arg-type]
    assert admit is not None
    connector = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])  # b's, connected to a's socket
    decided: list[str | None] = []
    try:
        async with anyio.create_task_group() as group:

            async def check() -> None:
                decided.append(await admit(connector.pid))  # as the listener asks, the pidfd check passed

            group.start_soon(check)
            await anyio.sleep(0.05)  # refused for now, waiting for a's keeper
            assert not decided
            connector.kill()
            connector.wait()  # gone and reaped: its pid is free
            attempts.add(connector.pid, "a")  # a's keeper, given that pid
    finally:
        if connector.poll() is None:
            connector.kill()
            connector.wait()
    assert decided[0] is not None, "b's request was admitted as a's"
    assert recorder.told  # and the refusal recorded
