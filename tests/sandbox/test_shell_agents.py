"""Real shell agents in real sandboxes: what they can't read, write, reach or see, and that `wfa` still works."""

from __future__ import annotations

import secrets
import shutil
import sys
from pathlib import Path

import anyio
import pytest

import agentswf
from agentswf import tool
from agentswf.engine.record.layout import read_json, read_lines

from .kit import ANSWER, agent, marked, needs_bwrap, run

pytestmark = [pytest.mark.anyio, needs_bwrap]


async def test_a_reader_reads_its_cwd_and_nothing_else_and_writes_nothing(place):
    token = secrets.token_hex(4)
    secret = place / "home" / ".ssh" / "id_rsa"
    body = f"""\
        say "cwd=$(pwd) readme=$(cat readme)"
        cat {secret} >/dev/null 2>&1 && say "SECRET READ" || say "secret: no"
        cat {place / "docs" / "guide"} >/dev/null 2>&1 && say "DOCS READ" || say "docs: no"
        touch made 2>/dev/null && say "WROTE CWD" || say "cwd: read-only"
        ls $HOME/.ssh >/dev/null 2>&1 && say "HOME HAS SSH" || say "home: fresh"
        say "records: $(ls .awf | wc -l)"
        echo x >/tmp/mine-{token} && say "tmp: mine"
        {ANSWER}
    """

    (place / "ws" / ".awf" / "runs").mkdir(parents=True)  # another run's record, in the cwd

    async def fn(wf):
        box = await wf.sandboxes.open("reader", cwd="ws")
        reader = await wf.agents.open("r", runtime=agent(place / "ws", "r", body, token, HOME=str(place / "home")), sandbox=box)
        return (await reader.run("Read.", timeout=20)).value

    result = await run(fn, place)
    assert result.outcome == "completed", result.reason
    assert result.value.split("\n") == [
        f"cwd={place / 'ws'} readme=in the workspace",
        "secret: no",
        "docs: no",
        "cwd: read-only",
        "home: fresh",
        "records: 0",
        "tmp: mine",
    ]
    assert not (place / "ws" / "made").exists() and not Path(f"/tmp/mine-{token}").exists()  # its /tmp is its own


async def test_a_writer_writes_its_workspace_only_and_reads_what_it_was_given(place):
    token = secrets.token_hex(4)
    body = f"""\
        echo new >made && say "workspace: wrote"
        cat {place / "docs" / "guide"} && echo x >>{place / "docs" / "guide"} 2>/dev/null && say "DOCS WRITTEN"
        echo x >{place / "outside"} 2>/dev/null  # into the sandbox's own /tmp, if anywhere: not the host's
        echo x >/usr/evil 2>/dev/null && say "WROTE SYSTEM" || say "system: no"
        {ANSWER}
    """

    async def fn(wf):
        box = await wf.sandboxes.open("writer", cwd="ws", read=["../docs"], write=["."])
        writer = await wf.agents.open("w", runtime=agent(place / "ws", "w", body, token), sandbox=box)
        return (await writer.run("Write.", timeout=20)).value

    result = await run(fn, place)
    assert result.outcome == "completed", result.reason
    assert result.value.split("\n") == ["workspace: wrote", "system: no"]
    assert (place / "ws" / "made").read_text() == "new\n"
    assert (place / "docs" / "guide").read_text() == "a guide\n" and not (place / "outside").exists()


async def test_a_loopback_port_of_the_host_is_out_of_reach(place):
    token = secrets.token_hex(4)
    connected: list[bool] = []
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        probe = (
            f"{sys.executable} -c \"import socket,sys; s=socket.socket(); s.settimeout(2); "
            f"sys.exit(s.connect_ex(('127.0.0.1', {port})))\""
        )
        body = f"""\
            {probe} && say "CONNECTED" || say "loopback: refused"
            {ANSWER}
        """

        async def fn(wf):
            box = await wf.sandboxes.open("box", cwd="ws")
            a = await wf.agents.open("a", runtime=agent(place / "ws", "a", body, token), sandbox=box)
            return (await a.run("Connect.", timeout=20)).value

        async def accept(stream):
            connected.append(True)
            await stream.aclose()

        async with anyio.create_task_group() as group:
            group.start_soon(listener.serve, accept)
            result = await run(fn, place)
            group.cancel_scope.cancel()
    assert result.outcome == "completed", result.reason
    assert result.value == "loopback: refused" and connected == []


async def test_an_agent_cant_see_or_signal_another_agents_processes_or_reach_its_socket(place):
    token_a, token_b = secrets.token_hex(4), secrets.token_hex(4)
    hold = f"""\
        while [ ! -e done ]; do sleep 0.05; done
        say "a: held"
        {ANSWER}
    """
    look = f"""\
        say "processes: $(ls /proc | grep -c '^[0-9]')"
        kill -0 "$(cat a.pid)" 2>/dev/null && say "SIGNALLED A" || say "a: no such process"
        {sys.executable} -c "import socket,sys; s=socket.socket(socket.AF_UNIX); sys.exit(s.connect_ex(open('a.sock').read()))" \\
            && say "REACHED A" || say "a's socket: out of reach"
        {sys.executable} -c "import socket,sys; s=socket.socket(socket.AF_UNIX); sys.exit(s.connect_ex(open('control').read()))" \
            && say "REACHED THE OPERATOR" || say "operator socket: out of reach"
        "$WFA" result "$WFA_CALL_ID" "$(cat "$R")"
        touch done
    """

    async def fn(wf):
        box = await wf.sandboxes.open("shared", cwd="ws", write=["."])
        a = await wf.agents.open("a", runtime=agent(place / "ws", "a", hold, token_a), sandbox=box)
        b = await wf.agents.open("b", runtime=agent(place / "ws", "b", look, token_b), sandbox=box)
        async with anyio.create_task_group() as group:
            turns = {}

            async def one(name, agent_):
                turns[name] = await agent_.run("Go.", timeout=20)

            group.start_soon(one, "a", a)
            with anyio.fail_after(10):
                while not marked(token_a):
                    await anyio.sleep(0.02)
            (place / "ws" / "a.pid").write_text(str(max(marked(token_a))))
            (place / "ws" / "a.sock").write_text(str(a.launcher.with_name("s.sock")))
            (place / "ws" / "control").write_text(read_json(wf.run_dir / "run.json")["control"])
            await one("b", b)
        return {name: turn.value for name, turn in turns.items()}

    result = await run(fn, place)
    assert result.outcome == "completed", result.reason
    seen = result.value["b"].split("\n")
    assert int(seen[0].split(": ")[1]) <= 6  # its own shell, the ls, the grep, the sandbox's init: no one else's
    assert seen[1:] == ["a: no such process", "a's socket: out of reach", "operator socket: out of reach"]
    assert result.value["a"] == "a: held"


async def test_wfa_works_from_inside_tools_and_messages_included(place):
    token = secrets.token_hex(4)
    counted: list[int] = []
    body = f"""\
        say "$("$WFA" tool count --n 2)"
        "$WFA" send workflow "halfway" >/dev/null && say "sent"
        {ANSWER}
    """

    def count(n: int) -> str:
        """Count to n."""
        counted.append(n)
        return f"counted {n}"

    async def fn(wf):
        box = await wf.sandboxes.open("box", cwd="ws")
        a = await wf.agents.open("a", runtime=agent(place / "ws", "a", body, token), sandbox=box, tools={"count": tool(count)})
        await wf.route(a, wf, purpose="Report progress")
        got = []
        async with anyio.create_task_group() as group:

            async def listen():
                got.append((await wf.receive()).text)

            group.start_soon(listen)
            turn = await a.run("Count.", timeout=20)
        return [turn.outcome.kind, turn.value, got]

    result = await run(fn, place)
    assert result.outcome == "completed", result.reason
    assert result.value == ["answered", "counted 2\nsent", ["halfway"]]
    assert counted == [2]
    refused = list(read_lines(result.run_dir / "refusals.jsonl")) if (result.run_dir / "refusals.jsonl").exists() else []
    assert refused == []  # the identity check passed every call from inside


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"network": ["https://pypi.org"]}, "scheme, path"),
        ({"network": ["10.0.0.1"]}, "IP address"),
        ({"network": ["*.org"]}, "top-level domain"),
        ({"read": ["missing"]}, "does not exist"),
        ({"write": ["/"]}, "where every agent's socket is"),
        ({"network": "pypi.org"}, "are lists"),
    ],
)
async def test_a_bad_spec_fails_at_open_before_any_agent_starts(place, kwargs, says):
    token = secrets.token_hex(4)

    async def fn(wf):
        a = await wf.agents.open("a", runtime=agent(place / "ws", "a", "touch started", token))
        await wf.sandboxes.open("box", cwd="ws", **kwargs)
        await a.run("Never.", timeout=5)

    result = await run(fn, place)
    assert result.outcome == "failed" and "DefinitionError" in result.reason and says in result.reason
    assert not (place / "ws" / "started").exists()


async def test_without_bubblewrap_open_says_which_package_to_install(place, monkeypatch):
    monkeypatch.setenv("PATH", str(place))

    async def fn(wf):
        await wf.sandboxes.open("box", cwd="ws")

    result = await run(fn, place)
    assert result.outcome == "failed" and "install the package `bubblewrap`" in result.reason


async def test_a_sandbox_reopens_by_key_and_refuses_another_spec_and_another_sandbox_for_an_open_agent(place):
    async def fn(wf):
        box = await wf.sandboxes.open("box", cwd="ws")
        assert await wf.sandboxes.open("box", cwd="ws") is box
        with pytest.raises(agentswf.DefinitionError, match="different spec"):
            await wf.sandboxes.open("box", cwd="ws", write=["."])
        other = await wf.sandboxes.open("other", cwd="ws")
        a = await wf.agents.open("a", runtime="shell:true", sandbox=box)
        assert a.sandbox is box and await wf.agents.open("a", runtime="shell:true", sandbox=box) is a
        with pytest.raises(agentswf.DefinitionError, match="different sandbox"):
            await wf.agents.open("a", runtime="shell:true", sandbox=other)
        private = await wf.agents.open("p", runtime="shell:true", sandbox={"write": ["ws"]})
        inline = await wf.agents.open("i", runtime='shell:"$WFA" result "$WFA_CALL_ID" "$(pwd)"', sandbox={"cwd": "ws"})
        assert (await inline.run("Where?", timeout=20)).value == str(place / "ws")  # the sandbox's cwd is its own
        with pytest.raises(agentswf.DefinitionError, match="where every agent's socket is"):
            await wf.agents.open("root", runtime="shell:true", cwd="/", sandbox=box)
        with pytest.raises(agentswf.DefinitionError, match="sandbox= takes a Sandbox"):
            await wf.agents.open("q", runtime="shell:true", sandbox="box")
        return private.sandbox.key

    result = await run(fn, place)
    assert result.outcome == "completed", result.reason
    assert result.value == "agent:p"


async def test_the_keeper_stays_outside_with_bubblewrap_its_child_so_wfa_inside_passes_identity(place):
    token = secrets.token_hex(4)
    body = f"""\
        touch started
        while [ ! -e go ]; do sleep 0.05; done
        say "$("$WFA" peers >/dev/null && echo admitted)"
        {ANSWER}
    """

    def chain(pid: int) -> list[str]:
        names = []
        try:
            while pid > 1:
                names.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
                pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:  # a `sleep` of the agent's loop, gone meanwhile
            return []
        return names

    async def fn(wf):
        box = await wf.sandboxes.open("box", cwd="ws", write=["."])
        a = await wf.agents.open("a", runtime=agent(place / "ws", "a", body, token), sandbox=box)
        async with anyio.create_task_group() as group:
            turns = []

            async def one():
                turns.append(await a.run("Go.", timeout=20))

            group.start_soon(one)
            with anyio.fail_after(10):
                while not (place / "ws" / "started").exists():
                    await anyio.sleep(0.02)
            above = max((chain(pid) for pid in marked(token)), key=len)  # from the deepest process
            (place / "ws" / "go").write_text("")
        return above, turns[0].value

    result = await run(fn, place)
    assert result.outcome == "completed", result.reason
    above, value = result.value
    bwrap = next(i for i, line in enumerate(above) if line.startswith(shutil.which("bwrap") or "bwrap"))
    assert "keeper" in above[bwrap + 1]  # the sandbox's parent is the attempt's keeper, outside it
    assert value == "admitted"
