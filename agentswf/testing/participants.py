"""Scripted participants: a person (or program) outside the run, played by a function.

A scripted participant reads its inbox and answers over the run's operator socket, with
the same requests `awf inbox` and `awf reply` send, so a passing test says a person
could have answered the same way. It starts once the workflow opens it
(`wf.participants.open(key)`), and stops when the run ends.

Every wait is on the run's clock, and its requests go over the socket in the event loop (not in
a thread). Its inbox is read with a short `awf inbox --wait`, again and again, each connection held
only that long; on a virtual clock (`agentswf.testing.virtual_clock`), where each of those waits
would be a jump of the clock, with the longest, so a participant that answers an hour late
(`respond(..., after="1h")`) costs the test no real hour nor a timer meanwhile; there each holds
one of the run's `MAX_OPERATOR_CONNECTIONS` while it waits.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import msgspec

from ..engine import clock
from ..engine.mail.words import Mail
from ..engine.operator_wire import (
    MAX_INBOX_WAIT_SECONDS,
    OPERATOR_TIMEOUT_SECONDS,
    OperatorRequest,
    OperatorResponse,
    Pending,
    PostAs,
    ReadInbox,
)
from ..engine.record.layout import read_json
from ..errors import TestScriptError
from ..workflow.durations import Duration, to_seconds

INBOX_WAIT_MS = 100  # one `awf inbox --wait`; the participant asks again until the run ends
VIRTUAL_INBOX_WAIT_MS = int(MAX_INBOX_WAIT_SECONDS * 1000)  # the same on a virtual clock, where each short wait is a jump
NOT_OPEN_RETRY_SECONDS = 0.02  # until the run's operator socket answers (it is bound as the run's actors start)

MailAnswer = Callable[[Mail], "str | Awaitable[str | None] | None"]


@dataclass(frozen=True)
class ParticipantScript:
    """How a scripted participant answers: `fn(mail)` for every message it reads, `after` seconds
    (on the run's clock) after reading it."""

    fn: MailAnswer
    after: float = 0.0

    async def play(self, key: str, run_dir: Path) -> None:
        """Read `key`'s inbox and answer each message, until cancelled at the run's end."""
        control = str(read_json(run_dir / "run.json")["control"])
        wait_ms = VIRTUAL_INBOX_WAIT_MS if clock.virtual() else INBOX_WAIT_MS
        while True:
            response = await ask(control, ReadInbox(key, wait_ms))
            if not response.ok:
                raise TestScriptError(f"participant {key}: the run refused to show its inbox: {response.message}")
            for mail in msgspec.convert(response.value, list[Mail]):
                await anyio.sleep(self.after)
                text = self.fn(mail)
                if inspect.isawaitable(text):
                    text = await text
                if text is None:
                    continue
                if not isinstance(text, str):
                    raise TestScriptError(f"participant {key}: its script answered {text!r}; answer a str or None")
                sent = await ask(control, PostAs(key, mail.sender, text, reply=mail.is_question))
                if not sent.ok:
                    verb = "reply to" if mail.is_question else "message to"
                    raise TestScriptError(f"participant {key}: its {verb} {mail.sender} was {sent.message}")


def respond(fn: MailAnswer | str, *, after: Duration | None = None) -> ParticipantScript:
    """Answer every message with `fn(mail)` (sync or async), or with `fn` itself when it is a str.

    A question gets a reply (`awf reply`), any other message a message back; a function that
    returns None answers nothing. `after` ("5m", or seconds) plays a person who answers that long
    after reading each message, on the run's clock: a virtual one passes it at once.
    """
    late = 0.0 if after is None else to_seconds(after, what="after")
    if isinstance(fn, str):
        text = fn
        return ParticipantScript(lambda mail: text, late)
    return ParticipantScript(fn, late)


async def ask(control: str, request: OperatorRequest) -> OperatorResponse:
    """The run's answer to one operator request, as `awf` sends it, over the socket in the event loop.

    Until the run's socket takes connections it asks again; once the run closes it without an
    answer (the run is ending), this waits for run_workflow to cancel it."""
    wait = request.wait_ms / 1000 if isinstance(request, ReadInbox | Pending) else 0.0
    line = msgspec.json.encode(request) + b"\n"
    while True:
        try:
            stream = await anyio.connect_unix(control)
            break
        except OSError:
            await anyio.sleep(NOT_OPEN_RETRY_SECONDS)
    data = b""
    async with stream:
        with anyio.move_on_after(OPERATOR_TIMEOUT_SECONDS + wait) as waiting:
            try:
                await stream.send(line)
                await stream.send_eof()
                while not data.endswith(b"\n"):
                    data += await stream.receive()
            except (OSError, anyio.EndOfStream, anyio.BrokenResourceError):
                pass
    if waiting.cancelled_caught:
        raise TestScriptError(f"the run did not answer {type(request).__name__} within OPERATOR_TIMEOUT_SECONDS")
    try:
        return msgspec.json.decode(data, type=OperatorResponse)
    except msgspec.DecodeError:
        await anyio.sleep_forever()
        raise  # never reached: sleep_forever returns only by being cancelled
