"""Agents played from a run's record: no process, no model.

A `ReplayBook` holds each agent's recorded turns and operations and hands them out as the
workflow asks for them; a `ReplayHarness` plays one agent: each attempt of a turn does what the
record says that turn did, in the order it did it -- its tool calls with their recorded inputs,
the messages and replies it sent, every answer it handed in, all through `wfa` over the agent's
real socket -- and ends as it ended.

What the workflow now does differently is found as it happens, as Temporal's replayer finds it:
an agent or runtime the record doesn't have, a turn with another prompt or schema, turns in
another order, a tool's result that differs, an answer no longer accepted. The first difference
cancels the workflow and is kept as the book's `diverged`, a `ReplayDiverged`.

Turns in another order are found by what happened before what: a turn the record started after
another had ended must start after it now. Turns that ran at once may start in either order.

`agentswf.testing.replay` plays every agent so; a fork (`agentswf.run(continue_from=ContinueFrom(...))`)
plays what came before its turn so, and runs the rest for real.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import msgspec

from ..engine.record.layout import read_json
from ..harnesses.base import Attempt, AttemptEnding, AttemptResult, Harness, Operation, OperationResult, is_session_id
from ..harnesses.runtime import Runtime
from ..harnesses.usage import Usage
from .recorded import PLAYED_KINDS, AnswerAction, Recorded, RecordedTurn, SendAction, ToolAction, has_redacted
from .wfa import ScriptedTurn, ToolFailed, ToolRefused, ToolResult

Tools = Literal["handlers", "record"]
CANCELLED_WAIT_SECONDS = 30.0  # for the workflow to cancel again a turn the record has cancelled
MAX_DIFF_LINES = 24  # of a prompt's diff, in a divergence's message
MAX_SHOWN_CHARS = 400  # of a recorded or present value, in a divergence's message
MAX_SETTING_CHARS = 200  # of a model's or effort's name on record, taken for a played turn
NOTHING_SPENT = Usage(input_tokens=0, output_tokens=0, cost_usd=0.0)  # a played turn of a fork: no model was asked
_LAUNCHER = re.compile(r"/\S*/wfa\b|<wfa>")  # a turn's launcher path (differs from run to run), or an export's


class ReplayDiverged(AssertionError):
    """The workflow did something the record doesn't have: the first difference found.

    `agent` and `turn` say where (None for the run as a whole), `field` what differs (`agent`,
    `runtime`, `prompt`, `schema`, `order`, `tool NAME`, `answer`, `outcome`, `value`, `turn`),
    `recorded` and `now` what the record has and what happened now; `diff` is a short unified
    diff for a prompt.
    """

    def __init__(self, agent: str | None, turn: str | None, field: str, recorded: Any, now: Any, diff: str = "") -> None:
        self.agent, self.turn, self.field, self.recorded, self.now, self.diff = agent, turn, field, recorded, now, diff
        where = " ".join(part for part in (f"agent {agent}" if agent else "", turn or "") if part) or "the run"
        text = f"{where}: the {field} differs from the record\n  recorded: {_brief(recorded)}\n  now:      {_brief(now)}"
        super().__init__(text + (f"\n{diff}" if diff else ""))


def _brief(value: Any) -> str:
    text = value if isinstance(value, str) else msgspec.json.encode(value).decode()
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 1] + "…"


def _plain_prompt(prompt: str | None, call_id: str, cwd: str = "") -> str:
    """A prompt without what differs from run to run or machine to machine: its launcher's path,
    its call id, the run's cwd and the home directory (as an export writes them)."""
    text = _LAUNCHER.sub("wfa", (prompt or "").replace(call_id, "CALL_ID"))
    if len(cwd) > 1:
        text = text.replace(cwd, ".")
    home = os.path.expanduser("~")
    return text.replace(home, "~") if len(home) > 1 else text


def prompt_diff(recorded: str, now: str) -> str:
    lines = list(difflib.unified_diff(recorded.splitlines(), now.splitlines(), "recorded", "now", lineterm="", n=1))
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"… {len(lines) - MAX_DIFF_LINES} more lines"]
    return "\n".join(lines)


@dataclass
class _Playing:
    """A recorded turn being played: how far its actions have got."""

    turn: RecordedTurn
    next: int = 0
    attempts: int = 0


@dataclass
class ReplayBook:
    """Each agent's recorded turns and operations, handed out as the workflow asks for them,
    and the first divergence found. `spend`: a played turn reports what it spent on record
    (a fork's replayed turns, which a new run doesn't pay for, report nothing)."""

    recorded: Recorded
    tools: Tools = "handlers"
    strict: bool = True
    spend: bool = True
    replays_tools: bool = True  # a fork's played turns make no tool call: their results are the record's
    run_dir: Path | None = None  # the replay's own record, once the workflow runs
    cwd: str = ""  # the replay's cwd, once the workflow runs
    cancel: Callable[[], None] | None = None  # cancels the workflow: the replay diverged
    diverged: ReplayDiverged | None = None
    notes: list[str] = field(default_factory=list)  # what was played other than as recorded, and why
    errors: list[BaseException] = field(default_factory=list)
    playing: dict[str, _Playing] = field(default_factory=dict)  # the replay's call id -> its recorded turn
    started: set[str] = field(default_factory=set)  # recorded call ids played
    withheld: int = 0  # calls needing approval the replay rejected (`WITHHELD`), so far

    def diverge(self, divergence: ReplayDiverged) -> ReplayDiverged:
        if self.diverged is None:
            self.diverged = divergence
            if self.cancel is not None:
                self.cancel()
        return self.diverged

    def harness_for(self, key: str, runtime: Runtime) -> Harness:
        recorded = self.recorded
        if key not in recorded.agents:
            on_record = ", ".join(sorted(recorded.agents)) or "none"
            raise self.diverge(ReplayDiverged(key, None, "agent", f"no agent {key} (agents: {on_record})", f"opened on {runtime.harness}"))
        harness = recorded.harnesses.get(key)
        if harness is not None and harness != runtime.harness:
            raise self.diverge(ReplayDiverged(key, None, "runtime", harness, runtime.harness))
        return ReplayHarness(key, self, runtime.model, runtime.effort)

    def _queue(self, agent: str, kinds: tuple[str, ...], by_workflow: bool) -> list[RecordedTurn]:
        return [
            turn for turn in self.recorded.turns
            if turn.agent == agent and turn.kind in kinds and turn.by_workflow == by_workflow and turn.call_id not in self.started
        ]  # fmt: skip

    def turn_of(self, attempt: Attempt) -> _Playing:
        """The recorded turn this attempt plays: its own, once one of its attempts has begun it."""
        playing = self.playing.get(attempt.call_id)
        if playing is not None:
            return playing
        by_workflow = attempt.started_by == "workflow"
        left = self._queue(attempt.agent, ("turn",), by_workflow)
        found = next((turn for turn in left if turn.n == attempt.turn), None) if by_workflow else (left[0] if left else None)
        what = f"turn {attempt.turn}" if by_workflow else f"turn {attempt.turn} (started by a message)"
        if found is None:
            raise self.diverge(ReplayDiverged(attempt.agent, what, "turn", "no such turn", _plain_prompt(attempt.prompt, attempt.call_id)))
        self._check_order(found)
        self._check_call(found, attempt)
        self.started.add(found.call_id)
        playing = self.playing[attempt.call_id] = _Playing(found)
        return playing

    def operation_of(self, agent: str, kind: str) -> RecordedTurn:
        left = self._queue(agent, (kind,), True)
        if not left:
            raise self.diverge(ReplayDiverged(agent, None, "turn", f"no further {kind}", f"a {kind}"))
        self._check_order(left[0])
        self.started.add(left[0].call_id)
        return left[0]

    def _check_order(self, turn: RecordedTurn) -> None:
        """Each turn the workflow gave that ended on record before `turn` started has started now."""
        if not turn.by_workflow:
            return
        began = turn.line.get("started_at", 0.0)
        for before in self.recorded.turns:
            if (
                before.by_workflow and before.kind in PLAYED_KINDS and before.call_id not in self.started
                and before is not turn and before.line.get("ended_at", 0.0) <= began
            ):  # fmt: skip
                raise self.diverge(ReplayDiverged(
                    turn.agent, turn.named(), "order", f"after agent {before.agent}'s {before.named()}",
                    f"before agent {before.agent}'s {before.named()}",
                ))  # fmt: skip

    def _check_call(self, turn: RecordedTurn, attempt: Attempt) -> None:
        """The turn's prompt and schema, as the replay's record has them, against the record's."""
        assert self.run_dir is not None, "the workflow runs under the replay's wrapper"
        try:
            call = read_json(self.run_dir / "calls" / attempt.call_id / "call.json")
        except OSError:
            call = {"prompt": attempt.prompt, "schema": None}
        if turn.by_workflow and call.get("schema") != turn.schema:
            raise self.diverge(ReplayDiverged(turn.agent, turn.named(), "schema", turn.schema, call.get("schema")))
        recorded = _plain_prompt(turn.prompt, turn.call_id, self.recorded.cwd)
        now = _plain_prompt(call.get("prompt"), attempt.call_id, self.cwd)
        if self.strict and turn.prompt is not None and recorded != now:
            raise self.diverge(ReplayDiverged(
                turn.agent, turn.named(), "prompt", recorded.splitlines()[0] if recorded else "",
                now.splitlines()[0] if now else "", prompt_diff(recorded, now),
            ))  # fmt: skip


class ReplayHarness(Harness):
    """An agent played from the record: no process, no model. Each attempt does what its recorded
    turn did, in order: up to a question it asked (the reply starts its next attempt) or, when the
    record says it was nudged, up to its accepted answer; then it ends as the turn ended."""

    name = "replay"
    spawns = False  # it plays in the run's own process, which its socket admits
    supports_waiting = True

    def __init__(self, key: str, book: ReplayBook, model: str | None = None, effort: str | None = None) -> None:
        self.key, self.book = key, book
        self.model, self.effort = model, effort

    def settings(self) -> tuple[str | None, str | None]:
        return self.model, self.effort

    def with_settings(self, model: str | None, effort: str | None) -> ReplayHarness:
        return ReplayHarness(self.key, self.book, model or self.model, effort or self.effort)

    def _usage(self, turn: RecordedTurn) -> Usage | None:
        usage = turn.line.get("usage")
        if not self.book.spend:
            return NOTHING_SPENT
        if not isinstance(usage, dict):
            return None
        try:
            return msgspec.convert(usage, Usage)
        except msgspec.ValidationError:
            return None

    async def compact(self, operation: Operation) -> OperationResult:
        turn = self.book.operation_of(self.key, "compaction")
        ending = _ending(turn, last=True)
        summary = turn.outcome.get("value") if turn.outcome.get("kind") == "answered" else ""
        if turn.outcome.get("kind") == "cancelled":
            try:
                await self._cancelled_again(turn)
            except ReplayDiverged:
                return OperationResult(AttemptEnding("failed", reason="the replay diverged"))
        return OperationResult(ending, session=_session(turn) or operation.session, summary=str(summary or ""),
                               usage=self._usage(turn), settings=recorded_settings(turn))  # fmt: skip

    async def fork(self, operation: Operation) -> OperationResult:
        turn = self.book.operation_of(self.key, "fork")
        return OperationResult(
            _ending(turn, last=True), session=_session(turn) or f"replay:{self.key}:{turn.call_id}", settings=recorded_settings(turn)
        )

    async def run(self, attempt: Attempt) -> AttemptResult:
        book = self.book
        if book.diverged is not None:
            return AttemptResult(AttemptEnding("failed", reason="the replay diverged"))
        try:
            playing = book.turn_of(attempt)
            playing.attempts += 1
            last = await self._play(playing, ScriptedTurn(attempt), attempt)
            if last and playing.turn.outcome.get("kind") == "cancelled":
                await self._cancelled_again(playing.turn)
        except ReplayDiverged:
            return AttemptResult(AttemptEnding("failed", reason="the replay diverged"))
        except Exception as error:  # the test must see it, not a quietly failed turn
            book.errors.append(error)
            raise
        turn = playing.turn
        return AttemptResult(
            _ending(turn, last), session=_session(turn), usage=self._usage(turn) if last else None, settings=recorded_settings(turn)
        )

    async def _cancelled_again(self, turn: RecordedTurn) -> None:
        """Wait for the workflow to cancel the turn again, as it did; a replay that waits
        `CANCELLED_WAIT_SECONDS` for it has diverged (no agent's time is spent in a replay)."""
        await anyio.sleep(CANCELLED_WAIT_SECONDS)
        raise self.book.diverge(ReplayDiverged(
            turn.agent, turn.named(), "outcome", "cancelled", f"not cancelled within {CANCELLED_WAIT_SECONDS:g}s"
        ))  # fmt: skip

    async def _play(self, playing: _Playing, scripted: ScriptedTurn, attempt: Attempt) -> bool:
        """Play the turn's next actions in this attempt; whether none are left after it."""
        turn, actions = playing.turn, playing.turn.actions
        hold_answer = turn.line.get("nudged") is True and not attempt.nudge and playing.attempts == 1
        while playing.next < len(actions):
            action = actions[playing.next]
            if hold_answer and isinstance(action, AnswerAction) and action.accepted:
                return False  # the record says it ended silent first: the nudge hands it in
            playing.next += 1
            if isinstance(action, ToolAction):
                await self._tool(turn, action, scripted)
            elif isinstance(action, SendAction):
                await self._send(turn, action, scripted)
                if action.kind == "question":
                    return playing.next >= len(actions)  # the reply starts its next attempt
            else:
                await self._answer(turn, action, scripted)
        return True

    async def _tool(self, turn: RecordedTurn, action: ToolAction, scripted: ScriptedTurn) -> None:
        book = self.book
        if not book.replays_tools:
            return
        if book.tools == "handlers" and has_redacted(action.input):
            book.notes.append(
                f"agent {turn.agent} {turn.named()}: tool {action.tool}'s input was redacted in the record, so its "
                "handler was not run again; its recorded result stands"
            )
            return
        given, withheld = action.input, book.withheld
        if action.outcome == "refused" and isinstance(given, list) and all(isinstance(word, str) for word in given):
            answer = await scripted.tool(action.tool, args=given)
        elif action.outcome == "refused" and isinstance(given, str):
            response = await scripted.request("tool", name=action.tool, args=[], input=given)
            answer = ToolResult(output=response.value) if response.ok else ToolRefused(code=response.code or "", error=response.error)
        else:
            answer = await scripted.tool(action.tool, given)
        if book.withheld > withheld:
            book.notes.append(
                f"agent {turn.agent} {turn.named()}: tool {action.tool} needs a person's approval, so its handler was not "
                "run again; its recorded result stands (--tools record answers every call from the record)"
            )
            return
        now, recorded = _tool_said(answer), _tool_said_recorded(action)
        if has_redacted(action.result) and isinstance(answer, ToolResult):
            return  # its result was redacted on record: what it returns now can't be compared
        if now != recorded:
            raise book.diverge(ReplayDiverged(turn.agent, turn.named(), f"tool {action.tool}", recorded, now))

    async def _send(self, turn: RecordedTurn, action: SendAction, scripted: ScriptedTurn) -> None:
        if action.kind == "reply":
            response = await scripted.reply(action.to, action.text)
        else:
            response = await scripted.send(action.to, action.text, await_reply=action.kind == "question")
        if not response.ok:
            raise self.book.diverge(ReplayDiverged(
                turn.agent, turn.named(), f"{action.kind} to {action.to}", "sent", f"refused ({response.code}): {response.error}"
            ))  # fmt: skip

    async def _answer(self, turn: RecordedTurn, action: AnswerAction, scripted: ScriptedTurn) -> None:
        if action.input is not None or not action.args:
            response = await scripted.request("result", call_id=scripted.call_id, args=[], input=action.input or "")
        else:
            response = await scripted.request("result", call_id=scripted.call_id, args=list(action.args), input=None)
        if response.ok != action.accepted:
            recorded = "accepted" if action.accepted else f"refused: {action.error}"
            now = "accepted" if response.ok else f"refused ({response.code}): {response.error.strip()}"
            raise self.book.diverge(ReplayDiverged(turn.agent, turn.named(), "answer", recorded, now))


def _tool_said(answer: ToolResult | ToolFailed | ToolRefused) -> dict[str, Any]:
    if isinstance(answer, ToolResult):
        return {"outcome": "result", "result": answer.output}
    if isinstance(answer, ToolFailed):
        return {"outcome": answer.outcome}
    return {"outcome": "refused", "code": answer.code}


def _tool_said_recorded(action: ToolAction) -> dict[str, Any]:
    if action.outcome == "result":
        return {"outcome": "result", "result": action.result}
    if action.outcome == "refused":
        return {"outcome": "refused", "code": action.code}
    return {"outcome": action.outcome}


def _session(turn: RecordedTurn) -> str | None:
    """The native session the turn reported, when it is a session id: a fork's next real attempt
    resumes it (`--resume <it>`), and a record's `--dangerously-skip-permissions` is no session."""
    session = turn.line.get("session")
    return session if is_session_id(session) else None


def recorded_settings(turn: RecordedTurn) -> tuple[str | None, str | None]:
    """The model and effort the turn ran with, on record: a played turn is recorded with them again
    (and the workflow reads them as `agent.model`). The record is an agent's to write: a setting that
    is no name (too long, unprintable, or one a CLI would read as an option) is taken as none."""
    return _setting(turn.line.get("model")), _setting(turn.line.get("effort"))


def _setting(value: object) -> str | None:
    if isinstance(value, str) and 0 < len(value) <= MAX_SETTING_CHARS and value.isprintable() and not value.startswith("-"):
        return value
    return None


def _ending(turn: RecordedTurn, last: bool) -> AttemptEnding:
    """How an attempt of `turn` ends: an ending of the CLI's the turn ended with, on its last attempt."""
    outcome = turn.outcome
    kind, reason = outcome.get("kind"), str(outcome.get("reason") or "")
    if last and kind in ("failed", "blocked", "timed-out"):
        return AttemptEnding(kind, reason=reason, retryable=outcome.get("retryable") is True)  # type: ignore[arg-type]
    return AttemptEnding("exited")
