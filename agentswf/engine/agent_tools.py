"""The tool side of an AgentActor: `wfa tool` and what may run when.

One call at a time per agent: a second call while one runs is `tool-busy`, except the
same tool with the same input, which joins the running call and gets its answer. The
ToolBroker reads the input, runs the call and answers it; this side only decides whether
it may start.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any

import anyio
import msgspec

from ..actors import Reply, handler
from ..wire import Code, Response, ToolRequest, refused
from . import rules
from .broker import RunTool, ToolDone
from .notice import notice
from .toolcall import ToolCall, tool_record


class SetTools(msgspec.Struct, frozen=True):
    """The agent was reopened with the same tools: the new handlers replace the old."""

    tools: dict[str, Any]


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
        call = ToolCall(secrets.token_hex(4), self.key, request.name)
        now = anyio.current_time()
        deadline = turn.deadline if tool.timeout is None else min(turn.deadline, now + tool.timeout)
        self.tool_run = ToolRun(call, request.name, request.args, request.input, [self.defer()])
        await self.broker.tell(
            RunTool(
                call=call,
                tool=tool,
                args=request.args,
                input=request.input,
                deadline=deadline,
                turn_call_id=turn.call_id,
                agent_ref=self.ref,
                launcher=self.launcher,
            )
        )
        return None

    async def _record_refused(self: Any, request: ToolRequest, code: Code, message: str) -> None:
        """A refused call goes in the record too, before the refusal is answered: the handler never
        ran, so its raw input is kept. A refusal that can't be recorded is answered all the same
        (nothing ran); the run ends failed for the gap."""
        now = time.time()
        given = request.args or request.input
        sensitive: frozenset[str] = getattr(self.tools.get(request.name), "sensitive_fields", frozenset())
        await self.recorder.ask(
            tool_record(
                call_id=secrets.token_hex(4),
                turn_call_id=self.turn.call_id if self.turn is not None else "",
                agent=self.key,
                tool=request.name,
                input=given,
                redacted=sensitive,
                read=False,
                outcome="refused",
                error=message,
                code=code,
                started_at=now,
                ended_at=now,
            )
        )

    @handler
    async def tool_done(self: Any, msg: ToolDone) -> None:
        running = self.tool_run
        if running is None or running.call.id != msg.call_id:
            return
        self.tool_run = None
        response = msg.response
        lead = notice(self.standings.of(self.key))  # on standard error: stdout is the result's
        if lead:
            response = msgspec.structs.replace(response, stderr=lead + response.stderr)
        for reply in running.replies:
            reply.set(response)
