"""The packages stay in their layers: adapters and the kernel never import the engine or above.

Read from the source with `ast`, so an import inside a function or under TYPE_CHECKING counts
as much as one at the top. The `wfa` client must start in milliseconds and stay standard library
only: its imports are the few it has, and a new one fails here until it is added on purpose.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "agentswf"

# What each lower package may import of agentswf (its own modules always).
ALLOWED: dict[str, frozenset[str]] = {
    "wire": frozenset({"errors"}),
    "actors": frozenset({"errors"}),
    "harnesses": frozenset({"errors", "wire"}),
    "launcher": frozenset({"errors", "wire", "harnesses", "actors"}),  # the listener wakes on the kernel's primitives
}
UPWARD = frozenset({"engine", "workflow", "cli", "testing"})

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


def _outside(layer: str, name: str) -> bool:
    """Whether importing `name` from `layer` leaves what the layer may import."""
    parts = name.split(".")
    if parts[0] != "agentswf" or len(parts) < 2:
        return False
    return parts[1] != layer and parts[1] not in ALLOWED[layer]


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_a_lower_package_imports_nothing_above_it(layer: str) -> None:
    assert not UPWARD & ALLOWED[layer]
    found = [
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in sorted((PACKAGE / layer).rglob("*.py"))
        for name in sorted(_module_imports(path))
        if _outside(layer, name)
    ]
    assert not found, f"{layer} imports outside its layer:\n" + "\n".join(found)


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
        ("from ..wire.nesting import too_deep\nfrom . import base\n", "harnesses", False),
        ("from ..harnesses.keeper import kill_marked\n", "launcher", False),
        ("import msgspec\n", "wire", False),
    ],
)
def test_the_walk_sees_every_form_of_import(source: str, layer: str, caught: bool) -> None:
    names = _imported(source, f"agentswf.{layer}")
    assert any(_outside(layer, name) for name in names) is caught
