"""Where a run's sockets go ($TMPDIR when it fits a socket path), and the sweep of dead runs' directories."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from agentswf.launcher import place


def test_tmpdir_is_the_root_when_it_is_short_enough(monkeypatch):
    with tempfile.TemporaryDirectory(prefix="p-", dir="/tmp") as short:  # pytest's tmp_path may leave no room
        _a_run_dir_in(Path(short), monkeypatch)


def _a_run_dir_in(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path) + "/")
    assert place.sockets_root() == str(tmp_path)
    run_dir = place.make_run_dir()
    try:
        assert run_dir.parent == tmp_path and run_dir.name.startswith("awf-")
        socket_path, launcher = place.agent_paths(run_dir)
        place.make_agent_dir(socket_path, launcher)
        assert launcher.stat().st_mode & 0o777 == place.LAUNCHER_MODE
        assert socket_path.parent.stat().st_mode & 0o777 == place.AGENT_DIR_MODE
        assert len(os.fsencode(str(socket_path))) <= place.MAX_SOCKET_PATH_BYTES
    finally:
        place.remove_run_dir(run_dir)
    assert not run_dir.exists()


def test_tmpdir_too_long_relative_or_missing_falls_back_to_tmp(monkeypatch):
    with tempfile.TemporaryDirectory(prefix="p-", dir="/tmp") as short:  # pytest's tmp_path may leave no room
        base = Path(short)
        long = base / ("d" * (place.MAX_SOCKET_PATH_BYTES - len(str(base)) - place.LONGEST_TAIL_BYTES))
        long.mkdir()
        for value in (str(long), "relative/dir", str(base / "missing"), ""):
            monkeypatch.setenv("TMPDIR", value)
            assert place.sockets_root() == "/tmp", value
        monkeypatch.setenv("TMPDIR", str(long)[:-1])
        (base / long.name[:-1]).mkdir()
        assert place.sockets_root() == str(long)[:-1]  # one byte shorter fits


def test_a_dead_runs_directory_is_swept_and_a_live_or_ownerless_one_is_not(tmp_path):
    live = Path(tmp_path / "awf-live")
    live.mkdir()
    (live / place.OWNER_NAME).write_text(f"{os.getpid()} {place._started_at(os.getpid())}\n")
    dead = Path(tmp_path / "awf-dead")
    (dead / "a1").mkdir(parents=True)
    (dead / "a1" / "s.sock").write_text("")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    (dead / place.OWNER_NAME).write_text(f"{gone.stdout.strip()} 1\n")
    dead.chmod(place.RUN_DIR_MODE)
    reused = Path(tmp_path / "awf-reused")  # its pid lives, but started at another time: another process
    reused.mkdir()
    (reused / place.OWNER_NAME).write_text(f"{os.getpid()} 1\n")
    ownerless = Path(tmp_path / "awf-ownerless")  # a run of an older agentswf, maybe live
    ownerless.mkdir()
    other = Path(tmp_path / "not-a-run")
    other.mkdir()
    (other / place.OWNER_NAME).write_text("1 1\n")

    swept = place.sweep_dead_runs(str(tmp_path))
    assert sorted(swept) == sorted([dead, reused])
    assert not dead.exists() and not reused.exists()
    assert live.exists() and ownerless.exists() and other.exists()


def test_a_run_directory_holds_its_owner(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    run_dir = place.make_run_dir()
    try:
        assert oct(run_dir.stat().st_mode & 0o777) == oct(place.RUN_DIR_MODE)
        owner = (run_dir / place.OWNER_NAME).read_text().split()
        assert owner == [str(os.getpid()), place._started_at(os.getpid())]
        assert place.sweep_dead_runs(str(tmp_path)) == []  # its owner is alive
    finally:
        place.remove_run_dir(run_dir)


def test_an_agent_directory_name_is_never_given_twice_in_a_run(monkeypatch):
    drawn = iter(["0a0a0a0a", "0a0a0a0a", "0b0b0b0b"])
    monkeypatch.setattr(place.secrets, "token_hex", lambda n: next(drawn))
    first, _ = place.agent_paths(Path("/run"))
    second, launcher = place.agent_paths(Path("/run"), {first.parent.name})
    assert first.parent.name == "a0a0a0a0a" and second.parent.name == "a0b0b0b0b"
    assert launcher == second.with_name(place.LAUNCHER_NAME)
