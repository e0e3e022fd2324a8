"""One exception tree: agentswf.errors' docstring draws every class the module defines, each
under its own base, and the errors page of the docs shows that same tree and documents each."""

from __future__ import annotations

import inspect
import re
import textwrap
from pathlib import Path

import pytest

import agentswf
import agentswf.errors as errors
from agentswf import Turn
from agentswf.engine.outcomes import Answered, Blocked

ROOT = Path(__file__).resolve().parents[1]
ERRORS_PAGE = ROOT / "docs" / "reference" / "api" / "errors.md"
BRANCH = re.compile(r"^(?P<rails>(?:[│ ]   )*)[├└]── (?P<name>\w+)")
ROOT_LINE = re.compile(r"^(?P<name>\w+)$")
ROOTS = {"Exception", "BaseException"}


def docstring_tree() -> str:
    text = errors.__doc__ or ""
    return textwrap.dedent(text.split("The tree::\n\n", 1)[1].split("\n\n", 1)[0])


def parents(tree: str) -> dict[str, str | None]:
    """Each class the tree names, and the one it is drawn under (None at the top)."""
    found: dict[str, str | None] = {}
    open_at: list[str] = []  # the last name drawn at each depth
    for line in tree.splitlines():
        if root := ROOT_LINE.match(line.rstrip()):
            depth, name = 0, root["name"]
        elif branch := BRANCH.match(line):
            depth, name = len(branch["rails"]) // 4 + 1, branch["name"]
        else:  # a description going on under its name
            assert set(line[: len(line) - len(line.lstrip("│ "))]) <= {"│", " "}, line
            continue
        assert name not in found, f"{name} is drawn twice"
        del open_at[depth:]
        found[name] = open_at[-1] if open_at else None
        open_at.append(name)
    return found


def defined() -> dict[str, type[BaseException]]:
    return {
        name: value for name, value in vars(errors).items()
        if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == errors.__name__
    }  # fmt: skip


def test_the_docstring_draws_every_class_under_its_base() -> None:
    drawn = parents(docstring_tree())
    classes = defined()
    assert set(drawn) - ROOTS == set(classes)
    for name, cls in classes.items():
        assert drawn[name] == cls.__bases__[0].__name__, name
    assert {drawn[name] for name in ROOTS} == {None}


def test_the_errors_page_shows_the_same_tree_and_documents_each_class() -> None:
    page = ERRORS_PAGE.read_text()
    assert f"```text\n{docstring_tree()}\n```" in page
    documented = set(re.findall(r"^::: agentswf\.errors\.(\w+)$", page, re.MULTILINE))
    assert documented == set(defined())


def test_the_errors_a_workflow_meets_are_exported() -> None:
    for name in ["AgentswfError", "WorkflowError", "DefinitionError", "AgentClosed", "TurnNotAnswered",
                 "MessageRefused", "DeadlineExceeded", "HarnessError", "StopRequested"]:  # fmt: skip
        assert getattr(agentswf, name) is getattr(errors, name), name


def test_a_stop_is_not_an_error() -> None:
    assert not issubclass(errors.StopRequested, Exception)
    assert issubclass(errors.StopRequested, BaseException)


def test_the_value_of_an_unanswered_turn_raises_a_named_error() -> None:
    turn: Turn[str] = Turn(agent="a", n=2, call_id="c", outcome=Blocked("a permission prompt"), started_at=0, ended_at=1)
    with pytest.raises(agentswf.TurnNotAnswered, match="turn 2 of a ended blocked: a permission prompt") as raised:
        turn.value
    assert raised.value.turn is turn
    assert isinstance(raised.value, ValueError)  # what it raised before it had a name
    assert Turn(agent="a", n=1, call_id="c", outcome=Answered("yes"), started_at=0, ended_at=1).value == "yes"
