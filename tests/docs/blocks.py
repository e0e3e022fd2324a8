"""The fenced code blocks of a documentation page, and what the page says to do with each.

A block is a fence of three or more backticks, at any indentation (inside a list or an
admonition), with a language and optional attributes (`title="review.py"`). An HTML
comment on the line right before a fence tells the docs test what to do with it:

    <!-- docs-test: skip: <why> -->      not run; the reason is required
    <!-- docs-test: run -->              a `sh` block, run with bash (exit 0 expected)
    <!-- docs-test: run, exit 3 -->      the same, expecting that exit status

A `python` block with a `title` is a file: it is written under its name, not run itself.
Pure: no I/O beyond reading the text it is given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,})(?P<info>[^`]*)$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<body>.*?)\s*-->\s*$")
_TITLE = re.compile(r'title="(?P<title>[^"]+)"')


class PageError(ValueError):
    """The page's blocks or directives are not well formed; the message names the line."""


@dataclass(frozen=True)
class Block:
    """One fenced block: its language, its text (dedented), where it starts, and what to do with it."""

    language: str
    code: str
    line: int  # the 1-based line of the block's first line of code
    title: str | None = None
    skip: str | None = None  # the reason it is not run
    run: bool = False  # a shell block to run
    exit: int = 0  # the exit status a run block expects

    @property
    def is_file(self) -> bool:
        return self.title is not None


def _directive(body: str, line: int) -> dict[str, object]:
    if body.startswith("skip"):
        reason = body[len("skip") :].lstrip(" :").strip()
        if not reason:
            raise PageError(f"line {line}: a skipped block must say why: <!-- docs-test: skip: <why> -->")
        return {"skip": reason}
    words = [word.strip() for word in body.split(",")]
    if words[0] != "run":
        raise PageError(f"line {line}: unknown docs-test directive {body!r}; use 'skip: <why>' or 'run'")
    found: dict[str, object] = {"run": True}
    for word in words[1:]:
        match = re.fullmatch(r"exit (\d+)", word)
        if match is None:
            raise PageError(f"line {line}: unknown option {word!r} of run; only 'exit <status>'")
        found["exit"] = int(match.group(1))
    return found


def blocks(text: str) -> list[Block]:
    """Every fenced block of the page `text`, in order."""
    lines = text.splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        indent, ticks, info = fence.group("indent"), fence.group("ticks"), fence.group("info").strip()
        directive: dict[str, object] = {}
        before = _DIRECTIVE.match(lines[i - 1]) if i > 0 else None
        if before is not None:
            directive = _directive(before.group("body"), i)
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            stripped = lines[j].strip()
            if stripped.startswith(ticks) and set(stripped) == {"`"} and lines[j].startswith(indent):
                break
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        else:
            raise PageError(f"line {i + 1}: the block is never closed")
        language = info.split()[0] if info else ""
        title = _TITLE.search(info)
        block = Block(language, "\n".join(body) + "\n", i + 2, title.group("title") if title else None, **directive)  # type: ignore[arg-type]
        if block.run and language not in ("sh", "bash", "console"):
            raise PageError(f"line {i + 1}: only a sh block can be run, not {language or 'an unnamed'} block")
        found.append(block)
        i = j + 1
    return found
