"""A fork's copy taken out of its parent's sandboxed home, which the parent's agent wrote: only the
session's own files, found and read without following a link, regular, bounded; then put in the
fork's home (pi's header naming the fork's cwd). Pure file-system work: no sandbox is started."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agentswf.sandbox import copies
from agentswf.sandbox.copies import CopyRefused, forkable, place_copy, take_copy

CLAUDE_ID = "0b7e5c1e-6f0a-4d1e-9a57-3d8f2c1b0a99"
CODEX_PARENT = "01a250c5-cd57-7a71-b0d0-5d5f9e18e7f0"
CODEX_COPY = "01a250c5-d05d-7b40-83fb-26730d0cf72f"


def write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def test_claudes_copy_is_moved_out_and_the_parents_session_stays(tmp_path):
    home, staging = tmp_path / "home", tmp_path / "staged"
    parent = write(home / ".claude/projects/-ws/parent.jsonl", "PARENT\n")
    write(home / ".claude/projects/-ws" / f"{CLAUDE_ID}.jsonl", "COPY\n")
    staged = take_copy("claude", CLAUDE_ID, home, staging)
    assert staged.files == (f".claude/projects/-ws/{CLAUDE_ID}.jsonl",) and staged.sources == ()
    assert not (home / staged.files[0]).exists() and parent.read_text() == "PARENT\n"
    fork_home = tmp_path / "fork"
    place_copy(staged, fork_home, tmp_path)
    assert (fork_home / staged.files[0]).read_text() == "COPY\n" and not staging.exists()


def test_codexs_copy_takes_the_rollouts_its_history_goes_on_from_which_stay_the_parents(tmp_path):
    home = tmp_path / "home"
    day = home / ".codex/sessions/2026/12/07"
    meta = {"type": "session_meta", "payload": {"id": CODEX_COPY, "forked_from_id": CODEX_PARENT}}
    write(day / f"rollout-2026-12-07T13-51-10-{CODEX_COPY}.jsonl", json.dumps(meta) + "\nNEW\n")
    source = write(day / f"rollout-2026-12-07T13-50-00-{CODEX_PARENT}.jsonl", '{"type":"session_meta","payload":{}}\nOLD\n')
    staged = take_copy("codex", CODEX_COPY, home, tmp_path / "staged")
    assert [Path(f).name for f in staged.files] == [f"rollout-2026-12-07T13-51-10-{CODEX_COPY}.jsonl"]
    assert [Path(f).name for f in staged.sources] == [source.name]
    assert source.read_text().endswith("OLD\n")  # copied, not moved: the parent resumes it
    place_copy(staged, tmp_path / "fork", tmp_path)
    assert (tmp_path / "fork" / staged.sources[0]).read_text().endswith("OLD\n")


def test_a_codex_copy_naming_a_source_that_isnt_a_session_id_takes_nothing_more(tmp_path):
    home = tmp_path / "home"
    meta = {"type": "session_meta", "payload": {"forked_from_id": "../../*"}}
    write(home / ".codex/sessions/2026/12/07" / f"rollout-x-{CODEX_COPY}.jsonl", json.dumps(meta) + "\n")
    assert take_copy("codex", CODEX_COPY, home, tmp_path / "staged").sources == ()


@pytest.mark.parametrize("first", ["[" * 200_000, "not json", '{"type": "session_meta", "payload": []}'])
def test_a_first_line_that_names_no_source_takes_nothing_more(tmp_path, first):
    home = tmp_path / "home"
    write(home / ".codex/sessions/2026/12/07" / f"rollout-x-{CODEX_COPY}.jsonl", first + "\n")
    assert take_copy("codex", CODEX_COPY, home, tmp_path / "staged").sources == ()


def test_a_pi_header_that_isnt_one_is_left_as_it_is(tmp_path):
    home = tmp_path / "home"
    made = write(home / ".pi/agent/sessions/--ws--/s_c1.jsonl", "[" * 200_000 + "\nENTRY\n")
    staged = take_copy("pi", str(made), home, tmp_path / "staged")
    place_copy(staged, tmp_path / "fork", Path("/ws/fork"))
    assert (tmp_path / "fork" / staged.files[0]).read_text() == "[" * 200_000 + "\nENTRY\n"


def test_a_chain_of_sources_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(copies, "MAX_SOURCES", 2)
    home = tmp_path / "home"
    day = home / ".codex/sessions/2026/12/07"
    for n in range(4):  # each goes on from the next: a fork of a fork of a fork
        meta = {"type": "session_meta", "payload": {"forked_from_id": f"s{n + 1}"}}
        write(day / f"rollout-x-s{n}.jsonl", json.dumps(meta) + "\n")
    with pytest.raises(CopyRefused, match="goes on from more than 2 others"):
        take_copy("codex", "s0", home, tmp_path / "staged")
    assert not (tmp_path / "staged").exists() and (day / "rollout-x-s0.jsonl").exists()  # nothing moved: a failed fork leaves the copy


def test_a_link_the_agent_planted_is_not_followed(tmp_path):
    secret = write(tmp_path / "user" / ".ssh" / "id_rsa", "SECRET")
    home = tmp_path / "home"
    projects = home / ".claude/projects"
    projects.mkdir(parents=True)
    os.symlink(secret, projects / f"{CLAUDE_ID}.jsonl")  # the file a link
    (projects / "-ws").symlink_to(secret.parent, target_is_directory=True)  # a directory a link
    os.symlink(secret, secret.parent / f"{CLAUDE_ID}.jsonl")
    with pytest.raises(CopyRefused, match="no file of session"):
        take_copy("claude", CLAUDE_ID, home, tmp_path / "staged")
    assert secret.read_text() == "SECRET" and not (tmp_path / "staged").exists()


def test_a_link_swapped_in_under_the_walk_is_refused_not_followed(tmp_path, monkeypatch):
    """The name is a file when it is found and a link when it is opened: O_NOFOLLOW refuses it."""
    secret = write(tmp_path / "secret", "SECRET")
    home = tmp_path / "home"
    copy = write(home / ".claude/projects/-ws" / f"{CLAUDE_ID}.jsonl", "COPY\n")
    found = copies._found

    def swapped(*args):
        result = found(*args)
        copy.unlink()
        copy.symlink_to(secret)
        return result

    monkeypatch.setattr(copies, "_found", swapped)
    with pytest.raises(CopyRefused, match="can't be read"):
        take_copy("claude", CLAUDE_ID, home, tmp_path / "staged")
    assert not (tmp_path / "staged").exists()


def test_a_fifo_in_the_copys_place_is_not_read(tmp_path):
    home = tmp_path / "home"
    (home / ".claude/projects/-ws").mkdir(parents=True)
    os.mkfifo(home / ".claude/projects/-ws" / f"{CLAUDE_ID}.jsonl")  # read, it would block the run
    with pytest.raises(CopyRefused, match="no file of session"):
        take_copy("claude", CLAUDE_ID, home, tmp_path / "staged")


def test_a_copy_over_the_size_bound_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(copies, "MAX_SESSION_BYTES", 10)
    home = tmp_path / "home"
    write(home / ".claude/projects/-ws" / f"{CLAUDE_ID}.jsonl", "x" * 11)
    with pytest.raises(CopyRefused, match="over 10 bytes"):
        take_copy("claude", CLAUDE_ID, home, tmp_path / "staged")
    assert (home / ".claude/projects/-ws" / f"{CLAUDE_ID}.jsonl").exists()  # left where it was


def test_a_home_of_too_many_names_is_refused_not_walked(tmp_path, monkeypatch):
    monkeypatch.setattr(copies, "MAX_SCANNED_ENTRIES", 5)
    home = tmp_path / "home"
    for n in range(6):
        (home / ".claude/projects" / f"p{n}").mkdir(parents=True)
    with pytest.raises(CopyRefused, match="more than 5 names"):
        take_copy("claude", CLAUDE_ID, home, tmp_path / "staged")


def test_too_many_files_of_one_session_are_refused(tmp_path):
    home = tmp_path / "home"
    for n in range(copies.MAX_COPIED_FILES + 1):
        write(home / ".claude/projects" / f"p{n}" / f"{CLAUDE_ID}.jsonl", "COPY\n")
    with pytest.raises(CopyRefused, match="more than"):
        take_copy("claude", CLAUDE_ID, home, tmp_path / "staged")


@pytest.mark.parametrize("session", ["../x.jsonl", "/etc/passwd", "--fork", "a*b"])
def test_what_a_cli_names_that_is_no_session_of_its_home_is_refused(tmp_path, session):
    home = tmp_path / "home"
    home.mkdir()
    named = session if session.startswith("/") else str(home / session) if session.endswith(".jsonl") else session
    for harness in ("claude", "codex", "pi"):
        with pytest.raises(CopyRefused, match="no session of its"):
            take_copy(harness, named if harness == "pi" else session, home, tmp_path / "staged")


def test_pis_copy_is_named_by_its_file_in_the_forks_home_and_its_header_names_the_forks_cwd(tmp_path):
    home = tmp_path / "parent" / "home"
    header = {"type": "session", "version": 3, "id": "c1", "cwd": "/ws/parent", "parentSession": "/p.jsonl"}
    made = write(home / ".pi/agent/sessions/--ws--/2026-12-07T13-50-00-000Z_c1.jsonl", json.dumps(header) + "\nENTRY\n")
    staged = take_copy("pi", str(made), home, tmp_path / "staged")
    fork_home = tmp_path / "fork" / "home"
    place_copy(staged, fork_home, Path("/ws/fork"))
    placed = fork_home / staged.files[0]
    first, rest = placed.read_text().split("\n", 1)
    assert json.loads(first) == {**header, "cwd": "/ws/fork"} and rest == "ENTRY\n"
    assert staged.session(str(made), fork_home) == str(placed)
    assert staged.session("other", fork_home) == "other"


def test_only_the_clis_whose_sessions_are_known_are_forked_in_a_sandbox():
    assert [name for name in ("claude", "codex", "pi", "opencode", "acp", "shell") if forkable(name)] == ["claude", "codex", "pi"]
