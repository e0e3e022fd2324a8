"""The pure core: the turn machine, the message, tool and run rules and their vocabulary import
only the standard library, msgspec, the wire and each other, so no I/O, no event loop and no
actor reaches them.

Checked twice: each core module's own imports, read with `ast` (what runs, not what is under
TYPE_CHECKING for the type checker), and what a fresh interpreter has loaded after importing it.
`agentswf/__init__.py`, the author's facade, imports the whole library on purpose, so the
interpreter imports the core with a bare `agentswf` package in its place: what is loaded is what
the core itself needs.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "agentswf"

CORE = (
    "agentswf.errors",  # the exception tree
    "agentswf.wire",  # the wfa protocol: requests, responses, codes, limits, teaching (the package whole)
    "agentswf.harnesses.base",  # an attempt and how it ended, as the turn reads it
    "agentswf.harnesses.usage",  # what an attempt spent
    "agentswf.harnesses.said",  # what an attempt's processes said for a person: bounded text, read by the turn's reason
    "agentswf.engine.instant",  # the moment an event happened
    "agentswf.engine.agent_time",  # a time as an agent is told it
    "agentswf.engine.outcomes",  # how a turn ends
    "agentswf.engine.rules",  # what an agent may do now (its calls' views)
    "agentswf.engine.mail.rules",  # what `wfa send` and `wfa reply` may do (the routes' and questions' views)
    "agentswf.engine.tools.policy",  # who may call which tool, what needs approval, what is redacted
    "agentswf.engine.tools.rules",  # a tool call's phases
    "agentswf.engine.accounting",  # what a run spent
    "agentswf.engine.notice",  # what an agent owes or awaits, at the head of its answers
    "agentswf.engine.mail.words",  # what the switchboard and a turn tell each other
    "agentswf.engine.record.lines",  # the record's lines, and an approval's request and decision
    "agentswf.engine.turn",  # the turn machine
)
ALLOWED_OUTSIDE = frozenset({"msgspec"})
IO_MODULES = frozenset({"anyio", "trio", "asyncio", "socket", "threading", "sniffio"})
LOADED_TIMEOUT_SECONDS = 60.0

# Run in a fresh interpreter: import one module of the core under a bare `agentswf`, print what is loaded.
_LOADED = """
import importlib, json, sys, types
package = types.ModuleType("agentswf")
package.__path__ = [sys.argv[1]]
sys.modules["agentswf"] = package
importlib.import_module(sys.argv[2])
print(json.dumps(sorted(sys.modules)))
"""


def _in_core(name: str) -> bool:
    return any(name == core or name.startswith(core + ".") for core in CORE)


def _files(module: str) -> list[tuple[str, Path]]:
    """The module's files (a package's every module), each with its package's dotted name."""
    path = PACKAGE.parent.joinpath(*module.split("."))
    if path.is_dir():
        return [(".".join(f.relative_to(PACKAGE.parent).parts[:-1]), f) for f in sorted(path.rglob("*.py"))]
    return [(module.rpartition(".")[0], path.with_suffix(".py"))]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _run_time_imports(source: str, package: str) -> set[str]:
    """The modules `source` (a module of `package`) imports when it runs: all but what is under
    `if TYPE_CHECKING:`. A name imported from a module counts as `module.name`."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            names.update(f"{module}.{alias.name}" if module.startswith("agentswf") else module for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    return names


def _outside_the_core(name: str) -> bool:
    """Whether a core module may not import `name`: neither the standard library, msgspec nor the core."""
    top = name.split(".")[0]
    if top != "agentswf":
        return top not in sys.stdlib_module_names and top not in ALLOWED_OUTSIDE
    module = name
    while module and not _in_core(module):  # `agentswf.engine.rules.Refusal` is of `agentswf.engine.rules`
        module = module.rpartition(".")[0]
    return not module


@pytest.mark.parametrize("module", CORE)
def test_a_core_module_imports_only_the_standard_library_msgspec_and_the_core(module: str) -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}: {name}"
        for package, path in _files(module)
        for name in sorted(_run_time_imports(path.read_text(), package))
        if _outside_the_core(name)
    ]
    assert not found, "the core imports outside it:\n" + "\n".join(found)


@pytest.mark.parametrize("module", CORE)
def test_importing_a_core_module_loads_no_io_and_no_actor(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-c", _LOADED, str(PACKAGE), module],
        capture_output=True,
        text=True,
        timeout=LOADED_TIMEOUT_SECONDS,
        check=True,
    )
    loaded = json.loads(done.stdout)
    found = sorted(name for name in loaded if name.split(".")[0] in IO_MODULES or name.startswith("agentswf.actors"))
    assert not found, f"importing {module} loads {found}"


@pytest.mark.parametrize(
    ("source", "package", "outside"),
    [
        ("import anyio\n", "agentswf.engine", {"anyio"}),
        ("from ..actors.backend import current_time\n", "agentswf.engine", {"agentswf.actors.backend.current_time"}),
        ("from .recorder import ToolCalled\n", "agentswf.engine", {"agentswf.engine.recorder.ToolCalled"}),
        ("def later():\n    from . import switchboard\n", "agentswf.engine", {"agentswf.engine.switchboard"}),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .approvals import A\n", "agentswf.engine", set()),
        ("import math\nimport msgspec\nfrom ..wire.teaching import Taught\nfrom .rules import Refusal\n", "agentswf.engine", set()),
    ],
)
def test_the_walk_finds_what_leaves_the_core(source: str, package: str, outside: set[str]) -> None:
    assert {name for name in _run_time_imports(source, package) if _outside_the_core(name)} == outside
