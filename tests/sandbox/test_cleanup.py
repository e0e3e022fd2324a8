"""However a sandboxed turn or run ends, kill -9 included, nothing of it is left: no process, no home."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from .kit import ANSWER, agent, marked, needs_bwrap, run

pytestmark = [pytest.mark.anyio, needs_bwrap]
GONE_WITHIN_SECONDS = 10.0

# Children that outlive the shell unless the sandbox goes: plain, detached, and deaf to SIGTERM.
STRAYS = """\
    sleep 1000 &
    setsid sleep 1000 &
    sh -c 'trap "" TERM; while :; do sleep 1; done' &
    echo "$WFA" >wfa
    touch ready
"""


async def gone(token: str) -> list[int]:
    """The test's processes still alive once they've had time to go (none, it is hoped)."""
    with anyio.move_on_after(GONE_WITHIN_SECONDS):
        while marked(token):
            await anyio.sleep(0.05)
    return marked(token)


def run_dir_of(place: Path) -> Path:
    return Path((place / "ws" / "wfa").read_text().strip()).parent.parent


@pytest.mark.parametrize("ending", ["answered", "timed-out", "cancelled"])
async def test_nothing_is_left_after_a_turn_ends(place, ending):
    token = secrets.token_hex(4)
    body = STRAYS + (ANSWER if ending == "answered" else "sleep 1000")

    async def fn(wf):
        box = await wf.sandboxes.open("box", cwd="ws", write=["."])
        a = await wf.agents.open("a", runtime=agent(place / "ws", "a", body, token), sandbox=box)
        if ending == "cancelled":
            with anyio.move_on_after(3):
                await a.run("Work.", timeout=30)
            return "cancelled"
        turn = await a.run("Work.", timeout=30 if ending == "answered" else 3)
        assert len(marked(token)) == 0, "the turn's processes outlived it"
        return turn.outcome.kind

    result = await run(fn, place)
    assert result.outcome == "completed", result.reason
    assert result.value == ending
    assert await gone(token) == []
    assert not run_dir_of(place).exists()  # the agent's home went with the run's directory


async def test_nothing_is_left_after_the_run_is_killed(place):
    token = secrets.token_hex(4)
    runtime = agent(place / "ws", "a", STRAYS + "sleep 1000", token)
    script = place / "run.py"
    script.write_text(
        textwrap.dedent(
            f"""\
            import anyio, agentswf
            from agentswf import Runtime, workflow

            @workflow(name="killed", description="Killed mid-turn.")
            async def fn(wf):
                box = await wf.sandboxes.open("box", cwd="ws", write=["."])
                a = await wf.agents.open("a", runtime=Runtime(harness="shell", command={runtime.command!r},
                                         env={runtime.env!r}), sandbox=box)
                await a.run("Work.", timeout=60)

            anyio.run(lambda: agentswf.run(fn, cwd={str(place)!r}))
            """
        )
    )
    process = subprocess.Popen([sys.executable, str(script)], cwd=place, stderr=subprocess.DEVNULL)
    try:
        with anyio.fail_after(20):
            while not (place / "ws" / "ready").exists():
                await anyio.sleep(0.05)
        assert len(marked(token)) >= 4  # the shell, three strays (and the sandbox's init)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    finally:
        if process.poll() is None:
            process.kill()
    assert await gone(token) == []
    with anyio.move_on_after(GONE_WITHIN_SECONDS):
        while run_dir_of(place).exists():
            await anyio.sleep(0.05)
    assert not run_dir_of(place).exists()
