"""`replay`: a recorded run played again through the real engine, with no model and no CLI.

The workflow's code runs again, for real: its turns go through the turn machine, its tool calls
through the broker, its messages through the switchboard, each agent's `wfa` over its real
socket. Only the agents are played, each from the record (agentswf/replay/played.py: a harness
that starts no process, like a scripted agent's). The people of the run answer as they did on
record, and a call that waited for approval is decided as recorded (or, running the handlers,
rejected: see `WITHHELD`). The first difference stops the run and is raised as `ReplayDiverged`;
what the record has and the workflow never did, and a value or ending other than the recorded
one, are found at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from ..errors import TestScriptError
from ..replay.played import ReplayBook, ReplayDiverged, Tools
from ..replay.recorded import PLAYED_KINDS, Recorded, RecordedTurn, RecordUnreadable, read_recorded
from ..workflow.definition import WorkflowDefinition
from ..workflow.durations import Duration
from ..workflow.forking import played_definition
from ..workflow.running import run as run_definition
from .approvals import Decision, approve, reject
from .participants import ParticipantScript, respond
from .runs import TestRun, _with_participants, scratch_run_root

WITHHELD = "a replay runs no handler of a call that needs a person's approval: a record's approval is no person's"


def _recorded_approvals(book: ReplayBook) -> Callable[[Any], Decision | None]:
    """Each call waiting for approval decided as the record decided the same agent's same call; but
    under `tools="handlers"` rejected (`WITHHELD`): an approval in a record may be an agent's
    forgery, and a replay must not run what only a person may let run (its recorded result stands)."""
    left = list(book.recorded.approvals)

    def decide(request: Any) -> Decision | None:
        for n, line in enumerate(left):
            if (line["agent"], line["tool"], line["input"]) == (request.agent, request.tool, request.input):
                decision = left.pop(n)["decision"]
                if book.tools == "handlers":
                    book.withheld += 1
                    return reject(by="replay", reason=WITHHELD)
                by, reason = str(decision.get("by") or "replay"), str(decision.get("reason") or "")
                return approve(by=by, reason=reason) if decision.get("approved") is True else reject(by=by, reason=reason or "rejected")
        return None

    return decide


def _recorded_participants(recorded: Recorded) -> dict[str, ParticipantScript]:
    """Each person of the run answering each message with what it sent on record, in order."""

    def answers(texts: list[str]) -> ParticipantScript:
        left = list(texts)
        return respond(lambda mail: left.pop(0) if left else None)

    return {key: answers(texts) for key, texts in recorded.participants.items()}


async def replay(
    definition: WorkflowDefinition,
    record: str | Path,
    *,
    args: Any = None,
    tools: Tools = "handlers",
    strict: bool = True,
    run_root: str | Path | None = None,
    cwd: str | Path | None = None,
    timeout: Duration | None = None,
) -> TestRun:
    """Run `definition` again with every agent played back from `record` (a run's directory, live or
    exported), and return the `TestRun` as `run_workflow` does; raise `ReplayDiverged` at the first
    difference from the record.

    Each turn ends as recorded; its tool calls are made again with their recorded inputs, to the
    workflow's handlers (`tools="handlers"`: a changed handler shows) or answered from the record
    (`tools="record"`); its messages and answers are sent again. No CLI process starts, no model is
    called. `args` default to the recorded run's. `strict=False` lets a prompt's text change (its
    schema, and everything else, must still match). A record of another workflow, or of a newer
    format, is refused (`RecordUnreadable`, a DefinitionError).
    """
    if tools not in ("handlers", "record"):
        raise ValueError(f"tools is 'handlers' or 'record', not {tools!r}")
    recorded = read_recorded(Path(record))
    if recorded.workflow != definition.name:
        raise RecordUnreadable(f"{record} is a record of workflow {recorded.workflow!r}, not of {definition.name!r}")
    book = ReplayBook(recorded, tools=tools, strict=strict)
    errors: list[Exception] = []
    played = _with_participants(played_definition(definition, book), _recorded_participants(recorded),
                                _recorded_approvals(book) if recorded.approvals else None, errors)  # fmt: skip
    result = await run_definition(
        played, args=recorded.args if args is None else args, run_root=scratch_run_root(run_root), cwd=cwd,
        timeout=timeout, harnesses=book.harness_for, replay=recorded.run_dir if tools == "record" else None,
    )
    if book.errors:
        raise book.errors[0]
    if book.diverged is not None:
        raise book.diverged
    if errors and not isinstance(errors[0], TestScriptError):
        raise errors[0]
    run = TestRun(result, notes=tuple(book.notes))
    _check_end(book, run)
    return run


def _check_end(book: ReplayBook, run: TestRun) -> None:
    """What the record has and the replay never did; a turn that ended otherwise; the run's ending and value."""
    for turn in book.recorded.turns:
        if turn.kind in PLAYED_KINDS and turn.call_id not in book.started:
            raise ReplayDiverged(turn.agent, turn.named(), "turn", "given", "the workflow no longer gives it")
    now_turns = run.turns
    agents = sorted({turn.agent for turn in book.recorded.turns})
    for agent in agents:
        recorded = [turn.line for turn in book.recorded.turns if turn.agent == agent]
        replayed = [line for line in now_turns if line.get("agent") == agent]
        for before, after in zip(recorded, replayed, strict=False):
            name = RecordedTurn(before).named()
            if before.get("kind", "turn") != after.get("kind", "turn"):
                raise ReplayDiverged(agent, name, "turn", before.get("kind", "turn"), after.get("kind", "turn"))
            if before["outcome"].get("kind") != after["outcome"].get("kind"):
                raise ReplayDiverged(agent, name, "outcome", before["outcome"], after["outcome"])
            if before["outcome"].get("value") != after["outcome"].get("value"):
                raise ReplayDiverged(agent, name, "value", before["outcome"].get("value"), after["outcome"].get("value"))
        if len(replayed) != len(recorded):
            raise ReplayDiverged(agent, None, "turn", f"{len(recorded)} turns and operations", f"{len(replayed)}")
    output = book.recorded.output
    if output is None:
        return  # a killed run's record: no ending to replay to
    if output.get("outcome") != run.outcome:
        raise ReplayDiverged(None, None, "outcome", f"{output.get('outcome')}: {output.get('reason')}", f"{run.outcome}: {run.reason}")
    if run.outcome == "completed" and output.get("value") != msgspec.to_builtins(run.result.value):
        raise ReplayDiverged(None, None, "value", output.get("value"), run.result.value)


__all__ = ["ReplayDiverged", "replay"]
