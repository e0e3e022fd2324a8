"""How a prompt is best put into codex's and pi's TUIs in a pane: typed key by key, or pasted.

    AGENTSWF_CLI_DIR=.ci/node/node_modules/.bin PYTHONPATH=. python benchmarks/pane_delivery.py [N]   (N=3)

For each CLI, interleaved N times each: its TUI started in a pane (the pane harness's own
tmux server under a keeper, its startup screens answered as in a run), then a multi-line
prompt of a turn's size (quotes, a non-ASCII letter) typed (`send-keys -l`) or pasted
(`paste-buffer -p`), then Enter. Timed from the first key to the scripted model receiving the
request; "intact" is whether the model got the prompt exactly. Prints the medians and the
ratio typed / pasted (the baseline is pasting, in the same run).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from agentswf.harnesses.codex import CodexHarness
from agentswf.harnesses.pane import TUIS, PaneHarness
from agentswf.harnesses.pi import PiHarness
from agentswf.harnesses.tmux import TmuxServer, tmux_path
from agentswf.testing.models import Conversation, ScriptedModel, Text, codex_env, find_cli, pi_env

LINE = "Check that the retry loop's backoff doubles, and that it stops after 'max_tries' — café. "
PROMPT = "\n".join(f"{n}. {LINE}" for n in range(18))  # ~1.7 KB over 18 lines, about a first turn's
ARRIVAL_SECONDS = 20.0  # a prompt not taken by then (codex, typed: Enter lost in its paste-burst guard) counts as lost


async def deliver(cli_name: str, typed: bool, root: Path) -> tuple[float, bool]:
    seen: list[tuple[float, str]] = []
    arrived_event = anyio.Event()

    def script(conv: Conversation) -> Text:
        seen.append((time.perf_counter(), conv.prompt))
        arrived_event.set()
        return Text("Finished.")

    async with ScriptedModel(script) as model:
        home = root / f"{cli_name}-{typed}-{time.monotonic_ns()}"
        env = codex_env(model, home) if cli_name == "codex" else pi_env(model, home)
        env |= {"PATH": os.environ["PATH"], "TERM": "xterm-256color"}
        executable = find_cli(cli_name)
        assert executable is not None, f"{cli_name} is not installed"
        cli = CodexHarness(executable) if cli_name == "codex" else PiHarness(executable, model="fake/fake-model")
        pane = PaneHarness(cli, TUIS[cli_name], tmux_path(env))
        pane.server = server = TmuxServer(pane.tmux, home / "tmux.sock")
        (home / "work").mkdir(parents=True)
        try:
            await server.start(env, home / "work")
            await server.open_window(TUIS[cli_name].launch(cli, None)[0], home / "work")
            assert await pane._past_startup() is None, await server.screen()
            start = time.perf_counter()
            await (server.type(PROMPT) if typed else server.paste(PROMPT))
            await anyio.sleep(0.15)  # as the pane harness does, before Enter
            await server.keys("Enter")
            with anyio.move_on_after(ARRIVAL_SECONDS):
                await arrived_event.wait()
            if not seen:
                print(f"{cli_name} typed={typed}: nothing arrived; its screen ends:\n{(await server.screen())[-400:]}")
                return ARRIVAL_SECONDS, False
        finally:
            await server.stop()
    arrived, prompt = seen[0]
    return arrived - start, prompt.strip() == PROMPT.strip()


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory(prefix="pane-delivery-") as directory:
        for cli_name in ("codex", "pi"):
            times: dict[bool, list[float]] = {True: [], False: []}
            intact: dict[bool, list[bool]] = {True: [], False: []}
            for _ in range(n):
                for typed in (True, False):
                    seconds, whole = await deliver(cli_name, typed, Path(directory))
                    times[typed].append(seconds)
                    intact[typed].append(whole)
            ours, baseline = statistics.median(times[True]), statistics.median(times[False])
            print(
                f"{cli_name}_typed_vs_pasted: typed={ours * 1000:.0f}ms pasted={baseline * 1000:.0f}ms "
                f"ratio={ours / baseline:.2f} intact typed={sum(intact[True])}/{n} pasted={sum(intact[False])}/{n}"
            )


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 3)
