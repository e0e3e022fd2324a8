"""`RunOptions`: what `agentswf.run` is asked, refused whole before anything is read, written or started."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentswf
from agentswf import Budget, ContinueFrom, DefinitionError, workflow
from agentswf.sandbox.spec import RunSandboxFile
from agentswf.workflow.run_options import DEFAULT_RUN_TIMEOUT_SECONDS, FLAGS, LOCAL_ONLY, RunOptions


class Elsewhere:
    """An engine that is never reached: what it can't do is refused by the options first."""

    async def run(self, definition: Any, **options: Any) -> Any:
        raise AssertionError("not to be run")


REFUSALS: list[tuple[dict[str, Any], str | None]] = [
    ({}, None),
    ({"continue_from": "r", "rerun": "review"}, None),
    ({"from_stage": "fix", "values": {"review": 1}}, None),
    ({"from_stage": "fix"}, None),  # a look-ahead
    ({"timeout": "45m", "budget": Budget(turns=2), "sandbox": RunSandboxFile(read=("/src",))}, None),
    ({"continue_from": "no-such-run", "replay": "/no/such/record"}, None),  # those are read by LocalRun.start
    ({"rerun": "review"}, "rerun re-runs a stage of a run being continued: give continue_from too"),
    ({"continue_from": "r", "from_stage": "fix"}, "from_stage starts a new run at a stage"),
    ({"values": {"review": 1}}, "values are the stages' before from_stage: give from_stage too"),
    ({"from_stage": "Fix It"}, "from_stage 'Fix It' is not a stage's name"),
    ({"from_stage": "fix", "values": {"Review": 1}}, "values: 'Review' is not a stage's name"),
    ({"from_stage": "fix", "values": ["review"]}, "values must be an object of stage values"),
    ({"timeout": "soon"}, "the run's timeout .*like '90', '90s'"),
    ({"timeout": 0}, "the run's timeout .*like '90', '90s'"),
    ({"budget": {"turns": 2}}, "budget is a Budget, not dict"),
    ({"sandbox": {"read": ["/src"]}}, "sandbox is a RunSandboxFile, not dict"),
    ({"engine": Elsewhere(), "args": {"a": 1}, "run_root": "r", "cwd": "c", "timeout": "1m", "budget": Budget(turns=1)}, None),
    ({"engine": Elsewhere(), "trace": False}, None),
    ({"engine": Elsewhere(), "env": {}}, r"^not on Elsewhere yet: env; run locally for them$"),
    ({"engine": Elsewhere(), "replay": "r", "trace": True}, r"not on Elsewhere yet: replay \(--replay\), trace \(--trace\)"),
    ({"engine": Elsewhere(), "continue_from": "r", "rerun": "s"}, None),  # a run of its own, continued there
    ({"engine": Elsewhere(), "continue_from": ContinueFrom("r", "writer", 2)}, r"^not on Elsewhere yet: continue_from=ContinueFrom"),
    ({"engine": Elsewhere(), "timeout": "soon"}, "the run's timeout"),
    ({"continue_from": ContinueFrom("r", "writer", 2)}, None),  # a fork: its record is read by LocalRun.start
    ({"continue_from": ContinueFrom(Path("runs/w/r"), "a:b", 1, settings={"a:b": {"model": "m", "effort": "high"}},
                                    strict=False), "timeout": "1m", "sandbox": RunSandboxFile()}, None),
    ({"continue_from": 3}, "continue_from is a run's id or directory, or a ContinueFrom to fork one; not int"),
    ({"continue_from": ContinueFrom("", "writer", 2)}, "continue_from's run is a run's id or record directory, not ''"),
    ({"continue_from": ContinueFrom("r", "a writer", 2)}, "'a writer' is not an agent key"),
    ({"continue_from": ContinueFrom("r", "writer", 0)}, "continue_from's turn is agent writer's turn's number, 1 for its first; not 0"),
    ({"continue_from": ContinueFrom("r", "writer", "2")}, "continue_from's turn .* not '2'"),
    ({"continue_from": ContinueFrom("r", "writer", True)}, "continue_from's turn .* not True"),
    ({"continue_from": ContinueFrom("r", "writer", 2, settings={"writer": {"temperature": "1"}})},
     "settings of writer: give model= and/or effort=, each a name; not temperature"),
    ({"continue_from": ContinueFrom("r", "writer", 2, settings={"writer": {}})}, "settings of writer: .*not an empty one"),
    ({"continue_from": ContinueFrom("r", "writer", 2, settings={"writer": {"model": ""}})}, "settings of writer: give model="),
    ({"continue_from": ContinueFrom("r", "writer", 2, settings={"writer": "opus"})}, "settings of writer: .*not nothing"),
    ({"continue_from": ContinueFrom("r", "writer", 2, settings=["writer"])}, "settings are by agent key"),
    ({"continue_from": ContinueFrom("r", "writer", 2, settings={"a b": {"model": "m"}})}, "'a b' is not an agent key"),
    ({"continue_from": ContinueFrom("r", "writer", 2, strict="no")}, "strict is True or False, not 'no'"),
    ({"continue_from": ContinueFrom("r", "writer", 2), "args": {"n": 1}}, "a fork .* takes no args$"),
    ({"continue_from": ContinueFrom("r", "writer", 2), "rerun": "fix", "replay": "rec"}, "a fork .* takes no rerun or replay$"),
    ({"continue_from": ContinueFrom("r", "writer", 2), "from_stage": "fix"}, "a fork .* takes no from_stage$"),
    ({"engine": Elsewhere(), "continue_from": ContinueFrom("r", "writer", 2)}, "not on Elsewhere yet: continue_from"),
]


@pytest.mark.parametrize(("given_options", "refusal"), REFUSALS)
def test_options_are_refused_as_the_table_says(given_options, refusal):
    if refusal is None:
        RunOptions(**given_options)
    else:
        with pytest.raises(DefinitionError, match=refusal):
            RunOptions(**given_options)


def test_the_table_is_checked_without_reading_or_writing_anything(tmp_path):
    """Every row of the table, under an audit hook that fails on a file opened, a directory listed,
    a process started or a socket made: the options' rules are pure."""
    script = textwrap.dedent(
        """
        import sys
        from tests.workflow.test_run_options import REFUSALS, RunOptions
        from agentswf.errors import DefinitionError

        IO = ("open", "os.listdir", "os.scandir", "os.mkdir", "os.remove", "subprocess.Popen", "socket.", "os.system")
        checking = False

        def hook(event, args):
            if checking and event.startswith(IO):
                raise AssertionError(f"I/O while checking the options: {event} {args}")

        sys.addaudithook(hook)
        for options, refusal in REFUSALS:
            checking = True
            try:
                RunOptions(**options)
            except DefinitionError:
                pass
            finally:
                checking = False
        print("checked", len(REFUSALS))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path.parent,
                          env={"PYTHONPATH": str(__import__("pathlib").Path(__file__).parents[2])})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"checked {len(REFUSALS)}"


LOCAL_VALUES: dict[str, Any] = {
    "env": {"HOME": "/home/a"},
    "harnesses": lambda key, runtime: None,
    "replay": "/runs/w/1",
    "continue_from": "1",
    "rerun": "review",
    "from_stage": "fix",
    "values": {"review": 1},
    "trace": True,
    "sandbox": RunSandboxFile(),
    "forked_from": {"run_id": "1", "agent": "a", "turn": 2},
}


@given(st.sets(st.sampled_from(LOCAL_ONLY)))
def test_an_engine_refuses_exactly_the_local_options_given_naming_each_with_its_flag(names):
    options = {name: LOCAL_VALUES[name] for name in names}
    if not names:
        assert RunOptions(engine=Elsewhere(), **options).engine is not None
        return
    with pytest.raises(DefinitionError) as refused:
        RunOptions(engine=Elsewhere(), **options)
    said = [f"{name} ({FLAGS[name]})" if name in FLAGS else name for name in LOCAL_ONLY if name in names]
    assert str(refused.value) == f"not on Elsewhere yet: {', '.join(said)}; run locally for them"


@given(st.one_of(st.none(), st.floats(min_value=0.001, max_value=1e6), st.integers(min_value=1, max_value=10**6)))
def test_the_runs_time_is_its_timeout_in_seconds_or_30_minutes(timeout):
    seconds = RunOptions(timeout=timeout).seconds
    assert seconds == (DEFAULT_RUN_TIMEOUT_SECONDS if timeout is None else timeout)


STAGE_NAMES = st.from_regex(r"\A[a-z][a-z0-9-]{0,20}\Z")
NOT_STAGE_NAMES = st.one_of(st.just(""), st.from_regex(r"\A[0-9-]"), st.from_regex(r"[A-Z ./_]"))


@given(st.sampled_from(["rerun", "from_stage"]), st.one_of(STAGE_NAMES.map(lambda n: (n, True)),
                                                           NOT_STAGE_NAMES.map(lambda n: (n, False))))  # fmt: skip
def test_a_stage_option_names_a_stage_or_is_refused(option, name_and_fit):
    name, fits = name_and_fit
    given_options = {option: name, "continue_from": "r"} if option == "rerun" else {option: name}
    if fits:
        RunOptions(**given_options)
    else:
        with pytest.raises(DefinitionError, match="is not a stage's name"):
            RunOptions(**given_options)


@workflow(name="w", description="d")
async def w(wf):
    return "ran"


async def test_options_that_cant_run_are_refused_before_anything_is_recorded(tmp_path):
    runs = tmp_path / "runs"
    for options in ({"budget": {"turns": 2}}, {"continue_from": "no-such-run", "from_stage": "fix"}):
        with pytest.raises(DefinitionError, match="budget is a Budget|from_stage starts a new run"):
            await agentswf.run(w, run_root=runs, cwd=tmp_path, **options)
    assert not runs.exists()


async def test_an_engine_is_not_reached_with_a_timeout_that_is_no_duration(tmp_path):
    with pytest.raises(DefinitionError, match="the run's timeout"):
        await agentswf.run(w, engine=Elsewhere(), timeout="soon", run_root=tmp_path)
