"""A griffe extension: the folders of agentswf without an `__init__.py` read as its subpackages.

`agentswf/engine`, `harnesses` and `launcher` have no `__init__.py`; Python imports them
as namespace packages, but griffe (which mkdocstrings reads the API with) skips a folder
without one inside a regular package, so the types `agentswf` re-exports from them, such
as `Turn`, would not resolve. Once those folders have an `__init__.py`, delete this file
and its line in mkdocs.yml.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import griffe


class Subpackages(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if pkg.name != "agentswf" or not isinstance(pkg.filepath, Path):
            return
        root = pkg.filepath.parent
        for folder in sorted(path for path in root.iterdir() if path.is_dir()):
            if (folder / "__init__.py").exists() or folder.name in pkg.members or not any(folder.glob("*.py")):
                continue
            package = griffe.Module(folder.name, filepath=[folder], parent=pkg)
            pkg.set_member(folder.name, package)
            for source in sorted(folder.glob("*.py")):
                module = griffe.visit(
                    source.stem,
                    source,
                    source.read_text(),
                    parent=package,
                    extensions=loader.extensions,
                    docstring_parser=loader.docstring_parser,
                    docstring_options=loader.docstring_options,
                    lines_collection=loader.lines_collection,
                    modules_collection=loader.modules_collection,
                )
                package.set_member(source.stem, module)
