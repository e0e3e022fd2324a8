"""An agent's sandbox on the Temporal engine: its worker runs each turn in it (bubblewrap), so
the agent, which holds no run key, can't reach the frontend or read the key either."""

from __future__ import annotations

import socket
from pathlib import Path
from uuid import uuid4

import anyio
import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

import agentswf
from agentswf import workflow
from agentswf.temporal import TemporalEngine

from ..sandbox.kit import needs_bwrap

PROBE = """#!/bin/bash
cat >/dev/null
said=""
say() {{ said="$said$*;"; }}
say "readme=$(cat readme)"
(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && say "FRONTEND REACHED" || say "frontend: no"
cat {key} >/dev/null 2>&1 && say "KEY READ" || say "key: no"
touch {outside} 2>/dev/null  # its own /tmp, if anything: not the worker's
echo made >made && say "workspace: wrote"
"$WFA" result "$WFA_CALL_ID" "$said"
"""


@needs_bwrap
async def test_a_sandboxed_agent_on_temporal_answers_and_reaches_neither_the_frontend_nor_the_key(
    temporal_address: str, tmp_path: Path, run_key_file: Path
) -> None:
    port = int(temporal_address.rsplit(":", 1)[1])
    socket.create_connection(("127.0.0.1", port), timeout=5).close()  # from here, unsandboxed, it is reached
    assert run_key_file.read_text()  # and the key is read
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "readme").write_text("in the workspace\n")
    probe = workspace / "probe.sh"
    probe.write_text(PROBE.format(port=port, key=run_key_file, outside=tmp_path / "outside"))

    @workflow(name="sandboxed", description="A sandboxed agent probes what it can reach.")
    async def flow(wf):  # type: ignore[no-untyped-def]
        agent = await wf.agents.open("a", runtime=f"shell:/bin/bash {probe}", sandbox={"cwd": "ws", "write": ["."]})
        return (await agent.run("Probe.", timeout="30s")).value

    engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
    with anyio.fail_after(60):
        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path, engine=engine)
    assert result.value == "readme=in the workspace;frontend: no;key: no;workspace: wrote;", result.reason
    assert (workspace / "made").read_text() == "made\n" and not (tmp_path / "outside").exists()


async def test_a_sandbox_on_temporal_is_a_spec_of_the_agents_own(temporal_address: str, tmp_path: Path) -> None:
    @workflow(name="bad-sandboxes", description="Sandboxes the Temporal engine refuses, before any turn.")
    async def flow(wf):  # type: ignore[no-untyped-def]
        said = []
        for given in ({"network": ["not a host!"]}, "a box"):
            try:
                await wf.agents.open(f"a{len(said)}", runtime="shell:true", sandbox=given)
            except agentswf.DefinitionError as error:
                said.append(str(error))
        return said

    engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
    with anyio.fail_after(60):
        result = await agentswf.run(flow, run_root=tmp_path / "runs", engine=engine)
    bad_host, not_a_spec = result.value
    assert bad_host.startswith("agent a0: sandbox network: "), bad_host
    assert not_a_spec == ("agent a1: on the Temporal engine sandbox= takes a sandbox of wf.sandboxes.open or a spec of "
                          "its own (a SandboxSpec or a dict of cwd, read, write, network), not str"), not_a_spec


SHARER = """#!/bin/bash
cat >/dev/null
echo "$WFA_AGENT" >"$WFA_AGENT.out" 2>/dev/null && wrote=yes || wrote=no
cat {key} >/dev/null 2>&1 && key="KEY READ" || key="key: no"
"$WFA" result "$WFA_CALL_ID" "$(pwd | xargs basename) wrote=$wrote $key"
"""


@needs_bwrap
async def test_agents_share_a_sandbox_of_wf_sandboxes_on_temporal(
    temporal_address: str, tmp_path: Path, run_key_file: Path
) -> None:
    workspace = tmp_path / "ws"
    (workspace / "out").mkdir(parents=True)
    sharer = tmp_path / "sharer.sh"
    sharer.write_text(SHARER.format(key=run_key_file))

    @workflow(name="shared-box", description="Two agents in one sandbox of wf.sandboxes.")
    async def flow(wf):  # type: ignore[no-untyped-def]
        box = await wf.sandboxes.open("shared", cwd="ws", read=[str(sharer)], write=["out"])
        same = await wf.sandboxes.open("shared", cwd="ws", read=[str(sharer)], write=["out"])
        try:
            await wf.sandboxes.open("shared", cwd="ws")
        except agentswf.DefinitionError as error:
            refusal = str(error)
        runtime = f"shell:/bin/bash {sharer}"
        writer = await wf.agents.open("writer", runtime=runtime, sandbox=box, cwd="ws/out")
        reader = await wf.agents.open("reader", runtime=runtime, sandbox=box)
        said = [(await agent.run("Write.", timeout="30s")).value for agent in (writer, reader)]
        return {"said": said, "same": same is box, "refusal": refusal, "spec": [box.key, box.spec.cwd, list(box.spec.write)]}

    engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
    with anyio.fail_after(60):
        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path, engine=engine)
    assert result.value == {
        "said": ["out wrote=yes key: no", "ws wrote=no key: no"],  # its cwd is the sandbox's unless given
        "same": True,
        "refusal": "sandbox shared is already open with a different spec",
        "spec": ["shared", str(workspace), ["out"]],
    }, result.reason
    assert (workspace / "out" / "writer.out").read_text() == "writer\n" and not (workspace / "reader.out").exists()
    logged = (result.run_dir / "log.jsonl").read_text()
    assert "sandbox shared opened" in logged


def test_a_sandbox_specs_paths_are_from_the_agents_cwd_as_locally_unless_it_names_one() -> None:
    from agentswf.temporal.driver import sandbox_spec as _sandbox_spec

    run, agent = Path("/work/repo"), Path("/work/repo/.awf/worktrees/r1/fix")
    own = _sandbox_spec("a", {"write": ["."]}, run, agent)
    assert own is not None and own.cwd == str(agent)  # write=["."] on a worktree writes the worktree
    named = _sandbox_spec("a", {"cwd": "src", "write": ["."]}, run, agent)
    assert named is not None and named.cwd == str(run / "src")
