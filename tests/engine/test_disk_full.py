"""A run whose record fills its disk: nothing is acknowledged that isn't on the record.

The run root is a 512 KiB tmpfs (CI runs as root, so it can mount one; elsewhere the test
is skipped, saying why). One shell agent makes many tool calls, each with an input of
about 6 KB, through its real launcher, under `awf run`: the disk fills part way through.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentswf.engine.record.layout import read_lines

CALLS = 120
PAD_CHARS = 6000  # a tools.jsonl line is a little more: 512 KiB holds about 80 of them

FLOW = '''
from agentswf import tool, workflow

@tool(description="Keep a note.")
def note(text: str) -> str:
    return "kept"

@workflow(name="notes", description="Many tool calls on a small disk.")
async def notes(wf):
    agent = await wf.agents.open("a", runtime="shell:{script}", tools={{"note": note}})
    return (await agent.run("Take notes.", timeout="120s", nudge=False)).outcome.kind
'''

AGENT = f'''#!/bin/sh
PAD=$(printf '%{PAD_CHARS}s' '' | tr ' ' x)
i=0
while [ $i -lt {CALLS} ]; do
  printf '{{"text": "n%s-%s"}}' "$i" "$PAD" | "$WFA" tool note >"$OUT/$i.out" 2>&1
  echo "$i $?" >>"$OUT/rcs"
  i=$((i+1))
done
echo '"done"' | "$WFA" result "$WFA_CALL_ID"
'''


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(disk)], capture_output=True, text=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip(f"can't mount a 512 KiB tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_full_disk_acknowledges_only_what_is_recorded_and_the_run_fails(tmp_path, small_disk, backend):
    out = tmp_path / "out"
    out.mkdir()
    script = tmp_path / "agent.sh"
    script.write_text(AGENT.replace('"$OUT', f'"{out}'))
    script.chmod(0o755)
    flow = tmp_path / "flow.py"
    flow.write_text(FLOW.format(script=script))
    done = subprocess.run(
        [sys.executable, "-m", "agentswf", "run", str(flow), "--run-root", str(small_disk), "--backend", backend],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "awf: notes failed: the run's record is incomplete" in done.stderr
    assert "completed" not in done.stderr

    codes = dict(line.split() for line in (out / "rcs").read_text().splitlines())
    assert len(codes) == CALLS
    acknowledged = {int(i) for i, code in codes.items() if code == "0"}
    unrecorded = {int(i) for i, code in codes.items() if code == "4"}
    assert acknowledged and unrecorded, codes  # the disk filled part way through
    assert acknowledged | unrecorded == set(range(CALLS))
    for i in unrecorded:
        said = (out / f"{i}.out").read_text()
        assert "internal-error" in said and "may have run" in said

    [run_dir] = small_disk.glob("notes/*")
    recorded = {int(line["input"]["text"].split("-")[0][1:]) for line in read_lines(run_dir / "tools.jsonl")}
    assert acknowledged <= recorded  # every acknowledged call is on the record
    for path in run_dir.rglob("*.jsonl"):  # whole lines only: a failed append was cut back off
        data = path.read_bytes()
        assert not data or data.endswith(b"\n")
        for raw in data.splitlines():
            json.loads(raw)
    assert not [path for path in run_dir.rglob("*") if path.name.endswith(".tmp")]  # no temp file left behind
