"""The tool side of an AgentActor: `wfa tool` and what may run when.

One call at a time per agent: a second call while one runs is `tool-busy`, except the
same tool with the same input, which joins the running call and gets its answer. The
ToolBroker runs the call; this side only decides whether it may start.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any

import anyio
import msgspec

from ..actors import Reply, handler
from ..wire import Response, ToolRequest, refused
from ..wire.prompts import usage_line
from ..wire.teaching import ReadError
from . import rules
from .broker import MAX_TOOL_RESULT_BYTES, RunTool, ToolDone, tool_response
from .notice import notice
from .recorder import ToolCalled
from .toolcall import ToolCall


class SetTools(msgspec.Struct, frozen=True):
    """The agent was reopened with the same tools: the new handlers replace the old."""

    tools: dict[str, Any]


MAX_TOOL_INPUT_BYTES = MAX_TOOL_RESULT_BYTES  # one call's input, as given: 64 KiB, as its result


@dataclass
class ToolRun:
    """The one tool call an agent has running, and every request waiting on its answer."""

    call: ToolCall
    name: str
    args: list[str]
    input: str | None
    replies: list[Reply]


class AgentTools:
    """Mixed into AgentActor: its state (turn, tools, tool_run, broker, recorder) lives there."""

    tool_run: ToolRun | None

    # Tools --------------------------------------------------------------------------

    @handler
    def set_tools(self: Any, msg: SetTools) -> None:
        self.tools = dict(msg.tools)

    async def _tool(self: Any, request: ToolRequest) -> Response | None:
        """A refusal now, or None: the call runs, and is answered when it ends."""
        turn = self.turn
        in_turn = turn is not None and turn.outcome is None
        running = self.tool_run
        # The same call again joins the running one and gets its answer, once; more are tool-busy.
        same = (
            running is not None
            and len(running.replies) == 1
            and (running.name, running.args, running.input) == (request.name, request.args, request.input)
        )
        refusal = rules.judge_tool(
            self._view(),
            in_turn=in_turn,
            accepted=bool(turn and turn.accepted),
            busy_with=running.name if running is not None else None,
            same_call=same,
            name=request.name,
            tools=tuple(self.tools),
        )
        if refusal is not None:
            await self._record_refused(request, refusal.code, refusal.message)
            return refused("tool", refusal.code, refusal.message)
        if running is not None:  # the same call again: it gets the running call's answer
            running.replies.append(self.defer())
            return None
        assert turn is not None
        tool = self.tools[request.name]
        size = len((request.input or "").encode()) + sum(len(arg.encode()) for arg in request.args)
        if size > MAX_TOOL_INPUT_BYTES:
            message = f"the input is {size} bytes, over the limit of {MAX_TOOL_INPUT_BYTES}; pass a path instead"
            await self._record_refused(request, "invalid-input", message)
            return refused("tool", "invalid-input", message)
        try:
            value = tool.taught.read(request.args, request.input)
        except ReadError as error:
            message = self._tool_hint(request.name, tool, str(error))
            await self._record_refused(request, "invalid-input", message)
            return refused("tool", "invalid-input", message)
        call = ToolCall(secrets.token_hex(4), self.key, request.name)
        now = anyio.current_time()
        deadline = turn.deadline if tool.timeout is None else min(turn.deadline, now + tool.timeout)
        self.tool_run = ToolRun(call, request.name, request.args, request.input, [self.defer()])
        await self.broker.tell(RunTool(call, tool, value, deadline, turn.call_id, self.ref))
        return None

    async def _record_refused(self: Any, request: ToolRequest, code: str, message: str) -> None:
        """A refused call goes in the record too, before the refusal is answered: the handler never
        ran, so its raw input is kept. A refusal that can't be recorded is answered all the same
        (nothing ran); the run ends failed for the gap."""
        now = time.time()
        given = request.args or request.input
        sensitive: frozenset[str] = getattr(self.tools.get(request.name), "sensitive_fields", frozenset())
        await self.recorder.ask(
            ToolCalled(
                call_id=secrets.token_hex(4),
                turn_call_id=self.turn.call_id if self.turn is not None else "",
                agent=self.key,
                tool=request.name,
                input="[redacted]" if sensitive else given,
                outcome="refused",
                error=message,
                code=code,
                started_at=now,
                ended_at=now,
            )
        )

    def _tool_hint(self: Any, name: str, tool: Any, error: str) -> str:
        usage = usage_line(f"{self.launcher} tool {name}", tool.taught)
        return f"the input doesn't fit: {error}\nThe tool did not run. Fix the input and call it again.\n{usage}"

    @handler
    async def tool_done(self: Any, msg: ToolDone) -> None:
        running = self.tool_run
        if running is None or running.call.id != msg.call_id:
            return
        self.tool_run = None
        response = tool_response(msg.outcome)
        lead = notice(self.standings.of(self.key))  # on standard error: stdout is the result's
        if lead:
            response = msgspec.structs.replace(response, stderr=lead + response.stderr)
        for reply in running.replies:
            reply.set(response)
