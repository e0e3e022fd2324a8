"""`awf ls`, `awf status`, `awf stop`, `awf tail`: a run seen and steered from another terminal.

`status` and `stop` go over the run's operator socket, which refuses any process of the
run's agents (`engine.admission`): no agent stops its own run or reads how it stands.
`tail` follows the record as it grows (`follow.Follower`), after the same socket has
admitted the asker while the run is live; `ls` reads the records alone (a run's cost is
across its attempts, and it says how many there were).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import msgspec

from ..engine.operator_wire import Status, Stop
from ..engine.record.attempts import INTERRUPTED, RecordRefused, read_attempts
from ..engine.record.layout import DEFAULT_RUN_ROOT, find_run, read_json
from . import temporal
from .attach import print_kept
from .failures import UsageFailure
from .follow import Event, Follower, Tally, events_of, run_cost, run_ended, turn_started
from .runs import (
    RunStanding,
    all_runs,
    answered,
    ask_live_run,
    is_live,
    live_run_dir,
    run_dir_of,
    run_root_of,
    value_of,
)
from .shown import shown, shown_json

TAIL_POLL_SECONDS = 0.2  # how often `awf tail` reads what the record gained
STOP_WAIT_SECONDS = 30.0  # for the run to record its ending after `awf stop` (its cleanup is bounded at 10s)
LIVE_RUN_HELP = "the run's id or directory (default: the one live run)"


def age(seconds: float) -> str:
    """`seconds` as the one or two largest units: 45s, 3m12s, 2h05m, 4d03h."""
    seconds = max(0, int(seconds))
    for unit, size, sub, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if seconds >= size:
            rest = (seconds % size) // sub_size
            return f"{seconds // size}{unit}{rest:02d}{sub}"
    return f"{seconds}s"


def money(cost: float | None) -> str:
    return "-" if cost is None else f"${cost:.4f}"


def spent_cost(cost: float | None) -> str:
    """A cost in a sentence: `awf ls`'s "-" reads as nothing there."""
    return "no cost known" if cost is None else money(cost)


def counted(count: int, word: str) -> str:
    """`1 turn`, `2 turns`: a count with its word, for lines a person reads."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _info(run_dir: Path) -> dict[str, Any]:
    try:
        info = read_json(run_dir / "run.json")
    except (OSError, msgspec.DecodeError):
        return {}
    return info if isinstance(info, dict) else {}


def _time(value: Any) -> float | None:
    """A time of the record (run.json's `started_at`), None where it isn't one: an agent can write it."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _forked_from(info: dict[str, Any]) -> str | None:
    """`RUN at KEY turn N`, for a run forked at a turn (awf continue --from), from its run.json."""
    forked = info.get("forked_from")
    if not isinstance(forked, dict):
        return None
    return f"{forked.get('run_id')} at {forked.get('agent')} turn {forked.get('turn')}"


def _state(run_dir: Path) -> str:
    output = run_dir / "output.json"
    if output.exists():
        try:
            return shown(str(read_json(output).get("outcome", "?")))  # the record's: an agent can write it
        except (OSError, msgspec.DecodeError, AttributeError):
            return "?"
    return "live" if is_live(run_dir) else "unfinished"


def _attempts(run_dir: Path) -> str:
    """How many attempts the run had, and how many of them were interrupted (killed before
    they recorded their end, found so by the next): `3 (1 interrupted)`."""
    try:
        attempts = read_attempts(run_dir)
    except (OSError, RecordRefused):
        return "?"
    interrupted = sum(attempt.outcome == INTERRUPTED for attempt in attempts)
    return str(len(attempts) or 1) + (f" ({interrupted} interrupted)" if interrupted else "")


def command_ls(options: argparse.Namespace) -> int:
    if options.last is not None and options.last < 1:
        raise UsageFailure(f"--last takes how many of the latest runs to list, 1 or more, not {options.last}")
    root = run_root_of(options)
    runs = all_runs(root)
    if not runs:
        print(f"awf: no runs under {root}", file=sys.stderr)
        return 0
    now = time.time()
    rows = [("RUN", "WORKFLOW", "STATE", "ATTEMPTS", "AGE", "COST")]
    for run_dir in runs[-options.last :] if options.last else runs:
        info = _info(run_dir)
        started = _time(info.get("started_at"))
        rows.append(
            (
                shown(run_dir.name),
                shown(str(info.get("workflow", run_dir.parent.name))),  # the record's: an agent can write it
                _state(run_dir),
                _attempts(run_dir),
                "-" if started is None else age(now - started),
                money(run_cost(run_dir)),
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    for run_dir in runs[-options.last :] if options.last else runs:
        lineage = _forked_from(_info(run_dir))
        if lineage:
            print(shown(f"{run_dir.name} is a fork of {lineage}"))  # the record's: an agent can write it
    print_kept(root)
    return 0


def _status_value(run_dir: Path, live: dict[str, Any]) -> dict[str, Any]:
    """The live run's answer, with what its record adds: each agent's turn, time and spend."""
    tally = Tally()
    for event in Follower(run_dir).poll():
        tally.add(event)
    info = _info(run_dir)
    agents = []
    for agent in live.get("agents", []):
        seen = tally.agents.get(agent["key"])
        agents.append(
            {
                **agent,
                "turn": seen.turn if seen else 0,
                "turns": seen.turns if seen else 0,
                "turn_started_at": seen.started_at if seen and agent["in_turn"] else None,
                "deadline_at": seen.deadline_at if seen and agent["in_turn"] else None,
                "doing": seen.doing if seen else "",
                "tokens": seen.tokens if seen else 0,
                "cost_usd": seen.cost_usd if seen else None,
            }
        )
    try:
        attempts = read_attempts(run_dir)
    except (OSError, RecordRefused):
        attempts = []
    return {
        "run_id": run_dir.name,
        "workflow": info.get("workflow"),
        "started_at": _time(info.get("started_at")),  # the run's: its first attempt's start
        "attempt": attempts[-1].n if attempts else 1,
        "attempt_started_at": attempts[-1].started_at if attempts else _time(info.get("started_at")),
        "agents": agents,
        "participants": live.get("participants", []),
        "pending": live.get("pending", []),
        "tokens": tally.tokens,
        "cost_usd": tally.cost_usd,
    }


def print_status(status: dict[str, Any], out: TextIO, now: float) -> None:
    """The status a live run answered, each line `shown` on one line: its names and messages are agents'."""

    def write(text: str) -> None:
        out.write(shown(text) + "\n")

    started, attempt, live_since = status.get("started_at"), status.get("attempt", 1), status.get("attempt_started_at")
    alive = "" if started is None else f", live for {age(now - started)}"
    if attempt > 1 and started is not None and live_since is not None:  # a continued run: this attempt's time, and the run's
        alive = f", attempt {attempt} live for {age(now - live_since)} (the run started {age(now - started)} ago)"
    in_turn = sum(agent["in_turn"] for agent in status["agents"])
    write(
        f"run {status['run_id']} of {status['workflow']}{alive}: {counted(len(status['agents']), 'agent')}, "
        f"{in_turn} in a turn; spent {counted(status['tokens'], 'token')}, {spent_cost(status['cost_usd'])}"
    )
    for agent in status["agents"]:
        state = f"in turn {agent['turn']}" if agent["in_turn"] else f"idle after {counted(agent['turns'], 'turn')}"
        if agent["in_turn"] and agent["turn_started_at"] is not None:
            state += f" for {age(now - agent['turn_started_at'])}"
            if agent["deadline_at"] is not None:
                state += f" of {age(agent['deadline_at'] - agent['turn_started_at'])}"
        write(f"  {agent['key']}: {state}; {agent['tokens']} tokens, {spent_cost(agent['cost_usd'])}")
        if agent["owes"]:
            write(f"    owes a reply to {', '.join(agent['owes'])}")
        if agent["awaits"]:
            write(f"    awaits {agent['awaits']}'s reply")
        if agent["doing"]:
            write(f"    last: {agent['doing']}")
        said = agent.get("said")
        if agent["in_turn"] and isinstance(said, dict):  # its CLI's latest line: what a silent turn waits on
            write(f"    last output, {age(now - said['at'])} ago: {said['line']}")
    for request in status["pending"]:
        write(f"  waiting for approval: {request['call_id']} {request['agent']} → {request['tool']}")
    if status["participants"]:
        write(f"  participants: {', '.join(status['participants'])}")


def command_status(options: argparse.Namespace) -> int:
    on_temporal = temporal.temporal_run(options)
    if on_temporal is not None:
        return temporal.command_status(options, on_temporal)
    run_dir = live_run_dir(options)
    response = answered(ask_live_run(options, Status(), run_dir))
    standing = value_of(response, RunStanding)  # of the run's shape, or refused: run.json can name an agent's socket
    status = _status_value(run_dir, msgspec.to_builtins(standing))
    if options.json:
        sys.stdout.write(shown_json(status) + "\n")
    else:
        print_status(status, sys.stdout, time.time())
    return 0


def command_stop(options: argparse.Namespace) -> int:
    run_dir = live_run_dir(options)
    on_temporal = temporal.temporal_record(run_dir)
    if on_temporal is not None:
        return temporal.command_stop(options, on_temporal, run_dir)
    response = answered(ask_live_run(options, Stop(options.reason or "", options.by), run_dir))
    print(shown(f"awf: {response.message}"), file=sys.stderr)
    deadline = time.monotonic() + STOP_WAIT_SECONDS
    while not (run_dir / "output.json").exists():
        if time.monotonic() > deadline:
            print(f"awf: run {run_dir.name} has not recorded its ending within {STOP_WAIT_SECONDS:g}s", file=sys.stderr)
            return 1
        time.sleep(TAIL_POLL_SECONDS)
    print(f"awf: run {run_dir.name} {_state(run_dir)}  (awf logs {run_dir.name})", file=sys.stderr)
    return 0


def event_line(event: Event) -> str:
    clock = time.strftime("%H:%M:%S", time.localtime(event.at))
    who = f"{event.agent}: " if event.agent else ""
    return shown(f"{clock} {who}{event.text}")  # what an agent wrote, on one line: shown, not obeyed by the terminal


def _tail_words(options: argparse.Namespace) -> tuple[Path, str | None]:
    """`[run] [agent]`: one word is a run when it names a run's record, else an agent of the live run."""
    words = options.words
    if len(words) > 2:
        raise UsageFailure(f"awf tail takes [run] [agent], not {len(words)} words")
    root = run_root_of(options)
    if len(words) == 2 or (len(words) == 1 and find_run(root, words[0]) is not None):
        options.run, words = words[0], words[1:]
        run_dir = run_dir_of(options, options.run)
    else:
        options.run = None
        run_dir = live_run_dir(options)
    return run_dir, words[0] if words else None


def command_tail(options: argparse.Namespace) -> int:
    run_dir, agent = _tail_words(options)
    on_temporal = temporal.temporal_record(run_dir) if not (run_dir / "output.json").exists() else None
    if on_temporal is not None:  # its record is written when it ends: until then, what its workflow keeps

        def show(lines: list[tuple[str, dict[str, Any]]]) -> None:
            events = [event for log, line in lines for event in events_of(log, line)]
            events += [run_ended(line) for log, line in lines if log == "output"]
            events += [turn_started(line, line.get("at") or 0.0) for log, line in lines if log == "calls"]
            for event in sorted(events, key=lambda event: event.at):
                if agent is None or event.agent == agent or event.kind == "run-ended":
                    print(event_line(event), flush=True)

        temporal.command_tail(options, on_temporal, show)
        return 0
    if is_live(run_dir):  # the operator socket says whether the asker may watch: no agent of the run may
        answered(ask_live_run(options, Status(), run_dir))
    follower = Follower(run_dir)
    while True:
        for event in follower.poll():
            if agent is None or event.agent == agent or event.kind == "run-ended":
                print(event_line(event), flush=True)
        if follower.ended or not options.follow:
            return 0
        time.sleep(TAIL_POLL_SECONDS)


def add_parsers(commands: Any) -> None:
    """Add ls, status, stop and tail to `awf`'s subcommands."""
    root_help = f"where records are (default {DEFAULT_RUN_ROOT})"
    ls_parser = commands.add_parser(
        "ls", help="list the runs under the run root: id, workflow, state, attempts, age, cost",
        description="List the runs recorded under the run root, the latest last: each one's id, workflow, state (live, "
                    "or how it ended), attempts, age and cost; and the panes kept after a run (awf attach).",
    )  # fmt: skip
    ls_parser.add_argument("--last", type=int, default=None, metavar="N", help="only the N latest runs")
    ls_parser.add_argument("--run-root", help=root_help)
    ls_parser.set_defaults(handler=command_ls)

    status_parser = commands.add_parser(
        "status", help="how a live run stands: its agents, their turns, spend",
        description="Ask a live run how it stands: each agent's state, its turn and the time it has been in it against "
                    "its deadline, its last event, and what the run spent. A run that has ended: awf logs.",
    )  # fmt: skip
    status_parser.add_argument("run", nargs="?", help=LIVE_RUN_HELP)
    status_parser.add_argument("--json", action="store_true", help="print it as one JSON object")
    status_parser.add_argument("--run-root", help=root_help)
    status_parser.set_defaults(handler=command_status)

    stop_parser = commands.add_parser(
        "stop", help="stop a live run: it ends stopped, its agents stopped",
        description="Stop a live run, as wf.stop would: its workflow is cancelled, its agents' processes are stopped, "
                    "and it ends stopped, its record saying why (--reason) and who (--by). awf continue goes on with it.",
    )  # fmt: skip
    stop_parser.add_argument("run", nargs="?", help=LIVE_RUN_HELP)
    stop_parser.add_argument("--reason", help="why, for the record")
    stop_parser.add_argument("--by", default="operator", help="who stops it, for the record (default operator)")
    stop_parser.add_argument("--run-root", help=root_help)
    stop_parser.set_defaults(handler=command_stop)

    tail_parser = commands.add_parser(
        "tail", help="a run's events as they happen: turns, tool calls, messages", usage="awf tail [RUN] [AGENT] [--no-follow] [--run-root DIR]",
        description="Print a run's events as they are recorded (turns started and ended, tool calls, messages, wf.log "
                    "lines), of one agent if named, until the run ends; --no-follow prints what is recorded and exits.",
    )
    tail_parser.add_argument("words", nargs="*", metavar="[run] [agent]", help="the run's id or directory (default: the one live run), and an agent (default: all of them)")
    tail_parser.add_argument("--no-follow", dest="follow", action="store_false", help="print what is recorded and exit")
    tail_parser.add_argument("--run-root", help=root_help)
    tail_parser.set_defaults(handler=command_tail)
