"""Load a workflow from a Python file, as `awf run` does."""

from __future__ import annotations

import importlib.util
import re
import sys
import traceback
from pathlib import Path

from ..errors import DefinitionError
from .definition import WorkflowDefinition

MODULE_PREFIX = "awf_workflow_"
"""Of the module name a workflow file is loaded under: internal, so never shown to its author."""
_MODULE_QUALIFIER = re.compile(rf"\b(?:{MODULE_PREFIX}\w+|builtins|typing|__main__)\.")


def type_text(annotation: object) -> str:
    """A type as its author wrote it (`Verdict`, `list[Verdict]`), for an error message: without
    the internal module a workflow file is loaded under (`awf_workflow_review.Verdict`)."""
    if isinstance(annotation, type) and not getattr(annotation, "__args__", None):
        return annotation.__qualname__
    return _MODULE_QUALIFIER.sub("", repr(annotation))


def load_workflow(path: str | Path, name: str | None = None) -> WorkflowDefinition:
    """The workflow the file at `path` defines (the one named `name`, if it defines several).

    The file's folder goes on sys.path, last, so it can import its neighbours: never in front of
    the standard library or the installed packages, which a file planted beside it (by a sandbox
    that writes its folder) would otherwise stand in for, outside the sandbox, in the next run.
    """
    file = Path(path).resolve()
    if not file.is_file():
        raise DefinitionError(f"no such file: {path}")
    spec = importlib.util.spec_from_file_location(f"{MODULE_PREFIX}{file.stem.replace('-', '_')}", file)
    if spec is None or spec.loader is None:
        raise DefinitionError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    if str(file.parent) not in sys.path:
        sys.path.append(str(file.parent))
    sys.modules[spec.name] = module  # so type annotations resolve in the module's namespace
    try:
        spec.loader.exec_module(module)
    except BaseException as error:
        del sys.modules[spec.name]
        if isinstance(error, Exception):
            raise DefinitionError(f"{_where(error, file)}: {_what(error)}") from error
        raise
    found = [value for value in vars(module).values() if isinstance(value, WorkflowDefinition)]
    if name is not None:
        found = [definition for definition in found if definition.name == name]
    if not found:
        what = f"no workflow named {name!r}" if name else "no workflow"
        raise DefinitionError(f"{file}: defines {what}: decorate an async function with @workflow(name=…, description=…)")
    if len(found) > 1:
        names = ", ".join(sorted(definition.name for definition in found))
        raise DefinitionError(f"{file}: defines several workflows ({names}); name one with --workflow")
    return found[0]


def _where(error: Exception, file: Path) -> str:
    """`file:line` of the error: a syntax error's own, or the file's line the error came through."""
    if isinstance(error, SyntaxError) and error.filename:
        return f"{error.filename}:{error.lineno}"
    frames = traceback.extract_tb(error.__traceback__)
    ours = [frame for frame in frames if frame.filename == str(file)]
    frame = ours[-1] if ours else frames[-1]
    return f"{frame.filename}:{frame.lineno}"


def _what(error: Exception) -> str:
    if isinstance(error, SyntaxError):
        return f"{type(error).__name__}: {error.msg}"
    return f"{type(error).__name__}: {error}"
