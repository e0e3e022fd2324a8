"""`awf check FILE`: the mistakes a workflow's file shows before anything runs, all at once.

A run finds a misspelt runtime when the agent opens and a schema that isn't one at the turn
that asks for it: turn 5's costs turns 1 to 4. Most such mistakes are written as literals in
the file, so they can be read from its source: every `open(..., runtime=…, sandbox=…)`,
`run(..., schema=…, timeout=…)`, `Runtime(...)` and `budget=…` whose value is a literal (or,
for a schema, an expression of the module's names) is checked as the run would check it, each
finding with its line. What the workflow computes as it runs isn't seen, and nothing is run:
no agent starts, no CLI but `--version`-free lookups on PATH.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import DefinitionError, HarnessError
from ..harnesses.runtime import Runtime, check_runtime, harness_for, resolve_runtime
from ..sandbox.spec import check_spec
from ..wire.teaching import Taught
from .budgets import parse_budget
from .durations import to_seconds


@dataclass(frozen=True)
class Finding:
    """One mistake: the line it is on, and what is wrong."""

    line: int
    problem: str


@dataclass(frozen=True)
class Checked:
    """What `check_source` found, and how many literals it checked."""

    findings: list[Finding]
    checked: int


def check_source(source: str, namespace: Mapping[str, Any] | None, env: Mapping[str, str] | None = None) -> Checked:
    """Every literal runtime, sandbox, schema, timeout and budget in `source`, checked; `namespace`
    (the loaded module's, None if it didn't load) resolves schemas written as names."""
    tree = ast.parse(source)
    findings: list[Finding] = []
    checked = 0
    for call in (node for node in ast.walk(tree) if isinstance(node, ast.Call)):
        for problem in _check_call(call, namespace, env):
            if problem is not None:
                findings.append(Finding(call.lineno, problem))
            checked += 1
    return Checked(sorted(findings, key=lambda finding: finding.line), checked)


def _check_call(call: ast.Call, namespace: Mapping[str, Any] | None, env: Mapping[str, str] | None) -> Iterator[str | None]:
    name = call.func.attr if isinstance(call.func, ast.Attribute) else call.func.id if isinstance(call.func, ast.Name) else ""
    keywords = {keyword.arg: keyword.value for keyword in call.keywords if keyword.arg is not None}
    if name == "Runtime":
        literal = {key: _literal(value) for key, value in keywords.items()}
        if all(value is not _UNKNOWN for value in literal.values()) and not call.args:
            yield _problem(lambda: _runtime(Runtime(**literal), env))
    if name == "open" and "runtime" in keywords:
        runtime = _literal(keywords["runtime"])
        if isinstance(runtime, str):
            yield _problem(lambda: _runtime(resolve_runtime(runtime), env))
    if "sandbox" in keywords:
        spec = _literal(keywords["sandbox"])
        if isinstance(spec, dict):
            yield _problem(lambda: check_spec(spec))
    if "timeout" in keywords:
        timeout = _literal(keywords["timeout"])
        if isinstance(timeout, (str, int, float)) and not isinstance(timeout, bool):
            yield _problem(lambda: to_seconds(timeout, what="timeout"))
    if "budget" in keywords:
        budget = _literal(keywords["budget"])
        if isinstance(budget, str):
            yield _problem(lambda: parse_budget(budget))
    if name == "run" and "schema" in keywords and namespace is not None:
        schema = _evaluated(keywords["schema"], namespace)
        if schema is not _UNKNOWN:
            yield _problem(lambda: _schema(schema, ast.unparse(keywords["schema"])))


def _runtime(runtime: Runtime, env: Mapping[str, str] | None) -> None:
    check_runtime(runtime)
    harness_for(runtime, env)  # a CLI not on PATH: HarnessError, as at open


def _schema(schema: Any, written: str) -> None:
    try:
        Taught(schema)
    except TypeError as error:
        raise DefinitionError(f"{written} can't be a turn's schema: {error}") from None


def _problem(check: Any) -> str | None:
    try:
        check()
    except (DefinitionError, HarnessError, ValueError, TypeError) as error:
        return str(error)
    return None


_UNKNOWN = object()


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _UNKNOWN


def _evaluated(node: ast.expr, namespace: Mapping[str, Any]) -> Any:
    """A schema written as the module's names (`Verdict`, `list[Finding]`, `str`): evaluated in its
    namespace, names and subscripts only, never a call."""
    if any(isinstance(inner, (ast.Call, ast.Lambda, ast.NamedExpr, ast.Await)) for inner in ast.walk(node)):
        return _UNKNOWN
    try:
        return eval(compile(ast.Expression(node), "<schema>", "eval"), dict(namespace))
    except Exception:  # a local name, not the module's: not checked here
        return _UNKNOWN


def check_file(path: Path, namespace: Mapping[str, Any] | None, env: Mapping[str, str] | None = None) -> Checked:
    return check_source(path.read_text(), namespace, env)
