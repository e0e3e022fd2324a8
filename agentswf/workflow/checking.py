"""`awf check FILE`: the mistakes a workflow's file shows before anything runs, all at once.

A run finds a misspelt runtime when the agent opens and a schema that isn't one at the turn
that asks for it: turn 5's costs turns 1 to 4. Most such mistakes are written as literals in
the file, so they can be read from its source: every `open(..., runtime=…, sandbox=…)`,
`run(..., schema=…, timeout=…)`, `Runtime(...)` and `budget=…` whose value is a literal (or,
for a schema, an expression of the module's names) is checked as the run would check it, each
finding with its line; so is every call of a method of an agent the file opens (its keywords),
and a turn's timeout longer than the run's is said, as the run's deadline cuts it short. What the workflow computes as it runs isn't seen, and nothing is run:
no agent starts, no CLI but `--version`-free lookups on PATH.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import DefinitionError, HarnessError
from ..harnesses.runtime import Runtime, check_runtime, harness_for, resolve_runtime
from ..sandbox.spec import check_spec
from ..wire.teaching import Taught
from .agents import Agent, Agents
from .budgets import parse_budget
from .durations import to_seconds
from .run_options import DEFAULT_RUN_TIMEOUT_SECONDS

KINDS = ("runtime", "sandbox", "schema", "timeout", "budget", "call")
"""What is checked, in the order the closing line of `awf check` counts them; a `call` is an
agent's method called with its keywords (`reviewer.run(..., budget=3)` has none such)."""

AGENT_METHODS = {name: method for name, method in vars(Agent).items() if name in ("run", "compact", "set", "fork")}
TURN_METHODS = ("run", "compact")  # an agent's methods whose `timeout=` is a turn's


@dataclass(frozen=True)
class Finding:
    """One mistake: the line it is on, and what is wrong."""

    line: int
    problem: str


@dataclass(frozen=True)
class Checked:
    """What `check_source` found, how many literals of each kind (`KINDS`) it checked, and the
    warnings: what holds but won't do what it says (a turn's timeout past the run's)."""

    findings: list[Finding]
    checked: dict[str, int]
    warnings: list[Finding]


def check_source(
    source: str,
    namespace: Mapping[str, Any] | None,
    env: Mapping[str, str] | None = None,
    run_seconds: float | None = None,
) -> Checked:
    """Every literal runtime, sandbox, schema, timeout and budget in `source`, and every call of an
    agent's method, checked; `namespace` (the loaded module's, None if it didn't load) resolves
    schemas written as names. `run_seconds` is the run's timeout (None: the default)."""
    tree = ast.parse(source)
    agents = _agent_names(tree)
    findings: list[Finding] = []
    checked = dict.fromkeys(KINDS, 0)
    for call in (node for node in ast.walk(tree) if isinstance(node, ast.Call)):
        for kind, problem in _check_call(call, namespace, env, agents):
            if problem is not None:
                findings.append(Finding(call.lineno, problem))
            checked[kind] += 1
    warnings = _long_turn_timeouts(tree, agents, run_seconds)
    return Checked(sorted(findings, key=lambda finding: finding.line), checked, warnings)


def long_turn_timeouts(source: str, run_seconds: float | None) -> list[Finding]:
    """`check_source`'s warnings alone, for `awf run` to say as the run starts."""
    tree = ast.parse(source)
    return _long_turn_timeouts(tree, _agent_names(tree), run_seconds)


def _long_turn_timeouts(tree: ast.AST, agents: set[str], run_seconds: float | None) -> list[Finding]:
    """Each agent's turn whose literal `timeout=` is longer than the run's timeout: the run's deadline
    cuts it short, whatever it says (`awf run --timeout` gives the run longer)."""
    limit = DEFAULT_RUN_TIMEOUT_SECONDS if run_seconds is None else run_seconds
    run = f"the run's {'default ' if run_seconds is None else ''}timeout, {_duration(limit)}"
    warnings = []
    for call in (node for node in ast.walk(tree) if isinstance(node, ast.Call)):
        method = _agent_method(call, agents)
        timeout = next((keyword.value for keyword in call.keywords if keyword.arg == "timeout"), None)
        if method not in TURN_METHODS or timeout is None:
            continue
        written = _literal(timeout)
        try:
            seconds = to_seconds(written)
        except DefinitionError:
            continue  # said among the findings, if a literal
        if seconds > limit:
            warnings.append(Finding(call.lineno, (
                f"the turn's timeout={written!r} is longer than {run}, which ends the turn first; "
                f"give the run more: awf run --timeout {_duration(seconds)} or longer"
            )))  # fmt: skip
    return sorted(warnings, key=lambda warning: warning.line)


def _duration(seconds: float) -> str:
    """Seconds as awf's flags take them: `1h`, `45m`, `90s`."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def _agent_names(tree: ast.AST) -> set[str]:
    """The names the file binds to an agent: `x = await <…>.open(...)` (`wf.agents.open`) or
    `x = await <agent>.fork(...)`, wherever in it."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Await):
            opened = node.value.value
            if isinstance(opened, ast.Call) and isinstance(opened.func, ast.Attribute) and opened.func.attr in ("open", "fork"):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(target.id for target in targets if isinstance(target, ast.Name))
    return names


def _agent_method(call: ast.Call, agents: set[str]) -> str | None:
    """`run` of `reviewer.run(...)` when `reviewer` is one of the file's agents (`_agent_names`)."""
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in agents:
        return func.attr
    return None


def _check_call(
    call: ast.Call, namespace: Mapping[str, Any] | None, env: Mapping[str, str] | None, agents: set[str]
) -> Iterator[tuple[str, str | None]]:
    name = call.func.attr if isinstance(call.func, ast.Attribute) else call.func.id if isinstance(call.func, ast.Name) else ""
    keywords = {keyword.arg: keyword.value for keyword in call.keywords if keyword.arg is not None}
    if name == "Runtime":
        literal = {key: _literal(value) for key, value in keywords.items()}
        if all(value is not _UNKNOWN for value in literal.values()) and not call.args:
            yield "runtime", _problem(lambda: _runtime(Runtime(**literal), env))
    if name == "open" and "runtime" in keywords:
        runtime = _literal(keywords["runtime"])
        if isinstance(runtime, str):
            yield "runtime", _problem(lambda: _runtime(resolve_runtime(runtime), env))
    if "sandbox" in keywords:
        spec = _literal(keywords["sandbox"])
        if isinstance(spec, dict):
            yield "sandbox", _problem(lambda: check_spec(spec))
    if "timeout" in keywords:
        timeout = _literal(keywords["timeout"])
        if isinstance(timeout, (str, int, float)) and not isinstance(timeout, bool):
            yield "timeout", _problem(lambda: to_seconds(timeout, what="timeout"))
    if "budget" in keywords:
        budget = _literal(keywords["budget"])
        if isinstance(budget, str):
            yield "budget", _problem(lambda: parse_budget(budget))
    if name == "run" and "schema" in keywords and namespace is not None:
        schema = _evaluated(keywords["schema"], namespace)
        if schema is not _UNKNOWN:
            yield "schema", _problem(lambda: _schema(schema, ast.unparse(keywords["schema"])))
        elif (instance := _instance_of(keywords["schema"], namespace)) is not None:
            yield "schema", (
                f"schema={ast.unparse(keywords['schema'])} is an instance of {instance}; a turn's schema is the "
                f"type: schema={instance}"
            )
    method = _agent_method(call, agents)
    if method in AGENT_METHODS or (name == "open" and isinstance(call.func, ast.Attribute) and _ends_in_agents(call.func.value)):
        yield "call", _keywords(ast.unparse(call.func), Agents.open if method is None else AGENT_METHODS[method], keywords)


def _ends_in_agents(node: ast.expr) -> bool:
    """`wf.agents` (of `wf.agents.open(...)`)."""
    return isinstance(node, ast.Attribute) and node.attr == "agents"


def _keywords(called: str, method: Any, keywords: Mapping[str, ast.expr]) -> str | None:
    """The first keyword argument `method` has no parameter for, said with those it has."""
    parameters = [name for name, parameter in inspect.signature(method).parameters.items()
                  if name != "self" and parameter.kind is not parameter.VAR_KEYWORD]  # fmt: skip
    unknown = next((keyword for keyword in keywords if keyword not in parameters), None)
    if unknown is None:
        return None
    return f"{called}() takes no {unknown}=; it takes {', '.join(parameters)}"


def _instance_of(node: ast.expr, namespace: Mapping[str, Any]) -> str | None:
    """`Verdict` for `schema=Verdict("approve")`: a call of a class of the module's, which makes
    an instance of it where a turn's schema is the type."""
    if not isinstance(node, ast.Call):
        return None
    made = _evaluated(node.func, namespace)
    return ast.unparse(node.func) if isinstance(made, type) else None


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


def check_file(
    path: Path, namespace: Mapping[str, Any] | None, env: Mapping[str, str] | None = None, run_seconds: float | None = None
) -> Checked:
    return check_source(path.read_text(), namespace, env, run_seconds)
