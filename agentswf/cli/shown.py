"""Text an agent wrote, as awf prints it: data, never structure, and never obeyed by a terminal.

An agent's answer, reason, message, tool name or command line reaches a person's terminal
through `awf logs`, `awf tail`, `awf inbox`, `awf pending`, `awf status` and `awf run`'s
lines. Two things in it would be instructions rather than text:

- a control character is the terminal's: an escape sequence can hide or rewrite what was
  printed, or (OSC 52, in many terminals) set the clipboard the person pastes next; a
  bidirectional override reorders what is read;
- a new line (or a carriage return, a form feed, a line separator) starts a line that reads as
  awf's own: a message body holding `from b (a question: …)` forges a second message, a tool
  name holding `02:44:25 [info] run ended` a line of the log.

So the rules, one for each shape of field:

- `shown`: a field that is one line (a name, a reason, a command line, a whole line awf made of
  such fields) has every character that isn't printable, a new line and a tab included, as its
  escape (`\\n`, `\\x1b`, `\\u202e`);
- `shown_lines` / `quoted`: a body that may run over several lines (a message, a reason that
  quotes an agent's standard error, a traceback) is split at its new lines and each line
  `shown` (a tab kept: it can't take the cursor back), for awf to put under a header it wrote
  and an indent (`BODY_INDENT`) that only awf's own lines lack.

A line at the left margin is then always awf's. (One thing escapes every rule: a line wider than
the terminal wraps there, and its rest starts at the margin.)

`awf status --json` and `awf run --json` print such text inside JSON, which a person reads too. msgspec
escapes C0 controls there but leaves U+202E and the C1 controls as they are, so `shown_json`
writes each non-printable character as JSON's own escape (`\\u202e`): the same string to a parser, nothing to a terminal.
"""

from __future__ import annotations

from typing import Any

import msgspec

BODY_INDENT = "    "  # before each line of a body an agent wrote: awf's own lines start at the margin
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def shown(text: str) -> str:
    """`text` as one line: every character that isn't printable (a new line, a tab, a control
    character, a bidirectional override) as its escape."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _escape(char) for char in text)


def shown_lines(text: str) -> list[str]:
    """`text`, which may run over several lines, as its lines, each `shown` but for its tabs."""
    return ["".join(char if char.isprintable() or char == "\t" else _escape(char) for char in line) for line in text.split("\n")]


def quoted(text: str, indent: str = BODY_INDENT) -> str:
    """`text` line by line, each `shown` (tabs kept) after `indent`, each ending in a new line."""
    return "".join(f"{indent}{line}\n" for line in shown_lines(text))


def headed(head: str, text: str, indent: str = BODY_INDENT) -> str:
    """`head` (awf's own words) and `text`'s first line on one line, its other lines `quoted` under it."""
    first, *rest = shown_lines(text)
    return f"{head}{first}\n" + "".join(f"{indent}{line}\n" for line in rest)


def _escape(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
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
