"""Any agent that speaks the Agent Client Protocol (ACP): one attempt, one agent process, one prompt.

An attempt spawns the agent under a keeper in a session of its own (`process.open_in_group`),
`initialize`s it, opens its session (`session/new`; for the agent's later turns `session/resume`
where it advertises it, else `session/load`), sets the model where one is asked for, and sends
the turn's prompt (`session/prompt`, the prompt that teaches `wfa` as every harness's does).
It reads the agent's updates and answers its requests (`acp_turn.Turn`) until the prompt's
response and its `stopReason`; then the agent's input is closed, and what still runs is stopped
by the keeper, as a cancelled attempt's is. A cancelled attempt (a stop, a deadline) first tells
the agent `session/cancel`; the keeper does the rest (codex-acp's cancel doesn't stop the command
it runs). The transcript of the protocol is the attempt's output.

Not the PyPI SDK `agent-client-protocol`: it runs on asyncio only (under trio it fails with "no
running event loop"), signals the agent alone rather than its tree, and brings pydantic. The
protocol a client needs is small: `jsonrpc` and `acp_rpc` are its sans-IO core (the former shared
with codex's app-server), this the thin anyio shell.

`AcpAgent` is what a named runtime (opencode, qwen, gemini, copilot: `acp_agents.py`) adds: its
command, its quiet environment, its native binary, where it reports its spend, its quirks.
"""

from __future__ import annotations

import copy
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import msgspec

from ..errors import HarnessError
from .acp_rpc import (
    PROTOCOL_VERSION,
    Permissions,
    UsageSource,
    capabilities,
    model_choice,
    model_option,
    turn_tokens,
)
from .acp_turn import Turn
from .base import Attempt, AttemptEnding, AttemptResult, Harness, Operation, OperationResult, is_session_id
from .cli import looks_like_login
from .jsonrpc import CLIENT_INFO, Answer, Notice, Peer, Request, Rpc
from .prices import LIST_PRICES, Prices, estimate
from .process import Channel, ChannelClosed, open_in_group
from .usage import Usage

STDERR_LINES = 20  # of the agent's standard error, in the reason an attempt failed
MAX_ERROR_CHARS = 2000  # of an error the agent answered a request with, in the reason
LOGIN_HINT = "Configure {name}'s model and credentials as for {name} alone (docs/guide/acp-agents.md), or in the runtime's env."
CANCEL_SEND_SECONDS = 1.0  # for `session/cancel` to be written to a stopped attempt's agent
REPLAY_QUIET_SECONDS = 0.25  # after a load's answer: the agent silent this long has ended its replay (gemini's ran ~4 ms on)
REPLAY_MOST_SECONDS = 10.0  # waited in all for a load's replay to end: an agent that never falls silent is prompted anyway
ENDED_STOP_REASONS = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal"})
FORK_PREFIX = "fork:"  # a fork's session until its first attempt copies it: the parent's id after it
ADAPTER_HOMES = {"claude-agent-acp": "claude", "codex-acp": "codex"}  # an adapter's executable: the CLI whose home it keeps


class AcpError(HarnessError):
    """The agent refused a request of ours, or ended before answering it."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True)
class AcpAgent:
    """An ACP agent: how it is started, and what it needs beyond the protocol.

    `env` is set under the runtime's own (which wins). `native` maps the path found on PATH to
    the binary to run (an npm wrapper that doesn't pass signals on, or a placeholder). `usage`
    says where its tokens are reported, first found wins; `running_cost`, that its `usage_update`
    cost is the session's running total (opencode's), not the process's (claude-agent-acp's). `before_load` mends its store before a `session/load`
    (gemini's). `version_cli` is its name in the table of tested versions, if it has one. `model_env`
    is the variable that chooses its model, where its session offers none to set (copilot's).
    """

    name: str
    executable_name: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    install: str = ""
    native: Callable[[str], str] | None = None
    usage: tuple[UsageSource, ...] = ("response", "meta", "quota")
    running_cost: bool = False
    before_load: Callable[[str, Mapping[str, str]], None] | None = None
    version_cli: str | None = None
    model_env: str | None = None


ANY_AGENT = AcpAgent("acp")


class AcpHarness(Harness):
    """Runs an ACP agent's turns: a process per attempt, its session reopened by id."""

    name = "acp"

    def __init__(
        self,
        agent: AcpAgent,
        command: tuple[str, ...],
        *,
        model: str | None = None,
        permissions: Permissions | None = None,
        prices: Prices = LIST_PRICES,
    ) -> None:
        self.agent = agent
        self.name = agent.name  # type: ignore[misc]  # a named runtime's harness goes by its name
        self.command = command
        self.model = model
        self.permissions = permissions or Permissions()
        self.prices = prices
        self._costs: dict[str, float] = {}  # by session: the running cost its agent last reported

    def settings(self) -> tuple[str | None, str | None]:
        return self.model, None

    def with_settings(self, model: str | None, effort: str | None) -> AcpHarness:
        switched = copy.copy(self)  # the running costs shared: the session goes on
        switched.model = model if model is not None else self.model
        return switched

    def cli_executable(self) -> tuple[str, str] | None:
        return (self.agent.version_cli, self.command[0]) if self.agent.version_cli else None

    def cli_home(self) -> str:
        """A named agent's own; claude's and codex's for their adapters run by `command=[…]`."""
        if self.agent is ANY_AGENT:
            return ADAPTER_HOMES.get(os.path.basename(self.command[0]), self.agent.name)
        return self.agent.name

    async def run(self, attempt: Attempt) -> AttemptResult:
        turn = Turn(str(attempt.launcher), self.permissions, attempt.received)
        env = {**self.agent.env, **self.attempt_env(attempt)}
        if self.model is not None and self.agent.model_env is not None:
            env[self.agent.model_env] = self.model
        result: Any = None
        # confined, the sandbox's /tmp and home (where `before_load` mends); else a TMPDIR of its own
        async with open_in_group(self.command, cwd=attempt.cwd, env=env, started=attempt.started, confine=attempt.confine, said=attempt.said) as channel:
            client = _Client(channel, turn, self.agent.name)
            try:
                result = await self._turn(client, attempt, turn, channel.env)
            except AcpError as error:
                ending = _failed(self.agent.name, error)
            else:
                ending = _ending(self.agent.name, result)
        session = turn.session or attempt.session  # one that failed before it reopened its session keeps it
        return AttemptResult(ending, session=session, usage=self._usage(session, result, turn), output=turn.record())

    async def fork(self, operation: Operation) -> OperationResult:
        """A copy of the session, made by the copy's first attempt (`session/fork`, then its prompt, in one
        process): claude-agent-acp keeps a copy in memory only until a prompt writes it. No model call."""
        if operation.session is None:
            return OperationResult(AttemptEnding("failed", reason="an agent cannot be forked before its first turn"))
        return OperationResult(AttemptEnding("exited"), session=FORK_PREFIX + operation.session.removeprefix(FORK_PREFIX))

    async def _turn(self, client: _Client, attempt: Attempt, turn: Turn, env: Mapping[str, str]) -> Any:
        started = await client.call("initialize", _initialize())
        can = capabilities(started)
        where = {"cwd": str(attempt.cwd), "mcpServers": []}
        if attempt.session is None:
            opened = await client.call("session/new", where)
            named = opened.get("sessionId") if isinstance(opened, dict) else None
            if not isinstance(named, str) or not is_session_id(named):
                raise AcpError(f"{self.agent.name} answered session/new with no session id", retryable=True)
            session = named
        elif attempt.session.startswith(FORK_PREFIX):
            if not can.fork:
                raise AcpError(f"{self.agent.name} offers no session/fork: the agent can't be forked")
            parent = attempt.session.removeprefix(FORK_PREFIX)
            forked = await client.call("session/fork", {"sessionId": parent, **where})
            named = forked.get("sessionId") if isinstance(forked, dict) else None
            if not isinstance(named, str) or not is_session_id(named) or named == parent:
                raise AcpError(f"{self.agent.name} answered session/fork with no new session")
            session, opened = named, forked
        else:
            session = attempt.session
            turn.session = session  # the replay of a load is the session's, though not the turn's: counted
            if can.resume:
                opened = await client.call("session/resume", {"sessionId": session, **where})
            elif can.load:
                if self.agent.before_load is not None:
                    await anyio.to_thread.run_sync(self.agent.before_load, session, env)
                opened = await client.call("session/load", {"sessionId": session, **where})
                await client.quiet(REPLAY_QUIET_SECONDS, REPLAY_MOST_SECONDS)  # gemini replays after its answer
            else:
                raise AcpError(f"{self.agent.name} can't reopen its session: its initialize offers neither "
                               "session/resume nor session/load")  # fmt: skip
        turn.session = session
        if self.model is not None and self.agent.model_env is None:
            await self._set_model(client, session, opened, self.model)
        turn.prompting = True
        prompt = {"sessionId": session, "prompt": [{"type": "text", "text": attempt.prompt}]}
        try:
            return await client.call("session/prompt", prompt, retryable=True)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_SEND_SECONDS):
                await client.notify("session/cancel", {"sessionId": session})
            raise

    async def _set_model(self, client: _Client, session: str, opened: Any, model: str) -> None:
        how = model_option(opened)
        chosen, current = model_choice(opened, model)
        if how is not None and chosen == current:
            return
        if how == "config":
            await client.call("session/set_config_option", {"sessionId": session, "configId": "model", "value": chosen})
        elif how == "models":
            await client.call("session/set_model", {"sessionId": session, "modelId": chosen})
        else:
            raise AcpError(f"{self.agent.name} offers no model to choose (no config option `model`, no `models`)")

    def _usage(self, session: str | None, result: Any, turn: Turn) -> Usage | None:
        """The attempt's own spend: its tokens where the agent reports them, its cost where it reports one."""
        tokens = turn_tokens(result, turn.per_call, self.agent.usage) if result is not None else None
        cost = turn.cost
        if cost is not None and self.agent.running_cost and session is not None:
            before = self._costs.get(session)
            self._costs[session] = cost
            cost = cost - before if before is not None and cost >= before else cost
        if tokens is None and cost is None:
            return None
        usage = msgspec.structs.replace(tokens or Usage(), cost_usd=cost, model=self.model)
        return estimate(usage, self.prices)


def _initialize() -> dict[str, Any]:
    """`initialize`'s parameters: no files, no terminals (the agents run their commands themselves)."""
    return {
        "protocolVersion": PROTOCOL_VERSION, "clientInfo": CLIENT_INFO,
        "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
    }  # fmt: skip


def _failed(name: str, error: AcpError) -> AttemptEnding:
    """A failed attempt; one whose error says the agent isn't logged in (an HTTP 401 relayed) fails for good."""
    if looks_like_login(str(error)):
        reason = f"{name} isn't logged in: {error}\n{LOGIN_HINT.format(name=name)}"
        return AttemptEnding("failed", reason=reason, retryable=False)
    return AttemptEnding("failed", reason=str(error), retryable=error.retryable)


def _ending(name: str, result: Any) -> AttemptEnding:
    reason = result.get("stopReason") if isinstance(result, dict) else None
    if reason in ENDED_STOP_REASONS:
        return AttemptEnding("exited", reason="" if reason == "end_turn" else f"{name} ended its turn: {reason}")
    if reason == "cancelled":
        return AttemptEnding("failed", reason=f"{name} cancelled its turn itself", retryable=True)
    return AttemptEnding("failed", reason=f"{name} answered its prompt with no known stopReason", retryable=True)


class _Client:
    """The thin shell: ACP's lines over the agent's standard streams (`jsonrpc.Peer`), its requests decided by the turn."""

    def __init__(self, channel: Channel, turn: Turn, name: str) -> None:
        self.turn = turn
        self.name = name
        self.rpc = Rpc()
        self.peer = Peer(channel, self.rpc, self._serve)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.peer.notify(method, params)

    async def call(self, method: str, params: dict[str, Any], *, retryable: bool = False) -> Any:
        """Send a request and read until its answer, serving the agent meanwhile; AcpError if it fails."""
        try:
            answered = await self.peer.call(method, params)
        except ChannelClosed:
            raise await self._ended(method) from None
        if isinstance(answered, Answer):
            return answered.result
        said = answered.message[:MAX_ERROR_CHARS]
        tail = await self.peer.channel.stderr_lines(STDERR_LINES) if retryable else ""  # the prompt's: why, where it says
        code = f" ({answered.code})" if answered.code is not None else ""
        raise AcpError(f"{self.name} refused {method}{code}: {said}{chr(10) + tail if tail else ''}", retryable=retryable)

    async def quiet(self, seconds: float, most: float) -> None:
        """Read, serving the agent, until it has written nothing for `seconds` (`most` at the most in all):
        ACP has no mark for the end of a load's replay but the load's answer, which gemini sends before it."""
        with anyio.move_on_after(most):
            while True:
                with anyio.move_on_after(seconds) as silent:
                    try:
                        message = await self.peer.receive()
                    except ChannelClosed:
                        return  # it exited: the prompt's request says so
                if silent.cancelled_caught:
                    return
                await self.peer.serve(message)

    def _serve(self, message: Notice | Request) -> bytes | None:
        """A notification to the turn; a request answered as the turn decides, or refused."""
        if isinstance(message, Notice):
            self.turn.notice(message)
            return None
        result = self.turn.request(message)
        return self.rpc.refuse(message) if result is None else self.rpc.answer(message, result)

    async def _ended(self, awaited: str) -> AcpError:
        tail = await self.peer.channel.stderr_lines(STDERR_LINES)
        return AcpError(f"{self.name} ended before it answered {awaited}{':' + chr(10) + tail if tail else ''}",
                        retryable=True)  # fmt: skip


def locate(agent: AcpAgent, command: tuple[str, ...], env: Mapping[str, str]) -> tuple[str, ...]:
    """The agent's command line: its executable (`command[0]`, else the named agent's, found on PATH;
    its native binary where it has one), the named agent's arguments, then the rest of `command`.
    HarnessError when it isn't installed."""
    if not command and not agent.executable_name:
        raise HarnessError("an ACP runtime needs command=[program, args…]: the agent's command line")
    wanted = command[0] if command else agent.executable_name
    found = shutil.which(wanted, path=env.get("PATH", os.defpath))
    if found is None:
        hint = f": install it with `{agent.install}`" if agent.install else ""
        raise HarnessError(f"{wanted} was not found{hint}, or give Runtime(harness={agent.name!r}, command=['/path/to/it'])")
    if agent.native is not None:
        found = agent.native(found)
    return (found, *agent.args, *command[1:])
