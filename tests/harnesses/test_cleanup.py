"""However a turn or run ends, nothing of the agent is left: no process of its group, no socket,
no launcher, no /tmp/awf-* directory."""

from __future__ import annotations

import functools
from pathlib import Path

import anyio
import pytest

from agentswf.launcher.place import sockets_root

from .kit import N, alive, group_members, lines, run_wf, shell_agent, text, turns

pytestmark = pytest.mark.anyio

# Children that outlive the CLI unless its whole group goes: plain ones, and one that ignores SIGTERM.
SPAWN = """
echo $$ >"$OUT/pgid"
echo "$WFA" >"$OUT/wfa"
sleep 1000 & echo $! >>"$OUT/pids"
sleep 1000 & echo $! >>"$OUT/pids"
sh -c 'trap "" TERM; echo $$ >>"$OUT/pids"; while :; do sleep 1; done' &
while [ "$(wc -l <"$OUT/pids")" -lt 3 ]; do sleep 0.01; done
touch "$OUT/ready"
"""


@pytest.fixture
def made(monkeypatch):
    """Every /tmp/awf-* directory a run of this test makes (other test sessions may make theirs)."""
    import agentswf.engine.run as engine_run

    paths: list[Path] = []
    make = engine_run.make_run_dir

    def recording():
        path = make()
        paths.append(path)
        return path

    monkeypatch.setattr(engine_run, "make_run_dir", recording)
    return paths


def assert_nothing_left(tmp_path: Path, made: list[Path]) -> None:
    pids = [int(pid) for pid in lines(tmp_path, "pids")]
    pgid = int(text(tmp_path, "pgid"))
    assert len(pids) == 3
    assert [pid for pid in [pgid, *pids] if alive(pid)] == []
    assert group_members(pgid) == []
    launcher = Path(text(tmp_path, "wfa").strip())
    run_dir = launcher.parent.parent
    assert run_dir.name.startswith("awf-") and run_dir.parent == Path(sockets_root())
    assert not run_dir.exists() and not launcher.with_name("s.sock").exists()
    assert made == [run_dir]  # the run made one directory of sockets, and it is gone
    assert not any(path.exists() for path in made)


async def test_answered(tmp_path, made):
    runtime = shell_agent(tmp_path, "agent", SPAWN + '"$WFA" result "$WFA_CALL_ID" --n 1')

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        return (await agent.run("Count.", schema=N, timeout="10s")).outcome.kind

    result = await run_wf(fn, tmp_path)
    assert result.value == "answered"
    assert_nothing_left(tmp_path, made)


async def test_answered_and_the_cli_lingers(tmp_path, made):
    runtime = shell_agent(tmp_path, "agent", SPAWN + '"$WFA" result "$WFA_CALL_ID" --n 1; sleep 1000')

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        return (await agent.run("Count.", schema=N, timeout=0.5)).outcome.kind

    result = await run_wf(fn, tmp_path)
    assert result.value == "answered"
    assert_nothing_left(tmp_path, made)


async def test_timed_out(tmp_path, made):
    runtime = shell_agent(tmp_path, "agent", SPAWN + "sleep 1000")

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        return (await agent.run("Count.", schema=N, timeout=0.4)).outcome.kind

    result = await run_wf(fn, tmp_path)
    assert result.value == "timed-out"
    assert_nothing_left(tmp_path, made)


async def test_failed(tmp_path, made):
    runtime = shell_agent(tmp_path, "agent", SPAWN + "echo broken >&2; exit 3")

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        return (await agent.run("Count.", schema=N, timeout="10s")).outcome.kind

    result = await run_wf(fn, tmp_path)
    assert result.value == "failed"
    assert_nothing_left(tmp_path, made)


async def test_unanswered(tmp_path, made):
    runtime = shell_agent(tmp_path, "agent", SPAWN)

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        return (await agent.run("Count.", schema=N, timeout="10s", nudge=False)).outcome.kind

    result = await run_wf(fn, tmp_path)
    assert result.value == "unanswered"
    assert_nothing_left(tmp_path, made)


async def test_cancelled(tmp_path, made):
    runtime = shell_agent(tmp_path, "agent", SPAWN + "sleep 1000")

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)

        async def item(which):
            if which == "boom":
                while not (tmp_path / "ready").exists():
                    await anyio.sleep(0.01)
                raise ValueError("boom")
            await agent.run("Count.", schema=N, timeout="20s")

        await wf.parallel(["turn", "boom"], item)

    result = await run_wf(fn, tmp_path)
    assert result.outcome == "failed" and result.reason == "ValueError: boom"
    assert [t["outcome"]["kind"] for t in turns(result)] == ["cancelled"]
    assert_nothing_left(tmp_path, made)


async def test_run_timeout(tmp_path, made):
    runtime = shell_agent(tmp_path, "agent", SPAWN + "sleep 1000")

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        await agent.run("Count.", schema=N)

    result = await run_wf(fn, tmp_path, timeout=0.4)
    assert result.outcome == "timed-out"
    assert_nothing_left(tmp_path, made)


async def test_workflow_error_with_an_agent_mid_turn(tmp_path, made):
    runtime = shell_agent(tmp_path, "agent", SPAWN + "sleep 1000")

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        async with anyio.create_task_group() as group:
            group.start_soon(agent.run, "Count.")
            while not (tmp_path / "ready").exists():
                await anyio.sleep(0.01)
            raise RuntimeError("the workflow broke")

    result = await run_wf(fn, tmp_path)
    assert result.outcome == "failed" and "the workflow broke" in result.reason
    assert_nothing_left(tmp_path, made)


async def test_caller_cancelled(tmp_path, made):
    import agentswf
    from agentswf import workflow

    runtime = shell_agent(tmp_path, "agent", SPAWN + "sleep 1000")

    @workflow(name="t", description="d")
    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        await agent.run("Count.")

    async with anyio.create_task_group() as group:
        group.start_soon(functools.partial(agentswf.run, fn, run_root=tmp_path / "runs", cwd=tmp_path))
        with anyio.fail_after(20):
            while not (tmp_path / "ready").exists():  # its processes all started
                await anyio.sleep(0.02)
        group.cancel_scope.cancel()
    assert group.cancel_scope.cancelled_caught
    assert_nothing_left(tmp_path, made)


# Every way of backgrounding a process, including the two that leave the CLI's process group
# and session (`setsid`, and a double fork whose orphan is in a session of its own), and one
# that ignores SIGTERM and SIGHUP.
ESCAPES = """
echo "$AGENTSWF_MARK" >"$OUT/mark"
sleep 1000 & echo $! >>"$OUT/escapes"
nohup sh -c 'echo $$ >>"$OUT/escapes"; exec sleep 1000' >/dev/null 2>&1 &
setsid sh -c 'echo $$ >>"$OUT/escapes"; exec sleep 1000' </dev/null >/dev/null 2>&1 &
( sh -c 'echo $$ >>"$OUT/escapes"; exec sleep 1000' & )
( setsid sh -c 'trap "" TERM HUP; echo $$ >>"$OUT/escapes"; while :; do sleep 1; done' </dev/null >/dev/null 2>&1 & )
while [ "$(wc -l <"$OUT/escapes")" -lt 5 ]; do sleep 0.01; done
"""


@pytest.mark.parametrize("ending", ["answered", "timed-out"])
async def test_what_escapes_the_group_is_killed_when_the_attempt_ends(tmp_path, made, ending):
    from agentswf.harnesses.keeper import marked

    last = '"$WFA" result "$WFA_CALL_ID" --n 1' if ending == "answered" else "sleep 1000"
    runtime = shell_agent(tmp_path, "agent", ESCAPES + last)

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        kind = (await agent.run("Count.", schema=N, timeout=1.5)).outcome.kind
        pids = [int(pid) for pid in lines(tmp_path, "escapes")]
        # the run goes on: the attempt's end, not the run's, killed them
        return kind, pids, [pid for pid in pids if alive(pid)], marked(text(tmp_path, "mark").strip())

    result = await run_wf(fn, tmp_path)
    kind, pids, left, carrying = result.value
    assert kind == ending and len(pids) == 5
    assert left == [] and carrying == []
    assert not any(path.exists() for path in made)
