"""With the payload codec on, the examples give on two `awf worker`s the values they give locally,
and the history holds none of them; the Temporal page's code runs with the key too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any
from uuid import uuid4

import anyio
import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")
pytest.importorskip("cryptography", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

from temporalio.client import Client

from agentswf.temporal import on_asyncio
from agentswf.temporal.turns import turns_ran
from tests.docs.blocks import blocks
from tests.temporal.test_codec import AWF, RUN_SECONDS, Processes, _env, new_key, processes  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ("review_fix/review_fix.py", "tools/triage.py", "messaging/merge.py")
MIN_WORD_CHARS = 7  # a value's words this long are looked for in the history: shorter ones turn up in random bytes


def words(value: Any) -> set[str]:
    """The strings in `value` (keys and leaves) at least MIN_WORD_CHARS long."""
    if isinstance(value, dict):
        return {word for key, item in value.items() for word in words(key) | words(item)}
    if isinstance(value, list):
        return {word for item in value for word in words(item)}
    return {value} if isinstance(value, str) and len(value) >= MIN_WORD_CHARS else set()


def awf_run(file: str, env: dict[str, str], cwd: Path, *more: str) -> Any:
    cwd.mkdir(exist_ok=True)
    done = subprocess.run([*AWF, "run", str(ROOT / "examples" / file), "--plain", "--run-root", str(cwd / "runs"), *more],
                          env=env, cwd=cwd, capture_output=True, text=True, timeout=RUN_SECONDS, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_examples_give_their_local_values_on_two_workers_with_the_codec_on(
    temporal_address: str, tmp_path: Path, processes: Processes  # noqa: F811
) -> None:
    key, queue = new_key(), f"test-{uuid4().hex[:8]}"
    keyed = _env(tmp_path, AGENTSWF_PAYLOAD_KEY=key)
    for name in ("one", "two"):
        processes.start([*AWF, "worker", "--address", temporal_address, "--task-queue", queue, "--run-root",
                         str(tmp_path / name)], keyed, "awf: worker on")
    seen: set[Path] = set()
    for file in EXAMPLES:
        local = awf_run(file, _env(tmp_path), tmp_path / "local")
        temporal = awf_run(file, keyed, tmp_path / "temporal", "--engine", "temporal", "--address", temporal_address,
                           "--task-queue", queue, "--no-turns-here")
        assert temporal == local, file
        [record] = set((tmp_path / "temporal" / "runs").glob("*/*/temporal.json")) - seen  # this run's
        seen.add(record)
        workflow_id = json.loads(record.read_text())["workflow_id"]

        async def history(workflow_id: str = workflow_id) -> bytes:
            fetched = await (await Client.connect(temporal_address)).get_workflow_handle(workflow_id).fetch_history()
            return b"".join(event.SerializeToString() for event in fetched.events)

        raw = anyio.run(on_asyncio, history)
        assert words(local) and [word for word in words(local) if word.encode() in raw] == [], file
    turns = [turn for name in ("one", "two") for record in seen
             for turn in turns_ran(tmp_path / name, record.parent.parent.name, record.parent.name)]
    assert len(turns) >= len(EXAMPLES)  # the turns ran on the workers


def test_the_temporal_pages_code_runs_with_the_codec_on(tmp_path: Path) -> None:
    [block] = [block for block in blocks((ROOT / "docs" / "guide" / "temporal.md").read_text())
               if block.language == "python" and "DevServer" in block.code]
    (tmp_path / "page.py").write_text(block.code)
    done = subprocess.run([sys.executable, "page.py"], env=_env(tmp_path, AGENTSWF_PAYLOAD_KEY=new_key()), cwd=tmp_path,
                          capture_output=True, text=True, timeout=RUN_SECONDS, check=False)
    assert done.returncode == 0, done.stderr
