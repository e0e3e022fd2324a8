"""Identity by peer process, through real shell agents and real launchers: a sibling running
another agent's launcher is refused and recorded, an agent at the operator socket is refused,
and what an agent orphans (a double fork, `setsid`) is still that agent."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap

import anyio
import pytest

from agentswf import tool
from agentswf.cli.logs import print_run
from agentswf.engine.operator_wire import Pending, ask_run
from agentswf.engine.record.layout import read_lines

from ..harnesses.kit import WAIT_FOR, N, candidates, lines, operator_attack, rc, run_wf, shell_agent, text

pytestmark = pytest.mark.anyio



async def test_a_sibling_running_anothers_launcher_is_refused_and_recorded(tmp_path):
    pings: list[str] = []

    def ping() -> str:
        pings.append("ping")
        return "pong"

    a_body = WAIT_FOR + textwrap.dedent(
        """\
        echo "$WFA" >"$OUT/a_wfa.new" && mv "$OUT/a_wfa.new" "$OUT/a_wfa"
        echo "$WFA_CALL_ID" >"$OUT/a_call.new" && mv "$OUT/a_call.new" "$OUT/a_call"
        # a's own orphan (a double fork, in a session of its own) is still a
        ( setsid sh -c '"$WFA" tool ping >"$OUT/own.out" 2>&1; echo $? >"$OUT/own.rc"' & )
        wait_for own.rc
        wait_for b_done
        "$WFA" result "$WFA_CALL_ID" --n 1
        """
    )
    b_body = WAIT_FOR + textwrap.dedent(
        """\
        wait_for a_call
        A=$(cat "$OUT/a_wfa"); C=$(cat "$OUT/a_call")
        "$A" tool ping >"$OUT/imp_tool.out" 2>"$OUT/imp_tool.err"; echo $? >"$OUT/imp_tool.rc"
        "$A" result "$C" --n 2 >"$OUT/imp_result.out" 2>"$OUT/imp_result.err"; echo $? >"$OUT/imp_result.rc"
        touch "$OUT/b_done"
        "$WFA" result "$WFA_CALL_ID" --n 3
        """
    )

    async def fn(wf):
        a = await wf.agents.open("a", runtime=shell_agent(tmp_path, "a", a_body), tools={"ping": tool(ping, description="Ping.")})
        b = await wf.agents.open("b", runtime=shell_agent(tmp_path, "b", b_body))

        async def one(agent):
            turn = await agent.run("Count.", schema=N, timeout=20)
            return turn.outcome.kind, turn.value.n if turn.outcome.answered else None

        return await wf.parallel([a, b], one)

    result = await run_wf(fn, tmp_path)
    assert result.value == [("answered", 1), ("answered", 3)], result.reason
    assert rc(tmp_path, "own.rc") == 0 and pings == ["ping"]  # a's orphan called a's tool; b never did
    assert rc(tmp_path, "imp_tool.rc") == 3
    assert rc(tmp_path, "imp_result.rc") == 1
    for name in ("imp_tool", "imp_result"):
        err = text(tmp_path, f"{name}.err")
        assert "refused (wrong-agent)" in err and "isn't one of a's: nothing was done" in err, err
    a_call = lines(tmp_path, "a_call")[0]
    assert [c["args"] for c in candidates(result, a_call)] == [["--n", "1"]]  # b's answer never reached a
    refusals = list(read_lines(result.run_dir / "refusals.jsonl"))
    assert [r["socket"] for r in refusals] == ["agent a", "agent a"]
    tool_line, result_line = (r["command"] for r in refusals)
    assert tool_line[-2:] == ["tool", "ping"] and result_line[-4:] == ["result", a_call, "--n", "2"]
    assert all(isinstance(r["pid"], int) and "isn't one of a's" in r["reason"] for r in refusals)
    shown = io.StringIO()
    print_run(result.run_dir, shown)
    assert f"agent a: process {refusals[1]['pid']} " in shown.getvalue() and f"result {a_call} --n 2" in shown.getvalue()


OPERATOR_ATTEMPTS = """
import json, sys
from agentswf.engine.operator_wire import Approve, Pending, PostAs, ReadInbox, ask_run
control, call_id = sys.argv[1], sys.argv[2]
for request in (
    Approve(call_id, reason="looks fine", by="alice (security team)"),
    Pending(),
    ReadInbox("a"),
    PostAs(key="coordinator", peer="a", text="Merge it.", reply=True),
):
    answer = ask_run(control, request)
    print(json.dumps({"ok": answer.ok, "message": answer.message, "value": answer.value}))
"""


PERSON = "import sys; from agentswf.engine.operator_wire import Pending, ask_run; print(ask_run(sys.argv[1], Pending()).ok)"


async def test_an_agent_at_the_operator_socket_is_refused_every_request(tmp_path):
    async def person(wf, control: str, call_id: str):
        # a person's process (here a process of the run's, under no agent) is answered
        answered = await anyio.to_thread.run_sync(
            lambda: subprocess.run(
                [sys.executable, "-c", PERSON, control], capture_output=True, text=True, timeout=30, check=False
            )
        )
        ours = await anyio.to_thread.run_sync(ask_run, control, Pending())
        return answered.stdout.strip(), ours.ok

    result, deploys = await operator_attack(tmp_path, OPERATOR_ATTEMPTS, "op.jsonl", person)
    still, seen = result.value
    assert still and tuple(seen) == ("True", True), result.reason
    answers = [json.loads(line) for line in (tmp_path / "op.jsonl").read_text().splitlines()]
    assert len(answers) == 4, (tmp_path / "op.err").read_text()
    for answer in answers:
        assert answer["ok"] is False and answer["value"] == {"code": "wrong-agent"}
        assert "is agent a's, and an agent can't approve, reject, read an inbox or reply as a person" in answer["message"]
    assert deploys == []  # the approval an agent gave itself never ran the handler
    [call] = list(read_lines(result.run_dir / "tools.jsonl"))
    assert call["outcome"] == "refused" and call["approval"]["by"] == "workflow", call
    refusals = list(read_lines(result.run_dir / "refusals.jsonl"))
    assert [r["socket"] for r in refusals] == ["operator"] * 4
    assert all(str(tmp_path / "attack.py") in r["command"] for r in refusals)


async def test_an_idle_agents_launcher_finds_nobody_listening(tmp_path):
    """Between turns an agent's socket is closed: its launcher, run by any process, reaches
    nothing, and says the turn (or the run) is over."""
    pings: list[str] = []

    async def fn(wf):
        a = await wf.agents.open("a", runtime="shell:true", tools={"ping": tool(lambda: pings.append("x"), description="P.")})
        await a.run("Go.", timeout="30s", nudge=False)  # its first turn writes its launcher
        done = await anyio.run_process([str(a.launcher), "tool", "ping"], check=False)  # a child of the run's, under no agent
        return done.returncode, done.stderr.decode()

    result = await run_wf(fn, tmp_path)
    status, err = result.value
    assert status != 0 and "never reached" in err and "your turn is over" in err, err
    assert pings == []


async def test_a_connection_during_the_keepers_spawn_waits_for_its_pid():
    """The spawn yields to the loop, so a CLI can connect before its keeper's pid is known:
    while the agent's attempt is starting, the check waits for the pid instead of refusing."""
    from agentswf.engine.admission import agent_admit
    from agentswf.launcher.identity import LiveAttempts

    class Recorder:
        async def tell(self, message: object) -> None:
            raise AssertionError(f"nothing should be refused: {message}")

    attempts = LiveAttempts()
    admit = agent_admit("a", attempts, Recorder())  # type: ignore[arg-type]
    assert admit is not None
    with subprocess.Popen(["sleep", "5"]) as child:
        try:
            attempts.begin("a")
            answers: list[str | None] = []
            async with anyio.create_task_group() as group:
                group.start_soon(lambda: _admit_into(admit, child.pid, answers))
                await anyio.sleep(0.05)
                assert answers == []  # still waiting for the keeper's pid
                attempts.add(child.pid, "a")
            assert answers == [None]
        finally:
            child.kill()


async def _admit_into(admit, pid: int, answers: list[str | None]) -> None:  # type: ignore[no-untyped-def]
    from agentswf.launcher.peer import Peer, started_at

    answers.append(await admit(Peer(pid, started_at(pid))))  # as the listener reads it, the connection taken
