"""Reading a TUI's screen (`capture-pane`'s text): its menus, its input box, and when it takes input.

Pure rules, so each is tested on screens captured from the real TUIs. Measured under load
(two busy loops on two cores), a TUI lags: a key pressed as a screen is first drawn may be
dropped, a menu redraws a few hundred milliseconds after a key, and an early screen read is
stale. So a menu key is pressed only on a screen that has stopped changing, the next only
once the screen shows the last one's effect, and a prompt counts as in the input box only
once the box shows it.
"""

from __future__ import annotations

import re
from typing import Literal

from .pane_spec import StartupScreen, TuiSpec

_NUMBERED = re.compile(r"^\d+\.\s+")
_RULE = re.compile(r"^\s*─{8,}\s*$")  # the lines above and below claude's input box


def selected(screen: str, cursor: str) -> str | None:
    """The label of the menu line the `cursor` is on (its number dropped), if the screen shows a menu."""
    for line in screen.splitlines():
        if cursor in line:
            return _NUMBERED.sub("", line.split(cursor, 1)[1].strip())
    return None


def found(screen: str, markers: tuple[str, ...]) -> str | None:
    """The first of `markers` on the screen, if any."""
    return next((marker for marker in markers if marker in screen), None)


def startup_screen(screen: str, tui: TuiSpec) -> StartupScreen | None:
    """The startup screen showing, if one is."""
    return next((s for s in tui.startup if s.marker in screen), None)


def input_box(screen: str, cursor: str) -> str | None:
    """What the input box holds (its prompt mark dropped, lines joined), "" when empty; None when the
    screen shows no input box (the last two full-width rules with the prompt mark between them)."""
    lines = screen.splitlines()
    rules = [n for n, line in enumerate(lines) if _RULE.match(line)]
    if len(rules) < 2:
        return None
    inside = lines[rules[-2] + 1 : rules[-1]]
    if not inside or cursor not in inside[0]:
        return None
    inside[0] = inside[0].split(cursor, 1)[1]
    return "\n".join(line.strip() for line in inside).strip()


def takes_input(screen: str, tui: TuiSpec) -> bool:
    """The TUI waits for a prompt: its ready marker showing, no startup screen over it, and, where its
    input box can be read (claude's), that box empty."""
    if found(screen, tui.ready) is None or startup_screen(screen, tui) is not None:
        return False
    return not tui.boxed or input_box(screen, tui.cursor) == ""


def unsent(screen: str, tui: TuiSpec) -> Literal["type", "Enter"] | None:
    """What to do about a prompt put in a while ago that has no user row yet: "type" it again (the input
    box is empty: it was lost), press "Enter" again (it sits in the box), or nothing yet (None: the TUI
    is busy, a startup screen is up, or its box can't be read)."""
    if not tui.boxed or found(screen, tui.busy) is not None or startup_screen(screen, tui) is not None:
        return None
    box = input_box(screen, tui.cursor)
    return None if box is None else "Enter" if box else "type"
