"""Scripted participants: a person (or program) outside the run, played by a function.

A scripted participant reads its inbox and answers over the run's operator socket, with
the same requests `awf inbox` and `awf reply` send, so a passing test says a person
could have answered the same way. It starts once the workflow has started, waits until
the workflow opens it (`wf.participants.open(key)`), and stops when the run ends.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread
import msgspec

from ..engine.mail.words import Mail
from ..engine.operator import OperatorRequest, OperatorResponse, PostAs, ReadInbox, ask_run
from ..engine.record.layout import read_json
from ..errors import TestScriptError

INBOX_WAIT_MS = 100  # one `awf inbox --wait`; the participant asks again until the run ends
NOT_OPEN_RETRY_SECONDS = 0.02  # until the run's socket is up and the workflow has opened the participant

MailAnswer = Callable[[Mail], "str | Awaitable[str | None] | None"]


@dataclass(frozen=True)
class ParticipantScript:
    """How a scripted participant answers: `fn(mail)` for every message it reads."""

    fn: MailAnswer

    async def play(self, key: str, run_dir: Path) -> None:
        """Read `key`'s inbox and answer each message, until cancelled at the run's end."""
        control = str(read_json(run_dir / "run.json")["control"])
        while True:
            response = await _ask(run_dir, control, ReadInbox(key, INBOX_WAIT_MS))
            if response is None or not response.ok:  # not reachable yet, or the workflow hasn't opened `key`
                await anyio.sleep(NOT_OPEN_RETRY_SECONDS)
                continue
            for mail in msgspec.convert(response.value, list[Mail]):
                text = self.fn(mail)
                if inspect.isawaitable(text):
                    text = await text
                if text is None:
                    continue
                if not isinstance(text, str):
                    raise TestScriptError(f"participant {key}: its script answered {text!r}; answer a str or None")
                sent = await _ask(run_dir, control, PostAs(key, mail.sender, text, reply=mail.is_question))
                if sent is None:
                    raise TestScriptError(f"participant {key}: the run went away as it answered {mail.sender}")
                if not sent.ok:
                    verb = "reply to" if mail.is_question else "message to"
                    raise TestScriptError(f"participant {key}: its {verb} {mail.sender} was {sent.message}")


def respond(fn: MailAnswer | str) -> ParticipantScript:
    """Answer every message with `fn(mail)` (sync or async), or with `fn` itself when it is a str.

    A question gets a reply (`awf reply`), any other message a message back (`awf send`);
    a function that returns None answers nothing.
    """
    if isinstance(fn, str):
        text = fn
        return ParticipantScript(lambda mail: text)
    return ParticipantScript(fn)


async def _ask(run_dir: Path, control: str, request: OperatorRequest) -> OperatorResponse | None:
    """The run's answer; None when it can't be reached yet (its socket is bound as its
    actors start). Once the run has ended, this waits for run_workflow to cancel it."""
    try:
        return await anyio.to_thread.run_sync(ask_run, control, request, abandon_on_cancel=True)
    except OSError:
        if (run_dir / "output.json").exists():
            await anyio.sleep_forever()
        return None
