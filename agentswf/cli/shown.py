"""Text an agent wrote, as awf prints it: its control characters shown, not obeyed.

An agent's answer, reason, message or command line reaches a person's terminal through `awf
logs`, `awf tail` and `awf inbox`. A control character there is an instruction to the
terminal: an escape sequence can hide or rewrite what was printed, or (OSC 52, in many
terminals) set the clipboard the person pastes next; a bidirectional override reorders what
is read. So each is printed as its escape (`\\x1b`); a new line and a tab stay as they are.
"""

from __future__ import annotations

KEPT = frozenset("\n\t")


def shown(text: str) -> str:
    """`text` with every character that isn't printable (but a new line or a tab) as its escape."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() or char in KEPT else _escape(char) for char in text)


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
