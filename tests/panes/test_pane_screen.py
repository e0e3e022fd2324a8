"""The screen-reading rules a pane is driven by, on screens captured from claude 2.1.332 in a pane.

Under load claude draws late: a prompt typed into a box not yet drawn, or with a startup
screen over it, is lost, and Enter on a startup screen takes its default (the trust menu's
is "No, exit"). These rules are what keep the pane from doing either.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentswf.harnesses.pane import CLAUDE_TUI, TUIS
from agentswf.harnesses.pane_screen import input_box, selected, startup_screen, takes_input, unsent

RULE = "─" * 120

TRUST = f"""{RULE}
 Accessing workspace:

 /tmp/pytest-of-root/pytest-234/test_a_check_in_answered_with_0

 Quick safety check: Is this a project you created or one you trust?

 ❯ No, exit
   Yes, I trust this folder

 Enter to confirm · Esc to cancel
"""

API_KEY = f"""{RULE}
  Detected a custom API key in your environment

  ANTHROPIC_API_KEY: sk-ant-...sk-test

  Do you want to use this API key?

    Yes
  ❯ No (recommended)

  Enter to confirm · Esc to cancel
"""

LOGO = """ ▐▛███▛█   Claude Code v2.1.332
▝▜██████▀  Opus 5.5 · API Usage Billing
 ▝▝   ▝▝   /tmp/pytest-of-root/pytest-266/test_a_turn_in_a_pane_is_answe0
"""

READY = f"""{LOGO}
{RULE}
❯
{RULE}
  ⏸ manual mode on · ? for shortcuts · ← for agents
"""

TYPED = f"""{LOGO}
{RULE}
❯ SCENARIO answer 0. Review the change.

  When the answer is ready, return it by running:

  /tmp/awf-epdyb2ey/a6088ef07/wfa result 6b1dbeff --verdict '<one of: approve, reject>'
{RULE}
  ⏸ manual mode on
"""

BUSY = f"""{LOGO}
❯ SCENARIO answer 0. Review the change.

  When the answer is ready, return it by running:

· Percolating…

{RULE}
❯
{RULE}
  ⏸ manual mode on · esc to interrupt · ← for agents
"""

TRUST_OVER_READY = READY.replace(f"{RULE}\n❯\n", TRUST + f"{RULE}\n\n", 1)  # drawn over the prompt, late


def test_the_trust_and_api_key_menus_are_startup_screens_whose_selected_line_is_read():
    assert startup_screen(TRUST, CLAUDE_TUI).choice == "Yes, I trust this folder"
    assert selected(TRUST, "❯") == "No, exit"  # claude's default: Enter here would exit
    assert startup_screen(API_KEY, CLAUDE_TUI).choice == "Yes"
    assert selected(API_KEY, "❯") == "No (recommended)"
    assert not takes_input(TRUST, CLAUDE_TUI) and not takes_input(API_KEY, CLAUDE_TUI)


def test_claude_takes_input_only_with_its_box_drawn_empty_and_no_startup_screen_over_it():
    assert takes_input(READY, CLAUDE_TUI)
    assert not takes_input(TYPED, CLAUDE_TUI)  # something is in the box already
    assert not takes_input(BUSY, CLAUDE_TUI)  # no ready marker: it works
    assert "? for shortcuts" in TRUST_OVER_READY
    assert not takes_input(TRUST_OVER_READY, CLAUDE_TUI)  # the ready marker shows, under a startup screen
    assert not takes_input(LOGO, CLAUDE_TUI)  # drawn, no box yet


def test_the_input_box_shows_what_was_typed_and_is_empty_once_it_is_sent():
    assert input_box(READY, "❯") == ""
    typed = input_box(TYPED, "❯")
    assert typed is not None and typed.startswith("SCENARIO answer 0. Review the change.")
    assert "wfa result 6b1dbeff" in typed
    assert input_box(BUSY, "❯") == ""  # the prompt above is history, not the box
    assert input_box(LOGO, "❯") is None and input_box(TRUST, "❯") is None


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=400))
def test_no_screen_crashes_the_rules(screen):
    for tui in TUIS.values():
        takes_input(screen, tui)
        input_box(screen, tui.cursor)
        selected(screen, tui.cursor)


def test_a_prompt_with_no_user_row_is_typed_again_if_lost_and_sent_again_if_it_sits_in_the_box():
    assert unsent(READY, CLAUDE_TUI) == "type"  # the box empty: the keys were dropped
    assert unsent(TYPED, CLAUDE_TUI) == "Enter"  # in the box: its Enter was lost
    assert unsent(BUSY, CLAUDE_TUI) is None  # working on it: its row will come
    assert unsent(TRUST_OVER_READY, CLAUDE_TUI) is None  # the startup screen is answered first
    assert unsent(LOGO, CLAUDE_TUI) is None
    assert all(unsent(READY, tui) is None for tui in (TUIS["codex"], TUIS["pi"]))  # no box to read: never again
