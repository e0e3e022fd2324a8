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


def test_awf_continue_from_a_turn_forks_a_new_run_running_only_what_follows(recorded: tuple[Path, Path, str]) -> None:
    home, example, run_id = recorded
    before = (home / "started").read_text()
    done = awf("continue", str(example / "review_fix.py"), run_id, "--from", "fixer:1", "--run-root", str(home / "runs"),
               "--json", cwd=home)  # fmt: skip
    assert done.returncode == 0, done.stderr
    forked = json.loads(done.stdout)
    assert forked["value"] == {"verdict": "approve", "rounds": 2, "fixed": ["calc.py"]}
    assert forked["run_id"] != run_id
    # the first review was played from the record; the fix (its workspace is the run's own) and the second review ran
    assert (home / "started").read_text() == before + "fixer\nreviewer\n"
    run = json.loads((Path(forked["run_dir"]) / "run.json").read_text())
    assert (run["forked_from"]["run_id"], run["forked_from"]["agent"], run["forked_from"]["turn"]) == (run_id, "fixer", 1)
    listed = awf("ls", "--run-root", str(home / "runs"), cwd=home)
    assert f"{forked['run_id']} is a fork of {run_id} at fixer turn 1" in listed.stdout
    shell = awf("continue", str(example / "review_fix.py"), run_id, "--from", "reviewer:2", "--set", "reviewer:model=opus",
                "--run-root", str(home / "runs"), cwd=home)  # fmt: skip
    assert shell.returncode == 1 and "shell can't switch model or effort" in shell.stderr  # a shell agent has no model
    for wrong, said in ((["--from", "reviewer:9"], "no turn 9 of agent reviewer"), (["--set", "reviewer:model=x"], "--set goes with --from"),
                        (["--from", "reviewer:2", "--set", "reviewer:speed=9"], "give KEY:model=NAME")):  # fmt: skip
        refused = awf("continue", str(example / "review_fix.py"), run_id, *wrong, "--run-root", str(home / "runs"), cwd=home)
        assert refused.returncode == 2 and said in refused.stderr, refused.stderr
