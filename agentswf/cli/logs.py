"""`awf logs`: a run's record, readable: how it ended (each attempt, when it was continued),
each turn, each answer handed in, and each process refused on the run's sockets for who it is.

Every line is awf's, made of the record's fields each `shown` on one line (names, outcomes, tool
names, command lines: an agent may have written any of them, or the record itself); a reason or
a traceback, which runs over lines, is `headed` or `quoted`, indented under awf's line.
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any, TextIO

import msgspec

from ..engine.accounting import RunUsage, spend_lines, spend_text
from ..engine.record.attempts import AttemptRecord, RecordRefused, read_attempts, read_stages
from ..engine.record.layout import read_json, read_lines
from ..engine.record.lines import ATTEMPTS_FILE
from ..engine.tools.rules import MAX_RAISED_FRAMES
from ..harnesses.usage import Usage
from .runs import is_live
from .shown import headed, quoted, shown

MAX_SHOWN_CHARS = 400  # of a value, a name or a line of a body: an agent's answer can be a MiB on one line
MAX_SHOWN_LINES = 20
ATTEMPT_LINES_SHOWN = 3  # of an attempt's standard output and of its error, each, unless --output asks for all
ATTEMPT_INDENT = "      "  # an attempt's output, under awf's line naming its stream


def _cut(text: str) -> str:
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 1] + "…"


def _short(value: Any) -> str:
    """A value (text, or any JSON) on one line, `shown`, cut at MAX_SHOWN_CHARS."""
    return _cut(shown(value if isinstance(value, str) else msgspec.json.encode(value).decode()))


def _name(value: Any) -> str:
    """A name, id or word of the record (an agent's key, a tool's name, an outcome, a model its CLI
    named) on one line, cut at MAX_SHOWN_CHARS: the record's, so maybe an agent's, of any length."""
    return _short(value if isinstance(value, str) else str(value))


def _block(label: str, text: Any) -> str:
    """`text`, which may run over several lines (at most MAX_SHOWN_LINES, each cut at MAX_SHOWN_CHARS), after `label`, indented."""
    lines = [_cut(line) for line in str(text).strip().split("\n")]
    kept = "\n".join(lines[:MAX_SHOWN_LINES] + (["…"] if len(lines) > MAX_SHOWN_LINES else []))
    return headed(f"  {label}: ", kept)


def _clock(unix: float | None) -> str:
    return "--:--:--" if unix is None else time.strftime("%H:%M:%S", time.localtime(unix))


def _candidate_lines(candidate: dict[str, Any]) -> str:
    mark = "accepted" if candidate.get("accepted") else "refused"
    given = candidate.get("args") or candidate.get("input") or ""
    text = f"  {_clock(candidate.get('at'))} {mark}: {_short(given)}\n"
    return text + (f"    {_short(candidate['error'])}\n" if candidate.get("error") else "")


def _at(line: dict[str, Any]) -> float | None:
    """A line's `at`, where it is a time (the record is the agents' to forge)."""
    at = line.get("at")
    return at if isinstance(at, (int, float)) and not isinstance(at, bool) else None


def _attempt_lines(attempt: dict[str, Any], said: int | None) -> str:
    """An attempt that output something: how it ended, then each permission its ACP agent asked and
    the answer, and each request refused (the whole transcript is in the call's attempts.jsonl); then
    the last `said` lines (None: all the record keeps) of its standard output, where it is text (a
    shell agent's), and of its standard error."""
    ending = attempt.get("ending", "?")
    verb = "was stopped as its turn ended" if ending == "stopped" else f"ended: {_name(ending)}"
    text = f"  {_clock(_at(attempt))} attempt {verb}\n"
    output = attempt.get("output")
    printed: list[str] = []  # its lines that aren't a transcript's
    for line in output.split("\n") if isinstance(output, str) else ():
        try:
            entry = msgspec.json.decode(line)
        except msgspec.DecodeError:
            printed.append(line)  # not a transcript's: a shell agent's output
            continue
        if isinstance(entry, dict) and "permission" in entry:
            asked = entry.get("command") or entry.get("title") or ""
            text += (f"    permission {_name(entry.get('kind', ''))} {_short(asked)} -> {_name(entry.get('answer', ''))}"
                     f" ({_name(entry.get('why', ''))})\n")  # fmt: skip
        elif isinstance(entry, dict) and "refused" in entry:
            text += f"    refused its request {_name(entry['refused'])}\n"
        elif not isinstance(entry, dict):
            printed.append(line)
    stderr = attempt.get("stderr")
    text += _said_lines("standard output", printed, said)
    return text + _said_lines("standard error", stderr.split("\n") if isinstance(stderr, str) else [], said)


def _said_lines(stream: str, lines: list[str], count: int | None) -> str:
    """An attempt's last `count` lines of `stream` that aren't blank (None: all), quoted under awf's line
    saying how many there are; a line cut at MAX_SHOWN_CHARS but where all are asked for."""
    lines = [line for line in lines if line.strip()]
    kept = lines if count is None else lines[-count:] if count > 0 else []
    if not kept:
        return ""
    if count is not None:
        kept = [line if len(line) <= MAX_SHOWN_CHARS else line[: MAX_SHOWN_CHARS - 1] + "…" for line in kept]
    which = f"its last {len(kept)} of {len(lines)} lines (awf logs --output: all)" if len(kept) < len(lines) else "its lines"
    return f"    {stream}, {which}:\n" + quoted("\n".join(kept), ATTEMPT_INDENT)


def _tool_lines(call: dict[str, Any]) -> str:
    took = call["ended_at"] - call["started_at"]
    text = (
        f"  {_clock(call.get('started_at'))} tool {_name(call['tool'])} {_short(call.get('input'))} "
        f"-> {_name(call['outcome'])} ({took * 1000:.0f} ms)\n"
    )
    said = call.get("error") if call["outcome"] != "result" else call.get("result")
    text += f"    {_short(said)}\n" if said not in (None, "") else ""
    return text + _raised_lines(call.get("raised")) + _approval_lines(call.get("approval"))


def _raised_lines(raised: Any) -> str:
    """Where a raising handler raised, for the workflow's author: its exception's type, then its
    innermost frames, innermost last (tools.raised_at)."""
    if not isinstance(raised, list) or not raised:
        return ""
    kind, *frames = raised[: MAX_RAISED_FRAMES + 1]
    return f"    raised {_name(kind)}\n" + "".join(f"      at {_short(frame)}\n" for frame in frames)


def _approval_lines(decision: Any) -> str:
    """Who decided a call that needed approval, and why (approvals.jsonl has when)."""
    if not isinstance(decision, dict):
        return ""
    verb = "approved" if decision.get("approved") else "rejected"
    reason = f": {_short(decision['reason'])}" if decision.get("reason") else ""
    return f"    {verb} by {_name(decision.get('by') or 'someone')}{reason}\n"


def _message_lines(mail: dict[str, Any]) -> str:
    """A message sent: who to whom, its kind, then its text as data, indented under awf's line."""
    kind = _name(mail.get("kind", "message"))
    purpose = f" ({_short(mail['purpose'])})" if mail.get("purpose") else ""
    header = f"  {_clock(mail.get('at'))} {kind} {_name(mail.get('sender', '?'))} -> {_name(mail.get('to', '?'))}{purpose}:"
    return header + "\n" + quoted(str(mail.get("text", "")).rstrip())


def _sent(run_dir: Path) -> list[dict[str, Any]]:
    """Every message sent in the run, as its mail, in the order sent."""
    return [
        event["mail"] for event in read_lines(run_dir / "messages.jsonl")
        if event.get("event", "sent") == "sent" and isinstance(event.get("mail"), dict)
    ]  # fmt: skip


def print_run(run_dir: Path, out: TextIO, said: int | None = ATTEMPT_LINES_SHOWN) -> None:
    """The run's record as `awf logs` prints it, what its agents wrote shown, not obeyed (`shown`):
    whole, or nothing when a part of it can't be read. Each attempt's last `said` lines of output
    (None: all the record keeps)."""
    text = io.StringIO()
    _print_run(run_dir, text, said)
    out.write(text.getvalue())


def _print_run(run_dir: Path, out: TextIO, said: int | None) -> None:
    info = read_json(run_dir / "run.json")
    output_path = run_dir / "output.json"
    output = read_json(output_path) if output_path.exists() else None
    started = _clock(info.get("started_at"))
    out.write(f"run {_name(info['run_id'])} of {_name(info['workflow'])}, started {started} in {_name(info['cwd'])}\n")
    if info.get("replay_of"):
        out.write(f"  a replay of {_name(info['replay_of'])}: its tool calls were answered from that record\n")
    clis = info.get("clis")
    for cli in clis if isinstance(clis, list) else ():  # the agent CLIs it used, each with its version (run.json's)
        if isinstance(cli, dict):
            version = cli.get("version") or "(version unknown)"
            out.write(f"  {_name(cli.get('cli'))} {_name(version)}: {_name(cli.get('path'))}\n")
    if output is None and is_live(run_dir):
        out.write("  live: what it has recorded so far (awf status, awf tail follow it)\n")
    elif output is None:
        out.write("  interrupted before it could record its ending (awf ls lists it; awf continue goes on with it)\n")
    else:
        seconds = output["ended_at"] - output["started_at"]
        out.write(f"  ended {_name(output['outcome'])} after {seconds:.1f}s\n")
        if output.get("reason"):
            out.write(_block("reason", output["reason"]))
        if output["outcome"] == "completed":
            out.write(f"  value: {_short(output.get('value'))}\n")
        if output.get("where"):
            out.write(f"  at: {_name(output['where'])}\n")
        if output.get("traceback"):
            out.write("  traceback:\n" + quoted("\n".join(_cut(line) for line in str(output["traceback"]).rstrip().split("\n"))))
    if (run_dir / "usage.json").exists():
        usage = msgspec.convert(read_json(run_dir / "usage.json"), RunUsage)
        out.writelines(f"  {_short(line)}\n" for line in spend_lines(usage))  # its group and model names are the record's
    attempts = _attempts(run_dir, out)
    logs = list(read_lines(run_dir / "log.jsonl"))
    tools: dict[str, list[dict[str, Any]]] = {}
    for call in read_lines(run_dir / "tools.jsonl"):
        tools.setdefault(call.get("turn_call_id", ""), []).append(call)
    shown_attempt = 1
    ended: set[str] = set()
    messages = _sent(run_dir)
    placed: set[int] = set()  # messages shown under the turn of the agent that sent them
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
            f"\n{_clock(turn.get('started_at'))} {_name(turn['agent'])} {what} {_name(turn['n'])} "
            f"[call {_name(turn['call_id'])}]: {_name(ending)}{nudged}{settings}\n"
        )
        if turn.get("session"):  # the CLI's own: `claude --resume`, `codex exec resume` take it
            out.write(f"  session: {_name(turn['session'])}\n")
        if turn.get("forked_from") and turn["n"] == 1:
            out.write(f"  a fork of {_name(turn['forked_from'])}\n")
        if turn.get("started_by") == "message":
            out.write("  started by a message; takes no answer\n")
        elif outcome["kind"] == "answered":
            out.write(f"  answer: {_short(outcome.get('value'))}\n")
        else:
            out.write(_block("reason", outcome.get("reason", "")))
        if turn.get("usage"):
            out.write(f"  spent: {_short(spend_text(msgspec.convert(turn['usage'], Usage)))}\n")
        events = [
            *((candidate.get("at") or 0.0, _candidate_lines(candidate)) for candidate in read_lines(
                run_dir / "calls" / turn["call_id"] / "candidates.jsonl"
            )),
            *((call.get("started_at") or 0.0, _tool_lines(call)) for call in tools.get(turn["call_id"], [])),
            *((_at(attempt) or 0.0, _attempt_lines(attempt, said)) for attempt in read_lines(
                run_dir / "calls" / turn["call_id"] / ATTEMPTS_FILE
            )),
            *((mail.get("at") or 0.0, _message_lines(mail)) for mail in _sent_in(messages, turn, placed)),
        ]
        out.writelines(lines for _, lines in sorted(events, key=lambda event: event[0]))  # as they happened
    out.writelines(_cut_off_lines(run_dir, ended))
    others = [mail for n, mail in enumerate(messages) if n not in placed]
    if others:
        out.write("\nmessages outside the agents' turns (people's, the workflow's):\n")
        out.writelines(_message_lines(mail) for mail in others)
    refusals = list(read_lines(run_dir / "refusals.jsonl"))
    if refusals:
        out.write("\nrefused for who they are:\n")
        for line in refusals:
            command = " ".join(line.get("command") or []) or "(gone)"
            who = _name(f"{line.get('socket')}: process {line.get('pid')}")
            out.write(f"  {_clock(line.get('at'))} {who} {_short(command)}\n")
    if logs:
        out.write("\nlog:\n")
        for line in logs:
            fields = " ".join(f"{_name(key)}={_short(value)}" for key, value in (line.get("fields") or {}).items())
            out.write(f"  {_clock(line.get('at'))} {_name(line.get('message', ''))} {fields}".rstrip() + "\n")


def _sent_in(messages: list[dict[str, Any]], turn: dict[str, Any], placed: set[int]) -> list[dict[str, Any]]:
    """The messages `turn`'s agent sent, or was sent, while it ran (each shown once); marked `placed`."""
    start, end = turn.get("started_at") or 0.0, turn.get("ended_at") or 0.0
    found = []
    for n, mail in enumerate(messages):
        ours = turn["agent"] in (mail.get("sender"), mail.get("to"))
        if n not in placed and ours and start <= (mail.get("at") or 0.0) <= end:
            placed.add(n)
            found.append(mail)
    return found


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
        lines.append(f"\n{_clock(at)} {_name(call['agent'])} turn {_name(call.get('n', '?'))} [call {_name(call_id)}]: cut off\n")
        lines.append("  never ended: the run was killed during it, or is still running\n")
        lines.append(f"  prompt: {_short(call.get('prompt', ''))}\n")
        lines += [_candidate_lines(candidate) for candidate in read_lines(run_dir / "calls" / call_id / "candidates.jsonl")]
    return lines


def _attempts(run_dir: Path, out: TextIO) -> list[AttemptRecord]:
    """The run's attempts, each on a line or two, when there was more than one (or it went on from a stage)."""
    try:
        attempts = read_attempts(run_dir)
    except RecordRefused as error:
        out.write(f"  attempts: {_name(error)}\n")
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
        out.write(f"  attempt {attempt.n}{shown(noted)}, started {_clock(attempt.started_at)}: {shown(ending + where)}{took}{why}\n")
        listed = []
        for name, how in attempt.stages.items():
            record = stages.get(name)
            source = f" (attempt {record.attempt})" if how == "reused" and record is not None else ""
            listed.append(f"{name} {how}{source}")
        spent = [f"{_count(attempt.turns, 'turn')} run"]
        given = _count(attempt.reused_turns, "id'd turn")
        spent += [f"{given} given back"] if attempt.reused_turns else []
        cost = attempt.usage.cost_usd if attempt.usage is not None else None
        spent += [f"${cost:.4f}"] if cost is not None else []
        out.write(f"    stages: {shown(', '.join(listed) or 'none')}; {', '.join(spent)}\n")
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
        when = f"read {_clock(seen['at'])} by {_name(seen['by'])}, waited {seen['at'] - mail['at']:.1f}s" if seen else "never read"
        route = _name(f"{mail['sender']} -> {mail['to']} [{mail['kind']}, route {line['route']}]")
        out.write(f"{_clock(mail['at'])} {route} {_short(mail['text'])}\n  {when}\n")


def _settings(line: dict[str, Any]) -> str:
    named = [f"{name} {_name(line[name])}" for name in ("model", "effort") if line.get(name)]
    return f" ({', '.join(named)})" if named else ""


def _operation_lines(line: dict[str, Any]) -> str:
    """A compaction, a set, a fork's copy or a stop, as one entry among the agent's turns."""
    outcome, kind = line["outcome"], line["kind"]
    head = _name(f"{line['agent']} {kind} [{line['call_id']}]: {outcome['kind']}")
    head = f"\n{_clock(line.get('started_at'))} {head}"
    if kind == "set":
        return f"{head}{_settings(line)}\n"
    if kind == "fork" and outcome["kind"] == "answered":
        return f"{head}: forked into {_name(outcome.get('value'))}\n"
    if kind == "compaction" and outcome["kind"] == "answered":
        return f"{head}\n  summary: {_short(outcome.get('value') or '(kept by the CLI)')}\n"
    return f"{head}\n" + _block("reason", outcome.get("reason", ""))
