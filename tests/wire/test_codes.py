"""The code catalogue against the reference: every code a table of docs/reference/wfa.md lists is a
`Code`, sent by the command whose table lists it, and every `Code` is in a table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentswf.wire import BY_COMMAND, CODES, COMMANDS, COMMON_CODES, TOOL_FAILURES, Response, is_code, refused

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "wfa.md"


def code_tables(markdown: str) -> dict[str, set[str]]:
    """The codes each section's refusal table lists: `common` for the table every command may meet,
    the command's name for its own. A table counts when its header's first cell is "Code" or starts
    "Refusal"; its first column's backquoted words are the codes ("`a`, `b`, `c`" lists three)."""
    tables: dict[str, set[str]] = {}
    section = ""
    in_table = False
    for line in markdown.splitlines():
        heading = re.match(r"^## (?:wfa (\w+)|Common to every command)", line)
        if heading:
            section = heading.group(1) or "common"
        elif line.startswith("| "):
            first = line.split("|")[1].strip()
            if first == "Code" or first.startswith("Refusal"):
                in_table = True
                tables.setdefault(section, set())
            elif in_table and not first.startswith("---"):
                tables[section].update(re.findall(r"`([a-z-]+)`", first))
        else:
            in_table = False
    return tables


def test_the_walk_reads_a_table() -> None:
    text = "## wfa send {#send}\n\n| Refusal | Meaning |\n| --- | --- |\n| `a-b` | x `not-this` |\n| `c`, `d` | y |\n\n| Exit | |\n| `e` | |\n"
    assert code_tables(text) == {"send": {"a-b", "c", "d"}}


@pytest.fixture(scope="module")
def tables() -> dict[str, set[str]]:
    return code_tables(REFERENCE.read_text())


def test_the_common_table_is_the_common_codes(tables: dict[str, set[str]]) -> None:
    assert tables["common"] == set(COMMON_CODES)


@pytest.mark.parametrize("command", [command for command in COMMANDS if command != "peers"])
def test_each_commands_table_is_its_codes(tables: dict[str, set[str]], command: str) -> None:
    # The tool's table lists its refusals; how a call that ran ends (`failed`, `timed-out`) is in
    # its exit table and text, not a refusal.
    expected = set(BY_COMMAND[command]) - (set(TOOL_FAILURES) if command == "tool" else set())
    if command == "waiting":  # "refused with the same codes as wfa result, except invalid-result"
        assert command not in tables
        assert expected == tables["result"] - {"invalid-result"}
    else:
        assert tables[command] == expected


def test_every_code_is_in_a_table_and_the_catalogue_is_every_table(tables: dict[str, set[str]]) -> None:
    listed = set().union(*tables.values()) | set(TOOL_FAILURES)
    assert listed == CODES
    assert set().union(*BY_COMMAND.values(), COMMON_CODES) == CODES


@pytest.mark.parametrize("code", sorted(CODES))
def test_every_code_goes_over_the_wire(code: str) -> None:
    assert is_code(code)
    answer = refused("tool", code, "what to do next.")
    assert isinstance(answer, Response) and answer.code == code and answer.exit in (1, 3, 4)


def test_what_is_not_a_code_is_not_one() -> None:
    assert not is_code("invalid-route") and not is_code("") and not is_code("lost")
