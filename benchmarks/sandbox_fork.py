"""What a sandbox adds to `agent.fork` of each real CLI, against the same fork unsandboxed, in one run.

    python benchmarks/sandbox_fork.py [N]      (default N=5; AGENTSWF_CLI_DIR names the CLIs' directory)

claude, codex and pi, offline against the scripted model. For each CLI, N times, an agent with a
spec of its own (`sandbox={"write": ["."]}`) and one without, alternating, each given one turn and
then forked, timed around `agent.fork`: the CLI's own fork (no model call), and for the sandboxed
one bubblewrap around it and the copy moved out of its home (`sandbox/copies.py`). Prints the
medians and their ratio.
"""

from __future__ import annotations

import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

import agentswf
from agentswf import Runtime, workflow
from agentswf.testing.models import Conversation, ScriptedModel, Shell, Text, claude_env, codex_env, find_cli, pi_env

CLIS = ("claude", "codex", "pi")
TAUGHT = re.compile(r"(/\S+/wfa) result (\w+)")  # the launcher and call id a turn's prompt teaches
ENVS = {"claude": claude_env, "codex": codex_env, "pi": pi_env}


def script(conv: Conversation) -> Any:
    found = TAUGHT.search(conv.prompt)
    if found is None or conv.tool_results:
        return Text("Done.")
    wfa, call = found.groups()
    return Shell(f"{wfa} result {call} ok")


async def measure(root: Path, rounds: int) -> dict[tuple[str, bool], list[float]]:
    times: dict[tuple[str, bool], list[float]] = {}
    async with ScriptedModel(script) as model:

        @workflow(name="sandbox-fork-bench", description="Forks of each CLI, sandboxed and not.")
        async def flow(wf: agentswf.Workflow) -> None:
            for cli in CLIS:
                model_name = "fake/fake-model" if cli == "pi" else None
                runtime = Runtime(harness=cli, command=(str(find_cli(cli)),), env=ENVS[cli](model, root / cli), model=model_name)
                for n in range(rounds):
                    for boxed in (False, True):
                        key = f"{cli}-{n}-{'box' if boxed else 'bare'}"
                        agent = await wf.agents.open(key, runtime=runtime, sandbox={"write": ["."]} if boxed else None)
                        await agent.run("Answer ok.", timeout=90)
                        start = time.perf_counter()
                        await agent.fork(f"{key}-fork")
                        times.setdefault((cli, boxed), []).append(time.perf_counter() - start)

        result = await agentswf.run(flow, run_root=root / "runs", cwd=root)
        if result.outcome != "completed":
            raise SystemExit(f"the run {result.outcome}: {result.reason}")
    return times


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    missing = [cli for cli in CLIS if find_cli(cli) is None]
    if missing:
        raise SystemExit(f"not installed: {', '.join(missing)} (set AGENTSWF_CLI_DIR)")
    with tempfile.TemporaryDirectory(prefix="awf-bench-fork-") as scratch:
        times = anyio.run(measure, Path(scratch), rounds)
    for cli in CLIS:
        bare, boxed = statistics.median(times[(cli, False)]), statistics.median(times[(cli, True)])
        print(f"{cli:7} fork: unsandboxed {bare * 1000:6.0f} ms  sandboxed {boxed * 1000:6.0f} ms  ratio {boxed / bare:.2f}")


if __name__ == "__main__":
    main()
