"""The pure parts of driving codex's and pi's TUIs: their command lines, menus, and session files."""

from __future__ import annotations

import os
import time

from agentswf.harnesses.codex import CodexHarness
from agentswf.harnesses.pane import TUIS, selected
from agentswf.harnesses.pane_spec import find_session
from agentswf.harnesses.pi import PiHarness

CODEX_MODEL_SCREEN = """
  Meet GPT-6 Sol

› 1. Try new model
  2. Use existing model

  enter/esc confirm · ^c quit
"""


def test_codex_runs_without_its_daemon_and_resumes_its_thread():
    codex = CodexHarness("/bin/codex", model="gpt-5.5", effort="low")
    argv, known = TUIS["codex"].launch(codex, None)
    assert argv[:3] == ["/bin/codex", "--no-daemon", "--dangerously-bypass-approvals-and-sandbox"] and known is None
    assert argv[-4:] == ["--model", "gpt-5.5", "-c", 'model_reasoning_effort="low"']
    argv, known = TUIS["codex"].launch(codex, "01a2320a-e241-7103-8405-792dc354c967")
    assert argv[1:4] == ["resume", "01a2320a-e241-7103-8405-792dc354c967", "--no-daemon"] and known is not None


def test_pi_resumes_its_session_by_id():
    argv, _ = TUIS["pi"].launch(PiHarness("/bin/pi", model="fake/fake-model"), "abc-1")
    assert argv == ["/bin/pi", "--session", "abc-1", "--model", "fake/fake-model"]


def test_a_menus_selected_line_is_read_without_its_number_and_the_update_is_never_a_choice():
    assert selected(CODEX_MODEL_SCREEN, "›") == "Try new model"
    for tui in TUIS.values():
        assert all("update" not in screen.choice.lower() for screen in tui.startup)
    assert any(screen.marker == "Update available!" and screen.choice == "Skip" for screen in TUIS["codex"].startup)


def test_the_session_a_prompt_started_is_the_file_holding_its_call_id(tmp_path):
    since = time.time()
    day = tmp_path / "2026" / "12" / "01"
    day.mkdir(parents=True)
    ours = "01a2320a-e241-7103-8405-792dc354c967"
    (day / f"rollout-2026-12-01T14-38-{ours}.jsonl").write_text('{"text": "wfa result c0ffee01"}\n')
    (day / "rollout-2026-12-01T14-39-01a2320a-0000-7103-8405-792dc354c967.jsonl").write_text('{"text": "other"}\n')
    (day / "rollout---dangerously-skip-permissions.jsonl").write_text("c0ffee01\n")  # no UUID: never a session
    old = day / "rollout-2026-11-30T10-00-01a2320a-1111-7103-8405-792dc354c967.jsonl"
    old.write_text("c0ffee01\n")
    os.utime(old, (since - 3600, since - 3600))  # written before the pane started
    assert find_session(tmp_path, "*/*/*/rollout-*.jsonl", since, "c0ffee01") == ours
    assert find_session(tmp_path, "*/*/*/rollout-*.jsonl", since, "nothere") is None
    assert find_session(tmp_path / "missing", "*/*/*/rollout-*.jsonl", since, "c0ffee01") is None
