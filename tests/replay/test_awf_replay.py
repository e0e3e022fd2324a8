"""`awf replay` and `awf export` on the review-fix example: a run of its real shell agents recorded,
replayed with no agent started, a changed file's divergence printed, and an exported record
replayed in a fresh copy elsewhere, as CI would on a clone."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "review_fix"
TIMEOUT_SECONDS = 120


def awf(*words: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentswf", *words], capture_output=True, text=True,
                          timeout=TIMEOUT_SECONDS, cwd=cwd)  # fmt: skip


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """A copy of the example (its agents log each start), and a run of it recorded under `runs`."""
    home = tmp_path_factory.mktemp("review-fix")
    example = home / "review_fix"
    shutil.copytree(EXAMPLE, example, ignore=shutil.ignore_patterns("__pycache__", ".awf"))
    for agent in ("reviewer", "fixer"):  # each start of an agent leaves a line: a replay must leave none
        script = example / "agents" / f"{agent}.py"
        script.write_text(f"open({str(home / 'started')!r}, 'a').write('{agent}\\n')\n" + script.read_text())
    ran = awf("run", str(example / "review_fix.py"), "--run-root", str(home / "runs"), "--json", cwd=home)
    assert ran.returncode == 0, ran.stderr
    assert (home / "started").read_text().split() == ["reviewer", "fixer", "reviewer"]
    return home, example, json.loads(ran.stdout)["run_id"]


def test_awf_replay_exits_0_with_no_agent_started(recorded: tuple[Path, Path, str]) -> None:
    home, example, run_id = recorded
    before = (home / "started").read_text()
    done = awf("replay", run_id, str(example / "review_fix.py"), "--run-root", str(home / "runs"), cwd=home)
    assert done.returncode == 0, done.stderr
    assert "replayed to its recorded ending (completed), with no agent CLI" in done.stderr
    assert (home / "started").read_text() == before
    again = awf("replay", run_id, "--run-root", str(home / "runs"), "--tools", "record", cwd=home)  # the file on record
    assert again.returncode == 0, again.stderr
    assert "the file on record" in again.stderr


def test_awf_replay_of_a_changed_file_exits_1_with_the_divergence(recorded: tuple[Path, Path, str], tmp_path: Path) -> None:
    home, example, run_id = recorded
    changed = tmp_path / "review_fix"
    shutil.copytree(example, changed)
    source = changed / "review_fix.py"
    source.write_text(source.read_text().replace("Fix this problem, and nothing else:", "Fix this:"))
    done = awf("replay", run_id, str(source), "--run-root", str(home / "runs"), cwd=home)
    assert done.returncode == 1, done.stderr
    assert "diverged from its record" in done.stderr
    assert "agent fixer turn 1: the prompt differs from the record" in done.stderr
    assert "-Fix this problem, and nothing else:" in done.stderr and "+Fix this:" in done.stderr
    relaxed = awf("replay", run_id, str(source), "--run-root", str(home / "runs"), "--not-strict", cwd=home)
    assert relaxed.returncode == 0, relaxed.stderr


def test_an_exported_record_replays_in_a_fresh_copy_elsewhere(recorded: tuple[Path, Path, str], tmp_path: Path) -> None:
    home, example, run_id = recorded
    exported = home / "exported"
    done = awf("export", run_id, str(exported), "--run-root", str(home / "runs"), cwd=home)
    assert done.returncode == 0, done.stderr
    assert json.loads((exported / "export.json").read_text())["format"] == 1
    run = json.loads((exported / "run.json").read_text())
    assert (run["cwd"], run["control"]) == (".", None)
    text = "".join(path.read_text() for path in exported.rglob("*") if path.is_file())
    assert str(home) not in text and "/tmp/awf-" not in text and str(Path.home()) not in text
    assert "<wfa> result" in text  # the launcher, written as no machine's path
    assert not (exported / "attempts").exists() and not (exported / "log.jsonl").exists()
    # a fresh clone: the example and the exported record copied, the original gone from sight
    clone = tmp_path / "clone"
    shutil.copytree(example, clone / "review_fix")
    shutil.copytree(exported, clone / "records" / "review-fix")
    replayed = awf("replay", "records/review-fix", "review_fix/review_fix.py", cwd=clone)
    assert replayed.returncode == 0, replayed.stderr
    refused = awf("replay", "records/review-fix", cwd=clone)
    assert refused.returncode == 2 and "names no file to load" in refused.stderr
    again = awf("export", run_id, str(exported), "--run-root", str(home / "runs"), cwd=home)
    assert again.returncode == 2 and "not empty" in again.stderr


def test_a_newer_export_format_is_refused_saying_why(recorded: tuple[Path, Path, str], tmp_path: Path) -> None:
    home, example, run_id = recorded
    exported = tmp_path / "exported"
    assert awf("export", run_id, str(exported), "--run-root", str(home / "runs"), cwd=home).returncode == 0
    marker = exported / "export.json"
    marker.write_bytes(msgspec.json.encode({**json.loads(marker.read_text()), "format": 2}))
    done = awf("replay", str(exported), str(example / "review_fix.py"), cwd=home)
    assert done.returncode == 2
    assert "an exported record of format 2, newer than this agentswf reads (1)" in done.stderr
