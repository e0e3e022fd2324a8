"""Text an agent wrote, as awf prints it: its control characters shown, not obeyed.

An agent's answer, reason, message or command line reaches a person's terminal through `awf
logs`, `awf tail` and `awf inbox`. A control character there is an instruction to the
terminal: an escape sequence can hide or rewrite what was printed, or (OSC 52, in many
terminals) set the clipboard the person pastes next; a bidirectional override reorders what
is read. So each is printed as its escape (`\\x1b`); a new line and a tab stay as they are.

`awf status --json` and `awf run --json` print such text inside JSON, which a person reads too. msgspec
escapes C0 controls there but leaves U+202E and the C1 controls as they are, so `shown_json`
writes each non-printable character as JSON's own escape (`\\u202e`): the same string to a parser, nothing to a terminal.
"""

from __future__ import annotations

from typing import Any

import msgspec

KEPT = frozenset("\n\t")


def shown(text: str) -> str:
    """`text` with every character that isn't printable (but a new line or a tab) as its escape."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() or char in KEPT else _escape(char) for char in text)


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shown_json(value: Any, *, formatted: bool = False) -> str:
    """`value` as JSON (indented if `formatted`) with every non-printable character as a `\\uXXXX` escape.

    Outside its strings, JSON text is ASCII, so every such character is inside a string, where
    the escape means the same character; a new line is kept (only `formatted` puts one there)."""
    encoded = msgspec.json.encode(value)
    text = (msgspec.json.format(encoded) if formatted else encoded).decode()
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() or char == "\n" else _json_escape(char) for char in text)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # past the basic plane: JSON's escape is the UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
