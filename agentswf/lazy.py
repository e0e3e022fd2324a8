"""A package's public names, each imported from its module the first time it is named (PEP 562).

A package that imported its public names as it was imported made every import of any of its
modules import them all: `awf ls` imported the engine, every harness and their logging (half of
its start, a third of a second) to read a record. The names are written once, as the package's
imports under `TYPE_CHECKING`, which type checkers and readers see; `public` reads them there.
"""

from __future__ import annotations

import ast
import importlib
import sys
import types
from typing import Any


def public(package: str, source: str) -> None:
    """Make the package `package` (its `__name__`), whose `__init__.py` is `source` (its `__file__`),
    import each name its `if TYPE_CHECKING:` block imports from there when the name is first read."""
    module = sys.modules[package]
    homes: dict[str, str] = {}

    def names() -> dict[str, str]:
        if not homes:  # read once, at the first name asked for
            homes.update(_homes(source))
        return homes

    def __getattr__(name: str) -> Any:
        if name not in names():
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(homes[name], package), name)
        setattr(module, name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(module), *names()})

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    module.__dir__ = __dir__  # type: ignore[method-assign]
    module.__class__ = _Package


def _homes(source: str) -> dict[str, str]:
    """Each name the `if TYPE_CHECKING:` block of the module at `source` imports, with its module."""
    with open(source, encoding="utf-8") as file:
        tree = ast.parse(file.read())
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    return {
        alias.asname or alias.name: "." * node.level + (node.module or "")
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


class _Package(types.ModuleType):
    """A package of lazy names: importing its submodule doesn't bind the submodule's name over a
    public name (`agentswf.workflow`, the package, is not `agentswf.workflow`, the decorator)."""

    def __setattr__(self, name: str, value: object) -> None:
        if not (isinstance(value, types.ModuleType) and name in getattr(self, "__all__", ())):
            super().__setattr__(name, value)
