"""What `awf run` shows while the run works: a live view in a terminal, plain lines elsewhere.

Both read the run's record from a thread of their own (`follow.Follower`), at most every
`VIEW_REFRESH_SECONDS`, so drawing never runs on the run's event loop; the live view also
asks the run's operator socket how its agents stand (whom each owes a reply, whose it
awaits, what waits for approval) every `STATUS_REFRESH_SECONDS`, one small request.

- The live view (rich): a row per agent — state, turn, time in the turn against its
  deadline, its last tool call or message (or the reply it awaits), tokens and cost — with
  the agents of one key group (the part of the key before `:`) folded under the group's
  row; the run's totals, and the run budget its attempt runs under (its record says) against
  what the run spent (a continued run's earlier attempts' spend and time too, from its
  usage.json and attempts); the last `LOG_LINES_SHOWN` `wf.log` lines.
- Plain lines: one per turn started and ended, tool call, message and `wf.log` line, in
  the record's order, through structlog as the rest of `awf run`'s progress.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec
import structlog
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ..engine.operator_wire import OPERATOR_TIMEOUT_SECONDS, Status, ask_run
from ..engine.record.layout import read_json
from ..workflow.budgets import Budget, Spent
from ..workflow.continuing import attempt_budget
from ..workflow.durations import to_seconds
from .control import age, money
from .follow import MAX_EVENT_TEXT_CHARS, AgentTally, Event, Follower, Tally
from .runs import RunStanding
from .shown import shown

VIEW_REFRESH_SECONDS = 0.25  # the most often the view reads the record and draws (4 a second)
STATUS_REFRESH_SECONDS = 1.0  # the most often the live view asks the run how its agents stand
STATUS_TIMEOUT_SECONDS = 2.0  # a status the run doesn't give in this time is asked again later
LOG_LINES_SHOWN = 5
TURN_SOURCE = "agentswf.turns"
LOG_SOURCE = "agentswf.workflow"
RECORDED_SOURCES = (TURN_SOURCE, LOG_SOURCE, "agentswf.tools")
"""Whose progress lines the plain view prints from the record instead, so that every line
it prints comes in the order the record has them."""

ViewKind = Literal["live", "plain"]


def _plain(event: Event) -> None:
    """One structlog line for an event of the record (turns, tool calls, messages, log lines)."""
    fields = event.fields  # its names cut (`_cut`): a line an agent wrote into the record can name anything
    if event.kind == "turn-started":
        structlog.get_logger(TURN_SOURCE).info("turn started", agent=event.agent, turn=fields.get("n"), call=_cut(fields.get("call_id")))
    elif event.kind == "turn-ended":
        usage = fields.get("usage") or {}
        spent = {key: usage[key] for key in ("input_tokens", "output_tokens", "cost_usd") if usage.get(key) is not None}
        outcome = (fields.get("outcome") or {}).get("kind")
        structlog.get_logger(TURN_SOURCE).info(
            "turn ended", agent=event.agent, turn=fields.get("n"), call=_cut(fields.get("call_id")), outcome=_cut(outcome), **spent
        )
    elif event.kind == "tool":
        took = (fields.get("ended_at") or 0.0) - (fields.get("started_at") or 0.0)
        structlog.get_logger("agentswf.tools").info(
            "tool called", agent=event.agent, tool=_cut(fields.get("tool")), outcome=_cut(fields.get("outcome")), ms=round(took * 1000)
        )
    elif event.kind == "message":
        structlog.get_logger("agentswf.messages").info(
            "message sent", sender=event.agent, to=_cut(fields.get("to")), kind=_cut(fields.get("kind"))
        )
    elif event.kind == "approval":
        decision = fields.get("decision") or {}
        structlog.get_logger("agentswf.approvals").info(
            "tool call decided", agent=event.agent, tool=_cut(fields.get("tool")), approved=decision.get("approved"),
            by=_cut(decision.get("by"))
        )
    elif event.kind == "log":  # wf.log's lines, and the tool calls a policy logs
        said = {key: _cut(value) for key, value in (fields.get("fields") or {}).items()}
        # bound, not passed as keywords: a field named `event` is the message's place in structlog, and wins over it
        structlog.get_logger(LOG_SOURCE).bind(**said).info(_cut(str(fields.get("message", ""))))


def _cut(value: Any) -> Any:
    """A field as a plain line shows it: a number as it is, text (or any other value's JSON) cut at
    MAX_EVENT_TEXT_CHARS, as `awf tail` cuts it: a wf.log field can hold an agent's whole answer."""
    if value is None or isinstance(value, bool | int | float):
        return value
    text = value if isinstance(value, str) else msgspec.json.encode(value).decode()
    return text if len(text) <= MAX_EVENT_TEXT_CHARS else text[: MAX_EVENT_TEXT_CHARS - 1] + "…"


def _deadline(agent: AgentTally, now: float) -> str:
    if agent.state != "in turn" or agent.started_at is None:
        return ""
    took = age(now - agent.started_at)
    return took if agent.deadline_at is None else f"{took} / {age(agent.deadline_at - agent.started_at)}"


def _doing(agent: AgentTally, standing: dict[str, Any] | None, pending: Sequence[dict[str, Any]] = ()) -> str:
    waiting = [call["tool"] for call in pending if call.get("agent") == agent.key and isinstance(call.get("tool"), str)]
    if waiting:
        return f"tool {', '.join(waiting)} waits for approval (awf pending)"
    running = standing.get("tools") if standing else None
    if running and isinstance(running, list):
        return f"tool {', '.join(str(name) for name in running)} runs"
    if standing and standing.get("awaits"):
        return f"awaits {standing['awaits']}'s reply"
    if standing and standing.get("owes"):
        return f"owes {', '.join(standing['owes'])} a reply"
    return agent.doing


def budget_text(budget: Budget, tally: Tally, seconds: float, carried: Spent | None = None) -> str:
    """The run's budget beside what it spent so far, `carried` (its earlier attempts', when it was
    continued) and this attempt's turns, and its `seconds`: `budget: 3/200 turns · 40s/2h00m`."""
    before = carried or Spent()
    parts = []
    if budget.turns is not None:
        parts.append(f"{before.turns + sum(agent.turns for agent in tally.agents.values())}/{budget.turns} turns")
    if budget.tokens is not None:
        parts.append(f"{before.tokens + tally.tokens}/{budget.tokens} tokens")
    if budget.cost_usd is not None:
        parts.append(f"{money(before.cost_usd + (tally.cost_usd or 0.0))}/{money(budget.cost_usd)}")
    if budget.wall is not None:
        parts.append(f"{age(before.seconds + seconds)}/{age(to_seconds(budget.wall))}")
    return "budget: " + " · ".join(parts)


def _told(text: str, style: str = "") -> Text:
    """A string the record gave (an agent's key, what it did, a wf.log line, the run's reason) as
    rich shows it: literally, its markup (`[bold]`, `[link=…]`) not read, and on one line, its new
    lines and control characters as escapes (`shown`), as an agent may have written any of it."""
    return Text(shown(text), style=style)


def render(
    tally: Tally, status: dict[str, Any], header: str, now: float, budget: Budget | None = None, seconds: float = 0.0,
    carried: Spent | None = None,
) -> Group:
    """The view of a run: pure, from its tally, the run's last status answer, and its budget against
    what it spent (`carried`: what its earlier attempts spent, when it was continued)."""
    standings = {agent["key"]: agent for agent in status.get("agents", [])}
    pending = status.get("pending", [])
    table = Table(expand=True, box=None, pad_edge=False)
    for name, justify in (("agent", "left"), ("state", "left"), ("turn", "right"), ("time / deadline", "left"),
                          ("doing", "left"), ("tokens", "right"), ("cost", "right")):
        table.add_column(name, justify=justify, no_wrap=True, overflow="ellipsis", ratio=3 if name == "doing" else None)  # type: ignore[arg-type]
    groups: dict[str, list[AgentTally]] = {}
    for agent in sorted(tally.agents.values(), key=lambda agent: agent.key):
        groups.setdefault(agent.group, []).append(agent)
    for group, members in groups.items():
        folded = len(members) > 1
        if folded:
            busy = sum(member.state == "in turn" for member in members)
            costs = [member.cost_usd for member in members if member.cost_usd is not None]
            table.add_row(
                _told(f"{group} ({len(members)})", style="bold"), Text(f"{busy} in turn"), "", "", "",
                Text(str(sum(member.tokens for member in members))), Text(money(sum(costs) if costs else None)),
            )
        for agent in members:
            style = "green" if agent.state == "in turn" else "dim"
            table.add_row(
                _told(("  " if folded else "") + agent.key),
                Text(agent.state, style=style),
                Text(str(agent.turn or "")),
                Text(_deadline(agent, now)),
                _told(_doing(agent, standings.get(agent.key), pending)),
                Text(str(agent.tokens)),
                Text(money(agent.cost_usd)),
            )
    totals = f"{tally.in_turn} in turn · {tally.tokens} tokens · {money(tally.cost_usd)}"
    if pending:
        totals += f" · {len(pending)} waiting for approval (awf pending)"
    parts: list[Any] = [_told(header, style="bold"), table, Text(totals)]
    if budget is not None:
        parts.append(Text(budget_text(budget, tally, seconds, carried)))
    if tally.logs:
        parts.append(Text("\n".join(shown(line) for line in tally.logs), style="dim"))  # a line each
    if tally.ended:
        parts.append(_told(tally.ended, style="bold"))
    return Group(*parts)


class RunView:
    """The watcher `awf run` gives `progress.watch_runs`: a thread per run that reads its
    record and draws it (`kind` "live") or prints its lines ("plain"), until `close`."""

    def __init__(self, kind: ViewKind, console: Console | None = None) -> None:
        self.kind = kind
        self.console = console or Console(stderr=True)
        self._threads: list[tuple[threading.Thread, threading.Event]] = []

    def __call__(self, run_id: str, record_dir: Path) -> None:
        done = threading.Event()
        follower = Follower(record_dir)
        follower.skip_recorded()  # a continued run's earlier attempts: its record holds them already
        thread = threading.Thread(target=self._watch, args=(run_id, record_dir, follower, done), name=f"awf view {run_id}", daemon=True)
        self._threads.append((thread, done))
        thread.start()

    def close(self) -> None:
        """Stop watching: each view reads what is left of its record, draws it once more, and ends."""
        for thread, done in self._threads:
            done.set()
            thread.join()
        self._threads.clear()

    def _watch(self, run_id: str, record_dir: Path, follower: Follower, done: threading.Event) -> None:
        if self.kind == "plain":
            while True:
                finishing = done.is_set()
                for event in follower.poll():
                    _plain(event)
                if finishing:
                    return
                done.wait(VIEW_REFRESH_SECONDS)
        self._live(run_id, record_dir, follower, done)

    def _live(self, run_id: str, record_dir: Path, follower: Follower, done: threading.Event) -> None:
        tally = Tally()
        status: dict[str, Any] = {}
        asked = 0.0
        started = time.time()
        header = f"run {run_id} · record {record_dir}"
        budget, carried = attempt_budget(record_dir)  # as recorded: a continue's is the run's, unless given another
        with Live(console=self.console, auto_refresh=False, transient=False, redirect_stdout=False, redirect_stderr=False) as live:
            while True:
                finishing = done.is_set()
                for event in follower.poll():
                    tally.add(event, keep_logs=LOG_LINES_SHOWN)
                now = time.time()
                if finishing or tally.ended:
                    status = {}  # the run's end state: nothing waits or is awaited any more
                elif now - asked >= STATUS_REFRESH_SECONDS:
                    asked = now
                    status = _status(record_dir) or status
                view = render(tally, status, f"{header} · {age(now - started)}", now, budget, now - started, carried)
                live.update(view, refresh=True)
                if finishing:
                    return
                done.wait(VIEW_REFRESH_SECONDS)


def _status(record_dir: Path) -> dict[str, Any] | None:
    """The run's answer to `awf status`, or None when it gave none (starting, ending)."""
    try:
        control = read_json(record_dir / "run.json").get("control")
        if not control:
            return None
        response = ask_run(control, Status(), timeout=min(STATUS_TIMEOUT_SECONDS, OPERATOR_TIMEOUT_SECONDS))
        if not response.ok:
            return None
        standing = msgspec.convert(response.value, RunStanding)  # run.json can name an agent's socket, answering any JSON
    except (OSError, msgspec.DecodeError, AttributeError):
        return None
    return msgspec.to_builtins(standing)  # type: ignore[no-any-return]
