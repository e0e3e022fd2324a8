"""`ScriptedModel`: an in-process model server on 127.0.0.1 that a script answers.

It speaks the four dialects the CLIs use and logs every request, so a test can point a
real CLI at it with no network and then assert on what the CLI sent. It runs in the
caller's event loop (asyncio or trio, through anyio), one task per connection.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from types import ModuleType, TracebackType
from typing import Any

import anyio
import structlog
from anyio.abc import SocketAttribute, SocketStream

from . import anthropic, chat, gemini, responses
from .http import BadRequest, HTTPRequest, read_request, response_head
from .script import Conversation, Dialect, Reply, Script, resolve
from .sse import Usage, dumps

MODEL_ID = "fake-model"  # what GET /v1/models lists, and the model the env helpers name
LOOPBACK = "127.0.0.1"
_SSE = "text/event-stream"
_JSON = "application/json"
_DIALECTS: dict[str, tuple[Dialect, ModuleType]] = {
    "/v1/messages": ("anthropic", anthropic),
    "/v1/responses": ("responses", responses),
    "/v1/chat/completions": ("chat", chat),
}
_COUNT_TOKENS = "/v1/messages/count_tokens"
_MODELS = "/v1/models"
_log = structlog.get_logger("agentswf.testing.models")


@dataclass(frozen=True)
class ModelRequest:
    """One request the server could read, and how it answered, for a test's assertions.

    `body` is the parsed JSON (None if there was none); `dialect` is set for each dialect's
    endpoints (count_tokens included); `conversation` for model calls, the ones a script
    (or `fail_status`) answers; `reply` is what the script's step became (None for errors).
    """

    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: Any
    dialect: Dialect | None
    conversation: Conversation | None
    status: int
    reply: Reply | None


class ScriptedModel:
    """A model server answering each model call with `script(conversation)`.

        async with ScriptedModel(steps(Shell("echo hi"), Text("done"))) as model:
            env = codex_env(model, tmp_path)   # then run the CLI with env

    Every reply reports `input_tokens`/`output_tokens` as usage. With `fail_status` set,
    every model call gets that status and an error body in the caller's dialect instead.
    A script that raises is answered with a 500, and the error is raised again when the
    block exits, so a test can't pass over it.
    """

    def __init__(
        self,
        script: Script,
        *,
        input_tokens: int = 100,
        output_tokens: int = 20,
        fail_status: int | None = None,
    ) -> None:
        self.script = script
        self.usage = Usage(input_tokens, output_tokens)
        self.fail_status = fail_status
        self.requests: list[ModelRequest] = []
        self.errors: list[Exception] = []
        self.port = 0
        self._stack = AsyncExitStack()

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    async def __aenter__(self) -> ScriptedModel:
        listener = await self._stack.enter_async_context(
            await anyio.create_tcp_listener(local_host=LOOPBACK, local_port=0)
        )
        self.port = listener.extra(SocketAttribute.local_port)
        connections = await self._stack.enter_async_context(anyio.create_task_group())
        self._stack.callback(connections.cancel_scope.cancel)
        connections.start_soon(listener.serve, self._serve)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> bool:
        suppressed = await self._stack.__aexit__(kind, error, trace)
        if kind is None and self.errors:
            raise self.errors[0]
        return bool(suppressed)

    async def _serve(self, stream: SocketStream) -> None:
        """Answer one request on `stream`, then close it; never let an error reach the listener."""
        async with stream:
            try:
                request = await read_request(stream)
            except BadRequest as bad:
                _log.warning("unreadable request to the scripted model", status=bad.status, error=str(bad))
                await _send(stream, bad.status, _JSON, dumps({"error": {"message": str(bad)}}).encode())
                return
            try:
                status, content_type, payload = await self._answer(request)
            except Exception as error:  # a bug here must fail the test, not hang the CLI
                self.errors.append(error)
                status, content_type, payload = 500, _JSON, dumps({"error": {"message": repr(error)}}).encode()
            await _send(stream, status, content_type, b"" if request.method == "HEAD" else payload)

    async def _answer(self, request: HTTPRequest) -> tuple[int, str, bytes]:
        """Route `request`, log it in `requests`, and return the status, type and payload."""
        body, unreadable = _json_object(request.body)

        def log(status: int, dialect: Dialect | None = None, conv: Conversation | None = None,
                reply: Reply | None = None) -> None:  # fmt: skip
            self.requests.append(
                ModelRequest(request.method, request.path, request.query, request.headers, body,
                             dialect, conv, status, reply)
            )

        route = (request.method, request.path)
        if route == ("GET", _MODELS):
            log(200)
            return 200, _JSON, dumps(_model_list()).encode()
        if route == ("POST", _COUNT_TOKENS):
            log(200, "anthropic")
            return 200, _JSON, dumps(anthropic.token_count(self.usage)).encode()
        routed = gemini.ROUTE.fullmatch(request.path) if request.method == "POST" else None
        if routed is not None and routed.group(2) == "countTokens":
            log(200, "gemini")
            return 200, _JSON, dumps(gemini.token_count(self.usage)).encode()
        if routed is None and (request.method != "POST" or request.path not in _DIALECTS):
            _log.warning("no such endpoint on the scripted model", method=request.method, path=request.path)
            log(404)
            return 404, _JSON, dumps({"error": {"message": f"no {request.method} {request.path} here"}}).encode()
        gemini_route: tuple[Dialect, ModuleType] = ("gemini", gemini)
        dialect, speaker = gemini_route if routed is not None else _DIALECTS[request.path]
        if unreadable:
            log(400, dialect)
            return 400, _JSON, dumps(speaker.error(400, unreadable)).encode()
        conv = speaker.conversation(body)
        if routed is not None:  # Gemini names the model in the path
            conv = dataclasses.replace(conv, model=routed.group(1))
        if self.fail_status is not None:
            log(self.fail_status, dialect, conv)
            message = f"scripted failure: every model call gets HTTP {self.fail_status}"
            return self.fail_status, _JSON, dumps(speaker.error(self.fail_status, message)).encode()
        try:
            reply = await self._reply(conv)
        except Exception as error:
            self.errors.append(error)
            _log.warning("the model script raised", error=repr(error))
            log(500, dialect, conv)
            return 500, _JSON, dumps(speaker.error(500, f"the model script raised {error!r}")).encode()
        log(200, dialect, conv, reply)
        model = conv.model or MODEL_ID
        if (routed.group(2) == "streamGenerateContent") if routed is not None else body.get("stream"):
            return 200, _SSE, speaker.events(reply, model, self.usage)
        return 200, _JSON, dumps(speaker.body(reply, model, self.usage)).encode()

    async def _reply(self, conv: Conversation) -> Reply:
        step = self.script(conv)
        if inspect.isawaitable(step):
            step = await step
        return resolve(step, conv)


def _json_object(raw: bytes) -> tuple[Any, str | None]:
    """The body parsed, and why it isn't a JSON object (None when it is one)."""
    if not raw:
        return None, "the request has no body"
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as bad:
        return None, f"the body is not JSON: {bad}"
    return body, None if isinstance(body, dict) else "the body is not a JSON object"


def _model_list() -> dict[str, Any]:
    """One model, in a shape both OpenAI's and Anthropic's clients read."""
    model = {"id": MODEL_ID, "object": "model", "type": "model", "created": 0, "owned_by": "agentswf",
             "display_name": MODEL_ID, "created_at": "1970-01-01T00:00:00Z"}  # fmt: skip
    return {"object": "list", "data": [model], "has_more": False, "first_id": MODEL_ID, "last_id": MODEL_ID}


async def _send(stream: SocketStream, status: int, content_type: str, payload: bytes) -> None:
    length = None if content_type == _SSE else len(payload)
    try:
        await stream.send(response_head(status, content_type, length) + payload)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        _log.warning("the client went away before its answer", status=status)

