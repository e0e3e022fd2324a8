"""`awf worker` and `awf run --engine temporal`: agentswf's commands for Temporal.

`awf worker --address HOST:PORT --task-queue Q` runs agents' turns for any workflow whose
agents' turns go to Q, in its own cwd, with its own CLIs, until SIGINT or SIGTERM;
`--workflow FILE` (repeatable) also runs those workflows' own code, so a run goes on after
the process that started it exits. Nothing is imported from temporalio until a command needs
it: awf without the extra still starts, and says what to install.

Each command holds the deployment's run key (`run_key`: AGENTSWF_TEMPORAL_KEY, or its file):
it takes the key out of its environment, so nothing it starts inherits it, and becomes
non-dumpable. A person's command (`awf approve`, `awf send`...) run by an agent is refused
before it signs anything (`refuse_agents`, best effort: an agent without the key can't sign).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import msgspec

from ..engine.record.layout import TEMPORAL_FILE, read_json
from ..engine.record.lines import ApprovalRequest
from ..errors import DefinitionError, PayloadKeyError, RunKeyError
from ..harnesses.environment import KEY_VARIABLE, KEY_VARIABLES, PAYLOAD_KEY_VARIABLE
from ..harnesses.keeper import MARK_VARIABLE
from ..launcher.identity import INIT_PID, MAX_ANCESTRY_DEPTH
from ..launcher.peer import environment_value, parent_of
from .failures import UsageFailure
from .runs import live_run_dir, pending_line, run_dir_of
from .shown import shown, shown_json

if TYPE_CHECKING:
    from temporalio.client import Client

    from ..temporal.codec import PayloadKeys
    from ..temporal.keys import RunKey

NEEDS_EXTRA = "the Temporal engine needs agentswf[temporal]: pip install 'agentswf[temporal]'"
NO_PAYLOAD_KEY = (
    f"awf: WARNING: no payload key ({PAYLOAD_KEY_VARIABLE}): prompts, answers, tool inputs and messages go into "
    "Temporal's history in plaintext, readable by whoever reads the namespace (docs/guide/temporal.md: payloads encrypted)"
)


def needs_extra() -> None:
    """Said in a line, not a traceback, where a command must reach Temporal and the extra is missing."""
    if importlib.util.find_spec("temporalio") is None:
        raise UsageFailure(NEEDS_EXTRA)


def exit_now(code: int) -> NoReturn:
    """Exit at once with `code`, once everything is flushed: the Temporal SDK's threads (1.35.0)
    can crash the interpreter as it finalizes (SIGSEGV or SIGABRT, measured in ~40% of exits of a
    process that used a client), which would replace the command's exit status."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_key(*, create: bool) -> RunKey:
    """This command's run key (made in the default file if `create` and none is given), out of its
    environment; the process becomes non-dumpable. Raises UsageFailure saying what to give."""
    from ..temporal.keys import default_key_file, held, load_key  # here: a local run's commands need no key

    made = create and not any(os.environ.get(name) for name in KEY_VARIABLES) and not default_key_file().exists()
    try:
        key = load_key(create=create)
    except RunKeyError as error:
        raise UsageFailure(str(error)) from None
    for name in KEY_VARIABLES:
        os.environ.pop(name, None)
    held(key)
    if made:
        print(f"awf: made a run key (id {key.id}) in {default_key_file()}: give it to this deployment's other "
              f"machines in {KEY_VARIABLE}", file=sys.stderr)
    return key


def payload_keys() -> PayloadKeys:
    """This command's payload keys (temporal/codec.py), held: out of its environment from now on.
    Raises UsageFailure naming a malformed variable."""
    from ..temporal.codec import held_keys

    try:
        return held_keys()
    except PayloadKeyError as error:
        raise UsageFailure(str(error)) from None


def refuse_agents() -> None:
    """Refuse a person's command started by an agent (its process, or an ancestor, carries an agentswf
    mark), as the local operator socket refuses one. Best effort: the run key is the real check."""
    pid: int | None = os.getpid()
    for _ in range(MAX_ANCESTRY_DEPTH):
        if pid is None or pid <= INIT_PID:
            return
        mark = os.environ.get(MARK_VARIABLE) if pid == os.getpid() else environment_value(pid, MARK_VARIABLE)
        if mark:
            raise UsageFailure(
                f"this command is for people, and process {pid} was started by an agent of a run: nothing was sent"
            )
        pid = parent_of(pid)


def add_run_options(run_parser: argparse.ArgumentParser) -> None:
    """`awf run`'s flags for running on Temporal."""
    run_parser.add_argument("--engine", choices=["local", "temporal"], default="local", help="where the run executes")
    run_parser.add_argument("--address", help="the Temporal frontend, HOST:PORT (with --engine temporal)")
    run_parser.add_argument("--namespace", default="default", help="the Temporal namespace (default: default)")
    run_parser.add_argument("--task-queue", help="the queue agents' turns go to (with --engine temporal)")
    run_parser.add_argument(
        "--no-turns-here", action="store_true", help="with --engine temporal: leave every turn to `awf worker`s"
    )


def engine_options(options: argparse.Namespace) -> dict[str, Any]:
    """`engine=` for `agentswf.run`, when `awf run` was given `--engine temporal`; raises UsageFailure."""
    if options.engine != "temporal":
        for flag in ("address", "task_queue"):
            if getattr(options, flag) is not None:
                raise UsageFailure(f"--{flag.replace('_', '-')} is for --engine temporal")
        return {}
    if options.address is None or options.task_queue is None:
        raise UsageFailure("--engine temporal needs --address HOST:PORT and --task-queue Q")
    try:
        from ..temporal import TemporalEngine
    except ImportError:
        raise UsageFailure(NEEDS_EXTRA) from None
    payload_keys()
    key = run_key(create=True)
    options.talked_to_temporal = True
    from ..temporal.codec import SDK_WORKFLOW_LOGGERS, KeyErrorsInALine
    from ..temporal.turns import say_refused

    # A run its host ended for a worker's answer it can't decrypt: said once, by the run's ending, not by a traceback.
    for name in SDK_WORKFLOW_LOGGERS:
        logging.getLogger(name).addFilter(KeyErrorsInALine(say_refused))
    engine = TemporalEngine(
        address=options.address, namespace=options.namespace, task_queue=options.task_queue,
        run_turns=not options.no_turns_here, key=key,
    )
    return {"engine": engine}


def add_parsers(commands: Any) -> None:
    worker = commands.add_parser("worker", help="run agents' turns (and workflows) from a Temporal task queue")
    worker.add_argument("--address", required=True, help="the Temporal frontend, HOST:PORT")
    worker.add_argument("--task-queue", required=True, help="the queue whose turns this worker runs")
    worker.add_argument("--namespace", default="default", help="the Temporal namespace (default: default)")
    worker.add_argument(  # --root: its first name, in docs before awf's other commands' --run-root
        "--run-root", "--root", dest="run_root", metavar="DIR",
        help="where each turn's local record is kept (default .awf/temporal; --root is the same)",
    )
    worker.add_argument("--max-turns", type=int, default=100, help="turns run at once, at most (default 100)")
    worker.add_argument(
        "--workflow", action="append", default=[], metavar="FILE", help="also run this file's workflow's own code"
    )
    worker.set_defaults(handler=command_worker)
    add_codec_server(commands)


def command_worker(options: argparse.Namespace) -> int:
    try:
        import temporalio  # noqa: F401
    except ImportError:
        raise UsageFailure(NEEDS_EXTRA) from None
    from ..workflow.loading import load_workflow  # here: the other commands of this module only read a run's files

    if payload_keys().current_id is None:
        print(NO_PAYLOAD_KEY, file=sys.stderr, flush=True)
    try:
        definitions = [load_workflow(path) for path in options.workflow]
    except DefinitionError as error:
        raise UsageFailure(str(error)) from None
    if options.max_turns < 1:
        raise UsageFailure("--max-turns is at least 1")
    key = run_key(create=True)
    options.talked_to_temporal = True
    asyncio.run(_serve(options, definitions, key))
    return 0


async def _serve(options: argparse.Namespace, definitions: list[Any], key: RunKey) -> None:
    from ..temporal.codec import SDK_ACTIVITY_LOGGER, SDK_WORKFLOW_LOGGERS, KeyErrorsInALine
    from ..temporal.engine import connect, turn_worker, workflow_worker
    from ..temporal.turns import say_refused

    logging.getLogger(SDK_ACTIVITY_LOGGER).addFilter(KeyErrorsInALine(say_refused))  # a turn it can't decrypt: a line
    for name in SDK_WORKFLOW_LOGGERS:  # a run it ended for a worker's answer, or a start, it can't decrypt: a line
        logging.getLogger(name).addFilter(KeyErrorsInALine(
            say_refused, ended=lambda why: print(f"awf: a run's workflow failed: {why}", file=sys.stderr, flush=True)
        ))

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    client = await connect(options.address, options.namespace)
    root = Path(options.run_root) if options.run_root else None
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(
            turn_worker(client, options.task_queue, key=key, root=root, max_concurrent=options.max_turns)
        )
        for definition in definitions:
            await stack.enter_async_context(workflow_worker(client, options.task_queue, definition, key))
        names = "".join(f", workflow {definition.name}" for definition in definitions)
        print(f"awf: worker on {options.task_queue} at {options.address}{names}, run key {key.id}; Ctrl-C stops it",
              file=sys.stderr, flush=True)
        await stop.wait()
    print("awf: worker stopped", file=sys.stderr, flush=True)


CODEC_PORT = 8081  # `awf codec-server`'s, as Temporal's codec server samples'
CODEC_ORIGINS = ("http://localhost:8233", "http://127.0.0.1:8233")  # the dev server's Web UI


def add_codec_server(commands: Any) -> None:
    server = commands.add_parser(
        "codec-server", help="decrypt a Temporal run's payloads for Temporal's Web UI (Temporal's codec server protocol)"
    )
    server.add_argument("--port", type=int, default=CODEC_PORT, help=f"on 127.0.0.1 (default {CODEC_PORT}; 0: a free one)")
    server.add_argument(
        "--origin", action="append", default=[], metavar="URL",
        help=f"the Web UI's origin, answered with CORS (repeatable; default {', '.join(CODEC_ORIGINS)})",
    )
    server.set_defaults(handler=command_codec_server)


def command_codec_server(options: argparse.Namespace) -> int:
    """`awf codec-server`: /encode and /decode on loopback with the payload keys, until SIGINT or SIGTERM."""
    needs_extra()
    from ..temporal.codec_server import codec_server

    keys = payload_keys()
    if keys.current_id is None:
        raise UsageFailure(f"awf codec-server decrypts with the deployment's payload key: give it in {PAYLOAD_KEY_VARIABLE}")
    origins = options.origin or list(CODEC_ORIGINS)
    try:
        server = codec_server(keys, port=options.port, origins=origins)
    except OSError as error:
        raise UsageFailure(f"the codec server can't listen on 127.0.0.1:{options.port}: {error.strerror}") from None
    signal.signal(signal.SIGTERM, _interrupted)
    print(f"awf: codec server on http://127.0.0.1:{server.server_port} for {', '.join(origins)}, payload keys "
          f"{', '.join(keys.ids)}; Ctrl-C stops it", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    print("awf: codec server stopped", file=sys.stderr, flush=True)
    return 0


def _interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def temporal_run(options: argparse.Namespace) -> dict[str, Any] | None:
    """What a live run on Temporal's directory says of it (its workflow id, address), or None for a local run."""
    try:
        run_dir = live_run_dir(options)
    except UsageFailure:
        return None  # the local command says why
    return temporal_record(run_dir)


def temporal_record(run_dir: Path) -> dict[str, Any] | None:
    """What the directory of a live run on Temporal says of it, or None for a local run."""
    path = run_dir / TEMPORAL_FILE
    if not path.exists():
        return None
    if (run_dir / "output.json").exists():
        raise UsageFailure(f"run {run_dir.name} has ended; only a live run can be asked (awf logs {run_dir.name} shows it)")
    found: dict[str, Any] = read_json(path)
    return found


def command_decide(options: argparse.Namespace, run: dict[str, Any]) -> int:
    """`awf approve` / `awf reject` of a call a Temporal run's workflow waits on: an update."""
    from ..temporal.messages import DECIDE_UPDATE, DecideRequest

    decision = DecideRequest(options.call, options.command == "approve", options.reason or "", options.by)
    options.talked_to_temporal = True
    waiting = asyncio.run(_ask(run, DECIDE_UPDATE, decision, update=True, by=f"person:{options.by}"))
    if not waiting:
        print(f"awf: no call {options.call} is waiting for approval in that run (awf pending lists them)", file=sys.stderr)
        return 1
    print(f"awf: call {options.call} {'approved' if decision.approved else 'rejected'}")
    return 0


def ask_person(options: argparse.Namespace, request: Any) -> Any:
    """`awf inbox` and `awf send`/`awf reply --as KEY` of a Temporal run: the workflow's update
    `agentswf.operator`, answered as the local operator socket answers; None for a local run."""
    run = temporal_run(options)
    if run is None:
        return None
    from ..engine.operator_wire import OperatorResponse
    from ..temporal.messages import OPERATOR_UPDATE

    options.talked_to_temporal = True
    raw = asyncio.run(_ask(run, OPERATOR_UPDATE, request, update=True, by=f"person:{request.key}"))
    return msgspec.convert(raw, OperatorResponse)


def command_pending(options: argparse.Namespace, run: dict[str, Any]) -> int:
    """`awf pending` of a Temporal run: the workflow's query."""
    from ..temporal.messages import PENDING_QUERY

    options.talked_to_temporal = True
    pending = msgspec.convert(asyncio.run(_ask(run, PENDING_QUERY, None, update=False)), list[ApprovalRequest])
    for request in pending:  # as the local `awf pending` lists them
        print(pending_line(request))
    print(f"awf: {len(pending)} call(s) waiting for approval", file=sys.stderr)
    return 0


async def _ask(run: dict[str, Any], name: str, arg: Any, *, update: bool, by: str = "") -> Any:
    """The run's query `name`, or its update sealed as sent `by` a person (refused in an agent's tree),
    sent only where this command encrypts as the run's host does (codec.py: a command with another key)."""
    if update:  # before temporalio is imported: a refusal is said and exits cleanly
        refuse_agents()
        key = run_key(create=False)
    try:
        from temporalio.client import WorkflowQueryFailedError, WorkflowUpdateFailedError
        from temporalio.service import RPCError

        from ..temporal.codec import unreadable_in
        from ..temporal.engine import connect
        from ..temporal.keys import seal
    except ImportError:  # installed without the extra: said, not a traceback
        raise UsageFailure(NEEDS_EXTRA) from None
    try:
        client = await connect(run["address"], run["namespace"])
        handle = client.get_workflow_handle(run["workflow_id"])
        if not update:
            return await handle.query(name)
        run_id = (await handle.describe()).run_id  # the seal is for this run of the workflow only
        await _same_payload_key(client, run["workflow_id"], run_id)
        sealed = seal(key, arg, kind="update", workflow=run["workflow_id"], run=run_id, name=name, by=by)
        return await client.get_workflow_handle(run["workflow_id"], run_id=run_id).execute_update(name, sealed)
    except WorkflowUpdateFailedError as error:  # refused by the workflow: its seal, say, or a payload key
        said = unreadable_in(error.cause) or str(getattr(error.cause, "message", error.cause))
        raise UsageFailure(f"the run refused it: {said}") from None
    except WorkflowQueryFailedError as error:
        raise UsageFailure(f"the run's workflow did not answer: {error.message}") from None
    except RPCError as error:  # Temporal's answer, not the workflow's
        raise UsageFailure(f"Temporal at {run['address']} refused it: {error.message}") from None
    except RuntimeError as error:  # the SDK's connection failure
        raise UsageFailure(f"Temporal at {run['address']} isn't answering: {error}") from None


async def _same_payload_key(client: Client, workflow_id: str, run_id: str) -> None:
    """Raise UsageFailure, before anything is sent to the run, where this command's payload key is not
    the one its host encrypts with (codec.py: a command with another payload key)."""
    from temporalio.common import RawValue

    from ..temporal.codec import command_refused, held_keys, key_id_of, without_codec
    from ..temporal.messages import PENDING_QUERY

    raw = without_codec(client).get_workflow_handle(workflow_id, run_id=run_id)
    answer = await raw.query(PENDING_QUERY, result_type=RawValue)  # the host's, encrypted as it encrypts
    refused = command_refused(key_id_of(answer.payload), held_keys())
    if refused is not None:
        raise UsageFailure(refused)


def settle_record(options: argparse.Namespace) -> None:
    """Before `awf logs` reads a Temporal run whose host is gone: its record, from Temporal, once it ended."""
    run_dir = run_dir_of(options, options.run)
    if not (run_dir / TEMPORAL_FILE).exists() or (run_dir / "output.json").exists():
        return
    try:
        import anyio

        from ..temporal.engine import settle_record as settle
    except ImportError:
        print(f"awf: run {run_dir.name} ran on Temporal; {NEEDS_EXTRA} to read its ending from there", file=sys.stderr)
        return
    options.talked_to_temporal = True
    try:
        print(f"awf: {anyio.run(settle, run_dir)}", file=sys.stderr)
    except (RuntimeError, OSError) as error:  # Temporal not answering
        print(f"awf: Temporal isn't answering for run {run_dir.name}: {error}", file=sys.stderr)


def command_status(options: argparse.Namespace, run: dict[str, Any]) -> int:
    """`awf status RUN` of a Temporal run: the workflow's state, its turns in flight, the calls waiting."""
    options.talked_to_temporal = True
    status = asyncio.run(_status(run))
    if options.json:
        sys.stdout.write(shown_json(status) + "\n")
        return 0
    lines = [f"run on Temporal: workflow {run['workflow_id']} at {run['address']}: {status['state']}"]
    for turn in status["turns"]:
        lines.append(f"  in flight: {turn['activity']} (attempt {turn['attempt']}, {turn['state']}, on {turn['worker'] or 'no worker yet'})")
    for call in status["pending"]:
        lines.append(f"  waiting for approval: {call['call_id']}  {call['agent']} → {call['tool']}")
    for line in status["log"][-STATUS_LOG_LINES:]:
        lines.append(f"  log: {line['message']}")
    for line in lines:  # temporal.json and the workflow's lines can carry what an agent wrote: shown, not obeyed
        print(shown(line))
    return 0


STATUS_LOG_LINES = 5  # the latest lines of the run's log `awf status` shows


async def _status(run: dict[str, Any]) -> dict[str, Any]:
    needs_extra()
    from ..temporal.engine import connect
    from ..temporal.messages import LOG_QUERY, PENDING_QUERY

    try:
        client = await connect(run["address"], run["namespace"])
        handle = client.get_workflow_handle(run["workflow_id"])
        description = await handle.describe()
        running = description.status is not None and description.status.name == "RUNNING"
        turns = [
            {"activity": pending.activity_id, "attempt": pending.attempt, "state": _activity_state(pending.state),
             "worker": pending.last_worker_identity}
            for pending in description.raw_description.pending_activities
        ]
        return {
            "state": description.status.name if description.status is not None else "UNKNOWN",
            "turns": turns,
            "pending": await handle.query(PENDING_QUERY) if running else [],
            "log": await handle.query(LOG_QUERY) if running else [],
        }
    except RuntimeError as error:  # the SDK's connection failure
        raise UsageFailure(f"Temporal at {run['address']} isn't answering: {error}") from None


def _activity_state(state: Any) -> str:
    from temporalio.api.enums.v1 import PendingActivityState

    return PendingActivityState.Name(state).removeprefix("PENDING_ACTIVITY_STATE_").lower()



STOP_WAIT_SECONDS = 30.0  # for the stopped workflow to end (its turns' activities cancelled on their workers)
HOST_RECORD_SECONDS = 5.0  # then, for the process that started the run to write its record, before awf does
TAIL_POLL_SECONDS = 0.5  # how often `awf tail` asks a live Temporal run for what its record gained


def command_stop(options: argparse.Namespace, run: dict[str, Any], run_dir: Path) -> int:
    """`awf stop` of a Temporal run: a person's sealed operator update, answered as the local socket
    answers (the run ends `stopped by NAME: reason`); then the wait for its record, written from
    Temporal here when the process that started the run is gone."""
    from ..engine.operator_wire import OperatorResponse, Stop
    from ..temporal.messages import OPERATOR_UPDATE

    options.talked_to_temporal = True
    stop = Stop(options.reason or "", options.by)
    response = msgspec.convert(asyncio.run(_ask(run, OPERATOR_UPDATE, stop, update=True, by=f"person:{options.by}")),
                               OperatorResponse)
    print(shown(f"awf: {response.message}"), file=sys.stderr)
    if not response.ok:
        return 1
    if not asyncio.run(_ended(run, STOP_WAIT_SECONDS)):
        print(f"awf: run {run_dir.name}'s workflow has not ended within {STOP_WAIT_SECONDS:g}s", file=sys.stderr)
        return 1
    output = run_dir / "output.json"
    deadline = time.monotonic() + HOST_RECORD_SECONDS
    while not output.exists() and time.monotonic() < deadline:
        time.sleep(TAIL_POLL_SECONDS)
    if not output.exists():  # its host is gone: the record from the workflow's result
        options.run = str(run_dir)
        settle_record(options)
    state = read_json(output).get("outcome", "?") if output.exists() else "not recorded"
    print(f"awf: run {run_dir.name} {state}  (awf logs {run_dir.name})", file=sys.stderr)
    return 0 if output.exists() else 1


async def _ended(run: dict[str, Any], seconds: float) -> bool:
    """Whether the run's workflow ended (in any way) within `seconds`."""
    needs_extra()
    from ..temporal.engine import connect

    handle = (await connect(run["address"], run["namespace"])).get_workflow_handle(run["workflow_id"])
    try:
        await asyncio.wait_for(handle.result(), seconds)
    except TimeoutError:
        return False
    except Exception:  # it ended other than an agentswf workflow ends (terminated, say): ended all the same
        return True
    return True


Shown = Callable[[list[tuple[str, dict[str, Any]]]], None]
"""What `awf tail` prints: (log, line) pairs, each line as the run's `<log>.jsonl` holds it, or
("output", the run's ending as its output.json holds it)."""


def command_tail(options: argparse.Namespace, run: dict[str, Any], show: Shown) -> None:
    """`awf tail` of a live Temporal run: the record's lines as the workflow keeps them (the query
    `agentswf.lines`), as they come, then how it ended (its result), or without --follow what is there now."""
    refuse_agents()
    options.talked_to_temporal = True
    asyncio.run(_tail(run, show, follow=options.follow))


async def _tail(run: dict[str, Any], show: Shown, *, follow: bool) -> None:
    needs_extra()
    from temporalio.client import WorkflowFailureError

    from ..temporal.engine import connect
    from ..temporal.messages import LINES_QUERY, RunEnding

    offsets: dict[str, int] = {}

    def news(lines: dict[str, list[Any]], *, past: bool) -> list[tuple[str, dict[str, Any]]]:
        """The lines not shown yet: `lines` all of them (`past`), or only the ones past the offsets."""
        found: list[tuple[str, dict[str, Any]]] = []
        for log, more in lines.items():
            more = more[offsets.get(log, 0):] if past else more
            offsets[log] = offsets.get(log, 0) + len(more)
            found.extend((log, line) for line in more)
        return found

    try:
        client = await connect(run["address"], run["namespace"])
        handle = client.get_workflow_handle(run["workflow_id"])
        described = await handle.describe()
        if described.status is not None and described.status.name == "RUNNING":  # its queries send offsets
            await _same_payload_key(client, run["workflow_id"], described.run_id)
        while True:
            description = await handle.describe()
            if description.status is None or description.status.name != "RUNNING":
                break
            show(news(await handle.query(LINES_QUERY, offsets), past=False))
            if not follow:
                return
            await asyncio.sleep(TAIL_POLL_SECONDS)
        try:
            ending = msgspec.convert(await handle.result(), RunEnding)
        except WorkflowFailureError as error:
            ending = RunEnding(outcome="failed", reason=f"the workflow ended {description.status}: {error.cause}")
    except RuntimeError as error:  # the SDK's connection failure
        raise UsageFailure(f"Temporal at {run['address']} isn't answering: {error}") from None
    kept = ending.lines
    show(news({"turns": kept.turns, "tools": kept.tools, "messages": kept.messages, "log": kept.log}, past=True))
    show([("output", {"outcome": ending.outcome, "reason": ending.reason, "ended_at": time.time()})])
