"""`awf logs`: a run's record, readable: how it ended (each attempt, when it was continued),
each turn, each answer handed in, and each process refused on the run's sockets for who it is."""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any, TextIO

import msgspec

from ..engine.accounting import RunUsage, spend_lines, spend_text
from ..engine.attempts import AttemptRecord, RecordRefused, read_attempts, read_stages
from ..engine.records import read_json, read_lines
from ..harnesses.usage import Usage
from .shown import shown as shown_text

MAX_SHOWN_CHARS = 400
MAX_SHOWN_LINES = 20


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else msgspec.json.encode(value).decode()
    text = text.replace("\n", "\\n")
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 1] + "…"


def _block(label: str, text: str) -> str:
    """`text`, which may run over several lines, under `label`, indented."""
    lines = str(text).strip().splitlines() or [""]
    shown = lines[:MAX_SHOWN_LINES] + (["…"] if len(lines) > MAX_SHOWN_LINES else [])
    return f"  {label}: {shown[0]}\n" + "".join(f"    {line}\n" for line in shown[1:])


def _clock(unix: float | None) -> str:
    return "--:--:--" if unix is None else time.strftime("%H:%M:%S", time.localtime(unix))


def _candidate_lines(candidate: dict[str, Any]) -> str:
    mark = "accepted" if candidate.get("accepted") else "refused"
    given = candidate.get("args") or candidate.get("input") or ""
    text = f"  {_clock(candidate.get('at'))} {mark}: {_short(given)}\n"
    return text + (f"    {_short(candidate['error'])}\n" if candidate.get("error") else "")


def _tool_lines(call: dict[str, Any]) -> str:
    took = call["ended_at"] - call["started_at"]
    text = (
        f"  {_clock(call.get('started_at'))} tool {call['tool']} {_short(call.get('input'))} "
        f"-> {call['outcome']} ({took * 1000:.0f} ms)\n"
    )
    shown = call.get("error") if call["outcome"] != "result" else call.get("result")
    return text + (f"    {_short(shown)}\n" if shown not in (None, "") else "")


def print_run(run_dir: Path, out: TextIO) -> None:
    """The run's record as `awf logs` prints it, what its agents wrote shown, not obeyed (`shown`)."""
    text = io.StringIO()
    _print_run(run_dir, text)
    out.write(shown_text(text.getvalue()))


def _print_run(run_dir: Path, out: TextIO) -> None:
    info = read_json(run_dir / "run.json")
    output_path = run_dir / "output.json"
    output = read_json(output_path) if output_path.exists() else None
    out.write(f"run {info['run_id']} of {info['workflow']}, started {_clock(info.get('started_at'))} in {info['cwd']}\n")
    if info.get("replay_of"):
        out.write(f"  a replay of {info['replay_of']}: its tool calls were answered from that record\n")
    for cli in info.get("clis") or ():  # the agent CLIs it used, each with its version (run.json's `clis`)
        out.write(f"  {cli.get('cli')} {cli.get('version') or '(version unknown)'}: {cli.get('path')}\n")
    if output is None:
        out.write("  still running, or interrupted before it could record its ending\n")
    else:
        seconds = output["ended_at"] - output["started_at"]
        out.write(f"  ended {output['outcome']} after {seconds:.1f}s\n")
        if output.get("reason"):
            out.write(_block("reason", output["reason"]))
        if output["outcome"] == "completed":
            out.write(f"  value: {_short(output.get('value'))}\n")
        if output.get("where"):
            out.write(f"  at: {output['where']}\n")
        if output.get("traceback"):
            out.write("  traceback:\n" + "".join(f"    {line}\n" for line in output["traceback"].rstrip().splitlines()))
    if (run_dir / "usage.json").exists():
        out.writelines(f"  {line}\n" for line in spend_lines(msgspec.convert(read_json(run_dir / "usage.json"), RunUsage)))
    attempts = _attempts(run_dir, out)
    logs = list(read_lines(run_dir / "log.jsonl"))
    tools: dict[str, list[dict[str, Any]]] = {}
    for call in read_lines(run_dir / "tools.jsonl"):
        tools.setdefault(call.get("turn_call_id", ""), []).append(call)
    shown_attempt = 1
    ended: set[str] = set()
    for turn in read_lines(run_dir / "turns.jsonl"):
        ended.add(turn["call_id"])
        n = _attempt_at(attempts, turn.get("started_at"))
        if n != shown_attempt:
            out.write(f"\n— attempt {n} —\n")
            shown_attempt = n
        outcome = turn["outcome"]
        nudged = " (nudged)" if turn.get("nudged") else ""
        what = "message turn" if turn.get("started_by") == "message" else "turn"
        ending = "ended" if turn.get("started_by") == "message" and outcome["kind"] == "answered" else outcome["kind"]
        kind = turn.get("kind", "turn")
        if kind != "turn":
            out.write(_operation_lines(turn))
            continue
        settings = _settings(turn)
        out.write(
            f"\n{_clock(turn.get('started_at'))} {turn['agent']} {what} {turn['n']} "
            f"[call {turn['call_id']}]: {ending}{nudged}{settings}\n"
        )
        if turn.get("forked_from") and turn["n"] == 1:
            out.write(f"  a fork of {turn['forked_from']}\n")
        if turn.get("started_by") == "message":
            out.write("  started by a message; takes no answer\n")
        elif outcome["kind"] == "answered":
            out.write(f"  answer: {_short(outcome.get('value'))}\n")
        else:
            out.write(_block("reason", outcome.get("reason", "")))
        if turn.get("usage"):
            out.write(f"  spent: {spend_text(msgspec.convert(turn['usage'], Usage))}\n")
        events = [
            *((candidate.get("at") or 0.0, _candidate_lines(candidate)) for candidate in read_lines(
                run_dir / "calls" / turn["call_id"] / "candidates.jsonl"
            )),
            *((call.get("started_at") or 0.0, _tool_lines(call)) for call in tools.get(turn["call_id"], [])),
        ]
        out.writelines(lines for _, lines in sorted(events, key=lambda event: event[0]))  # as they happened
    out.writelines(_cut_off_lines(run_dir, ended))
    refusals = list(read_lines(run_dir / "refusals.jsonl"))
    if refusals:
        out.write("\nrefused for who they are:\n")
        for line in refusals:
            command = " ".join(line.get("command") or []) or "(gone)"
            out.write(f"  {_clock(line.get('at'))} {line.get('socket')}: process {line.get('pid')} {_short(command)}\n")
    if logs:
        out.write("\nlog:\n")
        for line in logs:
            fields = " ".join(f"{key}={value}" for key, value in (line.get("fields") or {}).items())
            out.write(f"  {_clock(line.get('at'))} {line.get('message', '')} {fields}".rstrip() + "\n")


def _cut_off_lines(run_dir: Path, ended: set[str]) -> list[str]:
    """Turns that started but never ended: the run was killed (or is still running) during them.

    A turn's line in turns.jsonl is written when it ends; its call.json when it starts, so a
    `kill -9` mid-turn leaves only the latter, and the prompt and answers handed in so far.
    """
    started: list[tuple[float, str, dict[str, Any]]] = []
    calls = run_dir / "calls"
    for entry in sorted(calls.iterdir()) if calls.is_dir() else []:
        if entry.name in ended or not (entry / "call.json").is_file():
            continue
        try:
            call = read_json(entry / "call.json")
            at = (entry / "call.json").stat().st_mtime
        except (OSError, ValueError):
            continue
        if isinstance(call, dict) and isinstance(call.get("agent"), str):
            started.append((at, entry.name, call))
    lines = []
    for at, call_id, call in sorted(started, key=lambda found: found[0]):
        lines.append(f"\n{_clock(at)} {call['agent']} turn {call.get('n', '?')} [call {call_id}]: cut off\n")
        lines.append("  never ended: the run was killed during it, or is still running\n")
        lines.append(f"  prompt: {_short(call.get('prompt', ''))}\n")
        lines += [_candidate_lines(candidate) for candidate in read_lines(run_dir / "calls" / call_id / "candidates.jsonl")]
    return lines


def _attempts(run_dir: Path, out: TextIO) -> list[AttemptRecord]:
    """The run's attempts, each on a line or two, when there was more than one (or it went on from a stage)."""
    try:
        attempts = read_attempts(run_dir)
    except RecordRefused as error:
        out.write(f"  attempts: {error}\n")
        return []
    if len(attempts) < 2 and not any(attempt.from_stage for attempt in attempts):
        return attempts
    stages = read_stages(run_dir)
    for attempt in attempts:
        notes = [f"continues {attempt.continues}"] if attempt.continues else []
        notes += ["the workflow's file changed"] if attempt.file_changed else []
        notes += [f"--rerun {attempt.rerun}"] if attempt.rerun else []
        notes += [f"--from-stage {attempt.from_stage}"] if attempt.from_stage else []
        ending = attempt.outcome or "running, or killed (a later attempt marks it interrupted)"
        where = f" in stage {attempt.stage}" if attempt.stage else ""
        took = f" after {attempt.ended_at - attempt.started_at:.1f}s" if attempt.ended_at else ""
        why = f": {_short(attempt.reason)}" if attempt.reason else ""
        noted = f" ({', '.join(notes)})" if notes else ""
        out.write(f"  attempt {attempt.n}{noted}, started {_clock(attempt.started_at)}: {ending}{where}{took}{why}\n")
        shown = []
        for name, how in attempt.stages.items():
            record = stages.get(name)
            source = f" (attempt {record.attempt})" if how == "reused" and record is not None else ""
            shown.append(f"{name} {how}{source}")
        spent = [f"{_count(attempt.turns, 'turn')} run"]
        given = _count(attempt.reused_turns, "id'd turn")
        spent += [f"{given} given back"] if attempt.reused_turns else []
        cost = attempt.usage.cost_usd if attempt.usage is not None else None
        spent += [f"${cost:.4f}"] if cost is not None else []
        out.write(f"    stages: {', '.join(shown) or 'none'}; {', '.join(spent)}\n")
    return attempts


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}" if n == 1 else f"{n} {thing}s"


def _attempt_at(attempts: list[AttemptRecord], at: float | None) -> int:
    """The attempt running at `at`: the last one started by then."""
    found = 1
    for attempt in attempts:
        if at is not None and attempt.started_at <= at:
            found = attempt.n
    return found


def print_trace(run_dir: Path, out: TextIO) -> None:
    """Every message of the run: when it was sent, by whom to whom, when it was read, how long it waited."""
    read: dict[str, dict[str, Any]] = {}
    sent: list[dict[str, Any]] = []
    for line in read_lines(run_dir / "messages.jsonl"):
        if line.get("event") == "read":
            read.setdefault(line["message_id"], line)
        elif line.get("event") == "sent":
            sent.append(line)
    if not sent:
        out.write("no messages in this run\n")
        return
    for line in sent:
        mail = line["mail"]
        seen = read.get(mail["id"])
        when = f"read {_clock(seen['at'])} by {seen['by']}, waited {seen['at'] - mail['at']:.1f}s" if seen else "never read"
        out.write(
            f"{_clock(mail['at'])} {mail['sender']} -> {mail['to']} [{mail['kind']}, route {line['route']}] "
            f"{_short(mail['text'])}\n  {when}\n"
        )


def _settings(line: dict[str, Any]) -> str:
    named = [f"{name} {line[name]}" for name in ("model", "effort") if line.get(name)]
    return f" ({', '.join(named)})" if named else ""


def _operation_lines(line: dict[str, Any]) -> str:
    """A compaction, a set, a fork's copy or a stop, as one entry among the agent's turns."""
    outcome, kind = line["outcome"], line["kind"]
    head = f"\n{_clock(line.get('started_at'))} {line['agent']} {kind} [{line['call_id']}]: {outcome['kind']}"
    if kind == "set":
        return f"{head}{_settings(line)}\n"
    if kind == "fork" and outcome["kind"] == "answered":
        return f"{head}: forked into {outcome.get('value')}\n"
    if kind == "compaction" and outcome["kind"] == "answered":
        return f"{head}\n  summary: {_short(outcome.get('value') or '(kept by the CLI)')}\n"
    return f"{head}\n" + _block("reason", outcome.get("reason", ""))
