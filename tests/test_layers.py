"""Every part of agentswf stays in its layer, and no two parts import each other in a cycle.

A part is a package of agentswf or a module at its top. Read from the source with `ast`, so an
import inside a function or under TYPE_CHECKING counts as much as one at the top. The `wfa`
client must start in milliseconds and stay standard library only: its imports are the few it
has, and a new one fails here until it is added on purpose.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "agentswf"

# What each part may import of agentswf besides itself, lowest first. A new part fails
# `test_every_part_has_a_layer` until it is given its place here.
ALLOWED: dict[str, frozenset[str]] = {
    "__about__": frozenset(),
    "lazy": frozenset(),  # a package's public names, imported when first named
    "errors": frozenset(),
    "progress": frozenset(),  # what a run tells a person as it goes
    "wire": frozenset({"errors"}),
    "actors": frozenset({"errors", "lazy"}),
    "harnesses": frozenset({"errors", "wire"}),
    "git": frozenset({"errors", "harnesses"}),  # a file read as one descriptor: harnesses.regular
    "launcher": frozenset({"errors", "wire", "harnesses", "actors"}),  # the listener wakes on the kernel's primitives
    "sandbox": frozenset({"errors", "lazy", "harnesses", "git", "launcher"}),
    "engine": frozenset({"errors", "progress", "wire", "actors", "harnesses", "launcher"}),
    "replay": frozenset({"errors", "wire", "harnesses", "launcher", "engine"}),  # agents played from a record: a fork's too
    "policy": frozenset({"engine"}),  # agentswf.policy: engine/tools/policy.py's public names
    "otel": frozenset({"engine"}),
    "workflow": frozenset(
        {"errors", "progress", "wire", "actors", "harnesses", "git", "sandbox", "engine", "otel", "replay"}
    ),  # continue_from=ContinueFrom(...): a fork plays what came before its turn
    "temporal": frozenset({"errors", "lazy", "progress", "wire", "actors", "harnesses", "sandbox", "engine", "workflow"}),
    "testing": frozenset(
        {"errors", "lazy", "wire", "harnesses", "launcher", "sandbox", "engine", "workflow", "temporal", "replay"}
    ),  # engine="temporal"; fork: the sandbox kept; replay: agents played from a record
    "cli": frozenset(
        {"__about__", "errors", "progress", "wire", "harnesses", "launcher", "sandbox", "engine", "workflow", "temporal",
         "testing", "replay"}  # awf replay and awf export: agentswf.testing's replay
    ),
    "__init__": frozenset({"__about__", "lazy", "errors", "progress", "harnesses", "engine", "workflow", "replay"}),  # the public names
    "__main__": frozenset({"cli"}),  # python -m agentswf
}
ABOVE_THE_ENGINE = frozenset({"workflow", "temporal", "testing", "cli", "__init__", "__main__"})
LOWER = ("wire", "actors", "harnesses", "git", "launcher", "sandbox", "engine", "replay")

# Everything `agentswf/launcher/client.py` imports, all standard library, and the wire's constants.
CLIENT_IMPORTS = frozenset(
    {
        "posix",
        "sys",
        "time",
        "_frozen_importlib",
        "_frozen_importlib_external",
        "_json",
        "_socket",
        "select",
        "errno",
        "agentswf.wire.common",
    }
)


def _imported(source: str, package: str) -> set[str]:
    """The absolute names of what `source`, a module of `package`, imports: a module, or a name
    from one as `module.name` (so `from .. import engine` is `agentswf.engine`)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def _module_imports(path: Path) -> set[str]:
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    return _imported(path.read_text(), package)


def _part(path: Path) -> str:
    """The part of agentswf the file `path` is in: its package, or the module itself at the top."""
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def _part_of(name: str) -> str | None:
    """The part of agentswf an imported `name` is in (None: it isn't agentswf's)."""
    parts = name.split(".")
    return parts[1] if parts[0] == "agentswf" and len(parts) > 1 else None


def _outside(layer: str, name: str) -> bool:
    """Whether importing `name` from `layer` leaves what the layer may import."""
    part = _part_of(name)
    return part is not None and part != layer and part not in ALLOWED[layer]


def _files(layer: str) -> list[Path]:
    module = PACKAGE / f"{layer}.py"
    return [module] if module.exists() else sorted((PACKAGE / layer).rglob("*.py"))


def test_every_part_has_a_layer() -> None:
    parts = {_part(path) for path in PACKAGE.rglob("*.py")}
    assert parts == set(ALLOWED), f"not in ALLOWED: {sorted(parts - set(ALLOWED))}; gone: {sorted(set(ALLOWED) - parts)}"


def test_the_layers_allow_no_cycle() -> None:
    assert not set().union(*ALLOWED.values()) - set(ALLOWED)
    graphlib.TopologicalSorter(ALLOWED).prepare()  # CycleError names the parts of one


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_a_part_imports_only_what_its_layer_allows(layer: str) -> None:
    found = [
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in _files(layer)
        for name in sorted(_module_imports(path))
        if _outside(layer, name)
    ]
    assert not found, f"{layer} imports outside its layer:\n" + "\n".join(found)


def test_no_part_imports_another_in_a_cycle() -> None:
    """What the two tests above imply, said of the imports themselves: a cycle is named with its files."""
    imports: dict[str, dict[str, set[str]]] = {}
    for path in PACKAGE.rglob("*.py"):
        for name in _module_imports(path):
            part = _part_of(name)
            if part is not None and part != _part(path):
                imports.setdefault(_part(path), {}).setdefault(part, set()).add(str(path.relative_to(PACKAGE)))
    try:
        graphlib.TopologicalSorter(imports).prepare()
    except graphlib.CycleError as error:
        cycle: list[str] = error.args[1]
        steps = [f"{a} imports {b} in {sorted(imports[a][b])}" for a, b in zip(cycle[1:], cycle, strict=False)]
        pytest.fail("parts of agentswf import each other in a cycle:\n" + "\n".join(steps))


@pytest.mark.parametrize("layer", LOWER)
def test_a_lower_package_imports_nothing_above_the_engine(layer: str) -> None:
    assert not ABOVE_THE_ENGINE & ALLOWED[layer]


def test_the_wfa_client_imports_only_what_it_has() -> None:
    imported = _module_imports(PACKAGE / "launcher" / "client.py")
    unexpected = {name for name in imported if name not in CLIENT_IMPORTS and name.rpartition(".")[0] not in CLIENT_IMPORTS}
    assert not unexpected, f"the wfa client imports more than it did: {sorted(unexpected)}"


@pytest.mark.parametrize(
    ("source", "layer", "caught"),
    [
        ("from ..engine.outcomes import Turn\n", "harnesses", True),
        ("from .. import workflow\n", "wire", True),
        ("def later():\n    import agentswf.cli.main\n", "actors", True),
        ("from ..testing import scripted\n", "launcher", True),
        ("from ..workflow.worktrees import GitFailed\n", "sandbox", True),
        ("from ..temporal.keys import scrubbed\n", "workflow", True),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..workflow.tools import Tool\n", "engine", True),
        ("from ..wire.nesting import too_deep\nfrom . import base\n", "harnesses", False),
        ("from ..harnesses.keeper import kill_marked\n", "launcher", False),
        ("import msgspec\n", "wire", False),
    ],
)
def test_the_walk_sees_every_form_of_import(source: str, layer: str, caught: bool) -> None:
    names = _imported(source, f"agentswf.{layer}")
    assert any(_outside(layer, name) for name in names) is caught
