"""The workflow API: @workflow, args, the return value, failures, stop, parallel, agents, log."""

from __future__ import annotations

import math

import anyio
import anyio.lowlevel
import msgspec
import pytest

import agentswf
from agentswf import DefinitionError, workflow
from agentswf.testing import answer, hang, run_workflow
from agentswf.workflow.durations import to_seconds

from ..harnesses.kit import output, run_wf

pytestmark = pytest.mark.anyio


# @workflow ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", ".hidden", "has space", "slash/y", "x" * 129, 5])
def test_bad_names_are_refused(name):
    with pytest.raises(DefinitionError, match="not a workflow name"):
        workflow(name=name, description="d")


@pytest.mark.parametrize("description", ["", "   ", None])
def test_a_description_is_required(description):
    with pytest.raises(DefinitionError, match="needs a description"):
        workflow(name="w", description=description)


def test_the_function_must_be_async_and_take_wf_or_wf_args():
    with pytest.raises(DefinitionError, match="async function"):
        workflow(name="w", description="d")(lambda wf: None)

    async def none():
        pass

    async def three(wf, args, extra):
        pass

    for fn in (none, three):
        with pytest.raises(DefinitionError, match=r"\(wf\) or \(wf, args\)"):
            workflow(name="w", description="d")(fn)


def test_a_definition_records_its_args_type():
    @workflow(name="w", description="  Does a thing.  ", version="2")
    async def with_args(wf, args: Args):
        pass

    @workflow(name="w", description="d")
    async def without(wf):
        pass

    assert with_args.args_type is Args and with_args.takes_args and with_args.description == "Does a thing."
    assert with_args.version == "2"
    assert not without.takes_args


class Args(msgspec.Struct, forbid_unknown_fields=True):
    n: int
    names: list[str] = []


@workflow(name="args", description="Echoes its args.")
async def echo_args(wf, args: Args) -> dict:
    assert isinstance(args, Args)
    return {"n": args.n * 2, "names": args.names}


async def test_args_are_decoded(tmp_path):
    result = await agentswf.run(echo_args, args={"n": 21, "names": ["a"]}, run_root=tmp_path)
    assert result.outcome == "completed" and result.value == {"n": 42, "names": ["a"]}


@pytest.mark.parametrize("args", [{"n": "x"}, {"n": 1, "extra": 2}, None, [1]])
async def test_args_that_do_not_fit_raise(tmp_path, args):
    with pytest.raises(DefinitionError, match="args of workflow args"):
        await agentswf.run(echo_args, args=args, run_root=tmp_path)


async def test_a_workflow_without_args_refuses_them(tmp_path):
    @workflow(name="w", description="d")
    async def fn(wf):
        return 1

    with pytest.raises(DefinitionError, match="takes no args"):
        await agentswf.run(fn, args={"x": 1}, run_root=tmp_path)
    with pytest.raises(DefinitionError, match="not a workflow"):
        await agentswf.run(fn.fn, run_root=tmp_path)


# How a run ends ---------------------------------------------------------------------------------


async def test_completed_records_the_value(tmp_path):
    async def fn(wf):
        return {"ok": [1, 2.5, None, "x"]}

    result = await run_wf(fn, tmp_path)
    assert result.completed and result.value == {"ok": [1, 2.5, None, "x"]} and result.reason is None
    assert output(result)["outcome"] == "completed" and output(result)["value"] == result.value


@pytest.mark.parametrize("value", [object(), {"f": lambda: 1}, [1, object()], math.nan if False else b"\xff"])
async def test_a_return_value_that_is_not_json_fails_the_run(tmp_path, value):
    async def fn(wf):
        return value

    result = await run_wf(fn, tmp_path)
    if isinstance(value, bytes):  # msgspec encodes bytes as base64: JSON after all
        assert result.completed
        return
    assert result.outcome == "failed" and result.value is None
    assert result.reason.startswith("the workflow's return value is not JSON")
    assert output(result)["outcome"] == "failed"


async def test_a_raising_workflow_fails_naming_the_error(tmp_path):
    async def fn(wf):
        raise RuntimeError("the repo is gone")

    result = await run_wf(fn, tmp_path)
    assert result.outcome == "failed" and result.reason == "RuntimeError: the repo is gone"
    assert "Traceback" not in result.reason
    assert output(result)["reason"] == result.reason


async def test_an_error_group_fails_the_run(tmp_path):
    async def fn(wf):
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: anyio.lowlevel.checkpoint())

            async def boom():
                raise LookupError("inner")

            group.start_soon(boom)

    result = await run_wf(fn, tmp_path)
    assert result.outcome == "failed" and "LookupError: inner" in result.reason


async def test_stop_inside_a_task_group_stops_the_run(tmp_path):
    async def fn(wf):
        async with anyio.create_task_group() as group:
            group.start_soon(anyio.sleep, 1)
            wf.stop("found it")

    result = await run_wf(fn, tmp_path)
    assert (result.outcome, result.reason) == ("stopped", "found it")


async def test_a_long_reason_is_cut(tmp_path):
    async def fn(wf):
        raise ValueError("x" * 10_000)

    result = await run_wf(fn, tmp_path)
    assert result.outcome == "failed" and len(result.reason) == 4000 and result.reason.endswith("…")


async def test_stop_ends_the_run_stopped(tmp_path):
    async def fn(wf):
        wf.stop("nothing to review")

    result = await run_wf(fn, tmp_path)
    assert (result.outcome, result.reason, result.value) == ("stopped", "nothing to review", None)
    assert output(result)["outcome"] == "stopped"


async def test_a_caught_stop_fails_the_run(tmp_path):
    async def fn(wf):
        try:
            wf.stop("please")
        except agentswf.StopRequested:
            pass
        return "carried on"

    result = await run_wf(fn, tmp_path)
    assert result.outcome == "failed" and result.reason == "stop was caught: please" and result.value is None


@pytest.mark.parametrize("caught", [agentswf.WorkflowError, agentswf.AgentswfError, Exception])
async def test_a_stop_is_not_caught_as_an_error(tmp_path, caught):
    """Like trio's Cancelled, a stop is a BaseException: `except WorkflowError` (or any error)
    around a call that stops lets it through, and the run ends stopped."""

    async def fn(wf):
        try:
            wf.stop("enough")
        except caught:
            return "swallowed"

    result = await run_wf(fn, tmp_path)
    assert (result.outcome, result.reason, result.value) == ("stopped", "enough", None)


async def test_a_stop_inside_race_and_select_stops_the_run(tmp_path):
    async def stops(wf):
        wf.stop("found it")

    async def fn(wf):
        await wf.race(stops(wf), anyio.sleep(1))

    async def selects(wf):
        await wf.select(first=stops(wf), second=anyio.sleep(1))

    for body in (fn, selects):
        result = await run_wf(body, tmp_path)
        assert (result.outcome, result.reason) == ("stopped", "found it")


async def test_stop_inside_parallel_stops_the_run(tmp_path):
    async def fn(wf):
        async def item(i):
            if i == 1:
                wf.stop("enough")
            await anyio.sleep(1)

        await wf.parallel([0, 1, 2], item)

    result = await run_wf(fn, tmp_path)
    assert (result.outcome, result.reason) == ("stopped", "enough")


async def test_the_run_timeout(tmp_path):
    async def fn(wf):
        await anyio.sleep(10)

    result = await run_wf(fn, tmp_path, timeout="0.2s")
    assert result.outcome == "timed-out" and result.reason == "the run's timeout of 0.2s passed"
    assert output(result)["outcome"] == "timed-out"


async def test_a_bad_run_timeout_raises(tmp_path):
    async def fn(wf):
        return 1

    with pytest.raises(DefinitionError):
        await run_wf(fn, tmp_path, timeout="soon")


async def test_cancelling_the_caller_records_cancelled(tmp_path):
    started = anyio.Event()

    async def fn(wf):
        started.set()
        await anyio.sleep(10)

    definition = workflow(name="t", description="d")(fn)
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: agentswf.run(definition, run_root=tmp_path / "runs"))
        with anyio.fail_after(10):
            await started.wait()
        group.cancel_scope.cancel()  # the caller's scope, cancelled mid-run
    [run_dir] = (tmp_path / "runs" / "t").iterdir()
    assert msgspec.json.decode((run_dir / "output.json").read_bytes())["outcome"] == "cancelled"


# parallel ----------------------------------------------------------------------------------------


async def test_parallel_results_are_in_item_order(tmp_path):
    async def fn(wf):
        async def item(i):
            await anyio.sleep((5 - i) * 0.02)
            return i * 10

        return await wf.parallel(range(5), item, label="tens")

    result = await run_wf(fn, tmp_path)
    assert result.value == [0, 10, 20, 30, 40]


async def test_parallel_of_nothing(tmp_path):
    async def fn(wf):
        return await wf.parallel([], lambda item: anyio.lowlevel.checkpoint())

    assert (await run_wf(fn, tmp_path)).value == []


async def test_parallel_fails_fast_with_the_first_error_itself(tmp_path):
    async def fn(wf):
        finished = []

        async def item(i):
            if i == 0:
                await anyio.sleep(0.02)
                raise ValueError("first")
            if i == 1:
                await anyio.sleep(0.05)
                raise KeyError("second")
            await anyio.sleep(5)
            finished.append(i)

        try:
            await wf.parallel([0, 1, 2], item)
        except BaseException as error:
            return [type(error).__name__, str(error), finished, isinstance(error, BaseExceptionGroup)]

    result = await run_wf(fn, tmp_path)
    assert result.value == ["ValueError", "first", [], False]


async def test_parallel_respects_its_concurrency(tmp_path):
    async def fn(wf):
        running = peak = 0

        async def item(i):
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await anyio.sleep(0.02)
            running -= 1
            return i

        values = await wf.parallel(range(7), item, concurrency=2)
        return [values, peak]

    assert (await run_wf(fn, tmp_path)).value == [list(range(7)), 2]


async def test_parallel_without_a_limit_runs_all_at_once(tmp_path):
    async def fn(wf):
        running = peak = 0

        async def item(i):
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await anyio.sleep(0.02)
            running -= 1

        await wf.parallel(range(6), item)
        return peak

    assert (await run_wf(fn, tmp_path)).value == 6


@pytest.mark.parametrize("concurrency", [0, -1, 1.5, True, "2"])
async def test_parallel_concurrency_must_be_a_whole_number(tmp_path, concurrency):
    async def fn(wf):
        with pytest.raises(DefinitionError, match="concurrency"):
            await wf.parallel([1], lambda item: anyio.lowlevel.checkpoint(), concurrency=concurrency)
        return "raised"

    assert (await run_wf(fn, tmp_path)).value == "raised"


# Agents --------------------------------------------------------------------------------------


async def test_reopening_with_the_same_spec_returns_the_same_agent(tmp_path):
    async def fn(wf):
        a = await wf.agents.open("a", runtime="shell:true", instructions="Be brief.")
        again = await wf.agents.open("a", runtime="shell:true", instructions="Be brief.")
        errors = []
        for kwargs in (
            {"runtime": "shell:false", "instructions": "Be brief."},
            {"runtime": "shell:true", "instructions": "Be long."},
            {"runtime": "shell:true", "instructions": "Be brief.", "cwd": "sub"},
        ):
            (tmp_path / "sub").mkdir(exist_ok=True)
            try:
                await wf.agents.open("a", **kwargs)
            except DefinitionError as error:
                errors.append(str(error))
        return [a is again, errors]

    same, errors = (await run_wf(fn, tmp_path)).value
    assert same
    assert [e.rsplit(" ", 1)[-1] for e in errors] == ["runtime", "instructions", "cwd"]


@pytest.mark.parametrize(
    "key, runtime, words",
    [
        ("has space", "shell:true", "not an agent key"),
        ("", "shell:true", "not an agent key"),
        ("a", "gpt", "unknown runtime"),
        ("a", "shell:  ", "needs a command line"),
        ("a", 5, "alias string or a Runtime"),
    ],
)
async def test_bad_agents_fail_at_open(tmp_path, key, runtime, words):
    async def fn(wf):
        with pytest.raises(DefinitionError, match=words):
            await wf.agents.open(key, runtime=runtime)
        return "raised"

    assert (await run_wf(fn, tmp_path)).value == "raised"


async def test_a_closed_agent_refuses_work_and_its_key(tmp_path):
    async def fn(wf):
        a = await wf.agents.open("a", runtime="shell:true")
        await a.close()
        errors = []
        try:
            await a.run("More.")
        except agentswf.AgentClosed as error:
            errors.append(type(error).__name__)
        try:
            await wf.agents.open("a", runtime="shell:true")
        except DefinitionError as error:
            errors.append(type(error).__name__)
        return errors

    assert (await run_wf(fn, tmp_path)).value == ["AgentClosed", "DefinitionError"]


async def test_bad_turn_arguments_raise(tmp_path):
    async def fn(wf):
        a = await wf.agents.open("a", runtime="shell:true")
        raised = []
        for kwargs in ({"prompt": "  "}, {"prompt": "x", "timeout": "soon"}, {"prompt": "x", "timeout": 0},
                       {"prompt": "x", "timeout": 1, "deadline": 2.0}, {"prompt": "x", "schema": object()}):
            try:
                await a.run(**kwargs)
            except DefinitionError:
                raised.append(True)
        return raised

    assert (await run_wf(fn, tmp_path)).value == [True] * 5


async def test_operations_on_one_agent_run_one_at_a_time_in_order(tmp_path):
    played = []

    async def script(turn):
        played.append(("start", turn.n, turn.prompt.split("\n")[0]))
        await anyio.sleep(0.03)
        played.append(("end", turn.n))
        return f"done {turn.n}"

    @workflow(name="order", description="Three turns asked at once.")
    async def fn(wf):
        agent = await wf.agents.open("a", runtime="shell:true")
        values = {}

        async def ask(i):
            values[i] = (await agent.run(f"Task {i}.", timeout=10)).value

        async with anyio.create_task_group() as group:
            for i in (1, 2, 3):
                group.start_soon(ask, i)
                await anyio.sleep(0.005)  # asked in this order
        return [values[i] for i in (1, 2, 3)]

    run = await run_workflow(fn, agents={"a": answer(script)}, run_root=tmp_path)
    assert run.value == ["done 1", "done 2", "done 3"]
    assert played == [
        ("start", 1, "Task 1."), ("end", 1),
        ("start", 2, "Task 2."), ("end", 2),
        ("start", 3, "Task 3."), ("end", 3),
    ]


async def test_a_turn_id_returns_the_earlier_turn(tmp_path):
    @workflow(name="ids", description="The same turn id twice.")
    async def fn(wf):
        agent = await wf.agents.open("a", runtime="shell:true")
        first = await agent.run("Task.", id="t1")
        again = await agent.run("Task.", id="t1")
        try:
            await agent.run("Other task.", id="t1")
        except DefinitionError:
            return [first.call_id == again.call_id, first.value]

    run = await run_workflow(fn, agents={"a": [answer("once")]}, run_root=tmp_path)
    assert run.value == [True, "once"]


async def test_log_lines_are_recorded(tmp_path):
    async def fn(wf):
        wf.log("found", count=3, where="src", thing=object)
        return 1

    result = await run_wf(fn, tmp_path)
    [line] = [r for r in msgspec.json.decode(b"[" + b",".join((result.run_dir / "log.jsonl").read_bytes().splitlines()) + b"]")]
    assert line["message"] == "found"
    assert line["fields"]["count"] == 3 and line["fields"]["where"] == "src"
    assert line["fields"]["thing"] == repr(object)


async def test_the_run_timeout_cancels_a_hanging_scripted_turn(tmp_path):
    @workflow(name="hang", description="Hangs.")
    async def fn(wf):
        agent = await wf.agents.open("a", runtime="shell:true")
        await agent.run("Work.")

    run = await run_workflow(fn, agents={"a": hang()}, run_root=tmp_path, timeout=0.2)
    assert run.outcome == "timed-out"
    assert [t["outcome"]["kind"] for t in run.turns] in (["cancelled"], ["timed-out"])


# Durations -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, seconds",
    [("90s", 90), ("90", 90), ("1.5m", 90), ("10m", 600), ("2h", 7200), ("1d", 86400), (" 30s ", 30), (2, 2.0), (0.25, 0.25)],
)
def test_durations(value, seconds):
    assert to_seconds(value) == seconds


@pytest.mark.parametrize(
    "value", ["", "0", "s", "0s", "-1s", "+1s", "1e3s", "1.s", ".5s", "1,5m", "1 m", "10x", "١s", 0, -1, math.inf,
              math.nan, True, None, [1]]
)
def test_bad_durations_raise(value):
    with pytest.raises(DefinitionError, match="like '90', '90s'"):
        to_seconds(value, what="timeout")


@pytest.mark.parametrize(("prompt", "said"), [(123, "prompt is text (a str), not int"), ("  ", "needs a prompt")])
async def test_a_turn_without_a_text_prompt_is_refused_saying_what_it_got(tmp_path, prompt, said):
    async def fn(wf):
        agent = await wf.agents.open("a", runtime="shell:true")
        await agent.run(prompt)

    result = await run_wf(fn, tmp_path)
    assert result.outcome == "failed" and said in result.reason


async def test_options_another_engine_lacks_are_refused_naming_them_and_their_flags(tmp_path):
    class Elsewhere:  # an engine that is never reached: the refusal comes first
        async def run(self, definition, *, args, run_root, cwd, timeout, budget):
            raise AssertionError("not to be run")

    @workflow(name="w", description="d")
    async def w(wf):
        return None

    with pytest.raises(DefinitionError, match=r"not on Elsewhere yet: env, trace \(--trace\); run locally"):
        await agentswf.run(w, engine=Elsewhere(), env={"A": "b"}, trace=True, run_root=tmp_path)
