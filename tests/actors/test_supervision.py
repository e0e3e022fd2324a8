"""Crashes, restarts, stopping, cancellation, deferred replies and background tasks."""

from __future__ import annotations

import anyio
import msgspec
import pytest
import structlog

from agentswf.actors import Actor, Restart, Supervisor, handler
from agentswf.errors import ActorCrashed, ActorStopped, AskTimeout

from .kit import Add, Boom, Counter, Get, Hold

pytestmark = pytest.mark.anyio


async def test_a_handler_raising_on_an_ask_fails_that_ask_and_the_actor_goes_on() -> None:
    log: list[str] = []
    async with Supervisor("t") as sup:
        ref = sup.spawn(Counter, 0, log, capacity=4)
        await ref.ask(Add(2))
        with pytest.raises(ActorCrashed, match="raised handling Boom") as raised:
            await ref.ask(Boom())
        assert isinstance(raised.value.__cause__, ValueError)
        assert await ref.ask(Add(1)) == 3  # the same instance, its state kept
        stats = ref.statistics()
        assert (stats.failed, stats.restarts, ref.alive) == (1, 0, True)
    assert log == ["start Counter", "stop Counter"]


async def test_a_raise_on_an_abandoned_ask_is_logged_and_the_actor_goes_on() -> None:
    release = anyio.Event()

    class Late(Actor):
        @handler
        async def hold(self, msg: Hold) -> None:
            await msg.release.wait()
            raise ValueError("late")

        @handler
        def get(self, msg: Get) -> str:
            return "here"

    with structlog.testing.capture_logs() as logs:
        async with Supervisor("t") as sup:
            ref = sup.spawn(Late, capacity=4)
            with pytest.raises(AskTimeout):
                await ref.ask(Hold(release), timeout=0.02)
            release.set()
            assert await ref.ask(Get()) == "here"
    assert [entry["message_type"] for entry in logs if "already answered or given up" in entry["event"]] == ["Hold"]


async def test_a_crash_on_a_tell_escalates_as_the_original_error() -> None:
    log: list[str] = []
    with pytest.raises(ValueError, match="boom") as caught:
        async with Supervisor("t") as sup:
            sibling = sup.spawn(Counter, 0, log, name="sibling", capacity=4)
            ref = sup.spawn(Counter, 0, log, name="crasher", capacity=4)
            await sibling.ask(Get())
            await ref.tell(Boom())
            await anyio.sleep(1)  # cancelled by the escalation
            pytest.fail("the supervisor's owner was not cancelled")
    assert not isinstance(caught.value, BaseExceptionGroup)
    assert not sibling.alive and not ref.alive
    assert "stop sibling" in log and "stop crasher" in log  # on_stop runs after a crash and on cancel


async def test_a_crash_fails_queued_asks_promptly() -> None:
    release = anyio.Event()
    entered = anyio.Event()
    errors: list[BaseException] = []

    async def ask_later(ref) -> None:
        try:
            await ref.ask(Get())
        except ActorStopped as exc:
            errors.append(exc)

    with pytest.raises(ExceptionGroup) as caught:
        async with anyio.create_task_group() as askers:
            async with Supervisor("t") as sup:
                ref = sup.spawn(Counter, capacity=4)
                await ref.tell(Hold(release, entered))
                await entered.wait()
                await ref.tell(Boom())
                askers.start_soon(ask_later, ref)
                await anyio.sleep(0.01)
                release.set()
                await anyio.sleep(1)
    assert caught.group_contains(ValueError)
    assert len(errors) == 1 and isinstance(errors[0].__cause__, ValueError)


async def test_transient_restarts_within_budget_then_escalates() -> None:
    log: list[str] = []
    with pytest.raises(ValueError):
        async with Supervisor("t") as sup:
            ref = sup.spawn(Counter, 5, log, capacity=8, restart=Restart.TRANSIENT, max_restarts=2, restart_period=10)
            await ref.tell(Add(1))
            for _ in range(2):
                await ref.tell(Boom())
                await ref.tell(Add(1))  # queued behind the crash: survives the restart
                assert await ref.ask(Get()) == 6  # a new instance from the same args, then the Add
                assert ref.alive
            assert ref.statistics().restarts == 2
            assert ref.statistics().failed == 2
            await ref.tell(Boom())
            await anyio.sleep(1)
    assert log.count("start Counter") == 3


async def test_restarts_outside_the_period_do_not_count() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Counter, capacity=4, restart=Restart.PERMANENT, max_restarts=1, restart_period=0.02)
        for _ in range(3):
            await ref.tell(Boom())
            assert await ref.ask(Get()) == 0
            await anyio.sleep(0.03)
        assert ref.statistics().restarts == 3


class Quitter(Actor):
    """Stops itself on Quit: a normal exit."""

    class Quit(msgspec.Struct):
        pass

    @handler
    def quit(self, msg: Quit) -> None:
        self.stop()

    @handler
    def get(self, msg: Get) -> str:
        return "here"


async def test_permanent_restarts_after_a_normal_exit_transient_does_not() -> None:
    async with Supervisor("t") as sup:
        permanent = sup.spawn(Quitter, capacity=4, restart=Restart.PERMANENT)
        transient = sup.spawn(Quitter, capacity=4, restart=Restart.TRANSIENT)
        await permanent.tell(Quitter.Quit())
        assert await permanent.ask(Get()) == "here"
        assert permanent.statistics().restarts == 1
        await transient.tell(Quitter.Quit())
        with pytest.raises(ActorStopped):
            await transient.ask(Get())
        assert not transient.alive and transient.error is None


async def test_temporary_crash_is_recorded_not_escalated() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Counter, capacity=4, restart=Restart.TEMPORARY)
        await ref.tell(Boom())
        with pytest.raises(ActorStopped):
            await ref.ask(Get())
        assert isinstance(ref.error, ValueError)
        assert ref.statistics().restarts == 0
        assert sup.statistics().children == 0


async def test_stop_runs_in_reverse_start_order_on_exit() -> None:
    log: list[str] = []
    async with Supervisor("t") as sup:
        for name in "abc":
            sup.spawn(Counter, 0, log, name=name, capacity=1)
        await anyio.sleep(0.01)
    assert [entry for entry in log if entry.startswith("stop")] == ["stop c", "stop b", "stop a"]
    assert sup.statistics().children == 0


STOP_BEGUN_SECONDS = 1.0  # for a queued ask to be failed once stop begins (a loaded machine's schedule)


async def test_stop_lets_the_current_message_finish_within_the_grace() -> None:
    release = anyio.Event()
    entered = anyio.Event()
    async with Supervisor("t", stop_grace=1.0) as sup:
        ref = sup.spawn(Counter, capacity=4)
        async with anyio.create_task_group() as tg:
            answers: list[str] = []

            async def hold() -> None:
                answers.append(await ref.ask(Hold(release, entered)))

            tg.start_soon(hold)
            await entered.wait()
            queued_error: list[BaseException] = []

            async def queued() -> None:
                try:
                    await ref.ask(Get())
                except ActorStopped as exc:
                    queued_error.append(exc)

            tg.start_soon(queued)
            await anyio.sleep(0.01)
            async with anyio.create_task_group() as stopper:
                stopper.start_soon(ref.stop)
                with anyio.fail_after(STOP_BEGUN_SECONDS):  # while the held message still runs
                    while not queued_error:
                        await anyio.sleep(0.001)
                assert not answers, "a queued ask fails as soon as stop begins, before the current one ends"
                release.set()
        assert answers == ["released"]
        assert not ref.alive


async def test_stop_cancels_a_handler_that_outlives_the_grace() -> None:
    log: list[str] = []
    async with Supervisor("t", stop_grace=0.02) as sup:
        ref = sup.spawn(Counter, 0, log, capacity=4)
        errors: list[BaseException] = []

        async def hold() -> None:
            try:
                await ref.ask(Hold(anyio.Event()))
            except ActorStopped as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(hold)
            await anyio.sleep(0.01)
            with anyio.fail_after(1):
                await ref.stop()
        assert len(errors) == 1
        assert log[-1] == "stop Counter"  # on_stop still ran
        assert [d.reason for d in sup.dead_letters] == ["interrupted when the actor stopped"]


async def test_cancelling_the_supervisor_mid_handler_fails_in_flight_and_queued_asks() -> None:
    errors: list[BaseException] = []

    async def ask(ref, msg) -> None:
        try:
            await ref.ask(msg)
        except ActorStopped as exc:
            errors.append(exc)

    async with anyio.create_task_group() as askers:
        with anyio.CancelScope() as scope:
            async with Supervisor("t") as sup:
                ref = sup.spawn(Counter, capacity=4)
                askers.start_soon(ask, ref, Hold(anyio.Event()))
                await anyio.sleep(0.01)
                askers.start_soon(ask, ref, Get())
                await anyio.sleep(0.01)
                scope.cancel()
                await anyio.sleep(1)
        with anyio.fail_after(1):
            while len(errors) < 2:
                await anyio.sleep(0.001)
    assert len(errors) == 2 and not ref.alive


async def test_ask_to_a_stopped_actor_fails_at_once() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Counter, capacity=4)
        await ref.stop()
        with anyio.fail_after(0.5), pytest.raises(ActorStopped, match="stopped"):
            await ref.ask(Get(), timeout=None)
        await ref.stop()  # stopping twice is harmless


class Delayed(msgspec.Struct):
    pass


class Answer(msgspec.Struct):
    value: int


class Deferrer(Actor):
    """Answers Delayed asks later, when an Answer arrives: handling goes on meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.pending = []

    @handler
    def delayed(self, msg: Delayed) -> str:
        self.pending.append(self.defer())
        return "ignored"

    @handler
    def answer(self, msg: Answer) -> int:
        for reply in self.pending:
            reply.set(msg.value)
        self.pending.clear()
        self.defer().set(-1)  # no-op while handling a tell
        return msg.value

    @handler
    def boom(self, msg: Boom) -> None:
        raise ValueError("boom")


async def test_a_deferred_reply_is_answered_later() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Deferrer, capacity=4)
        async with anyio.create_task_group() as tg:
            results: list[int] = []

            async def ask() -> None:
                results.append(await ref.ask(Delayed(), timeout=1))

            tg.start_soon(ask)
            await anyio.sleep(0.01)
            await ref.tell(Answer(7))
        assert results == [7]


async def test_a_pending_deferred_reply_fails_when_the_actor_stops_or_crashes() -> None:
    errors: list[BaseException] = []

    async def ask(ref) -> None:
        try:
            await ref.ask(Delayed())
        except (ActorStopped, ActorCrashed) as exc:
            errors.append(exc)

    async with Supervisor("t") as sup:
        ref = sup.spawn(Deferrer, capacity=4)
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, ref)
            await anyio.sleep(0.01)
            await ref.stop()
    assert [type(e) for e in errors] == [ActorStopped]

    errors.clear()
    with pytest.raises(ExceptionGroup) as caught:
        async with anyio.create_task_group() as askers:
            async with Supervisor("t") as sup:
                ref = sup.spawn(Deferrer, capacity=4)
                askers.start_soon(ask, ref)
                await anyio.sleep(0.01)
                await ref.tell(Boom())
                await anyio.sleep(1)
    assert caught.group_contains(ValueError)
    assert [type(e) for e in errors] == [ActorCrashed]
    assert isinstance(errors[0].__cause__, ValueError)


class Tick(msgspec.Struct):
    n: int


class Background(Actor):
    """Starts a task that tells the actor itself; a second kind of task crashes it."""

    def __init__(self, ticks: list[int], crash: bool) -> None:
        super().__init__()
        self.ticks = ticks
        self.crash = crash

    async def on_start(self) -> None:
        self.start_soon(self._work)

    async def _work(self) -> None:
        await self.ref.tell(Tick(1))
        if self.crash:
            raise RuntimeError("background failed")
        await anyio.sleep_forever()  # cancelled when the actor stops

    @handler
    def tick(self, msg: Tick) -> None:
        self.ticks.append(msg.n)


async def test_background_tasks_end_with_the_actor_and_their_errors_crash_it() -> None:
    ticks: list[int] = []
    async with Supervisor("t") as sup:
        ref = sup.spawn(Background, ticks, False, capacity=4)
        await anyio.sleep(0.01)
        assert ticks == [1]
        with anyio.fail_after(1):
            await ref.stop()

    with pytest.raises(RuntimeError, match="background failed"):
        async with Supervisor("t") as sup:
            sup.spawn(Background, ticks, True, capacity=4)
            await anyio.sleep(1)


class SelfStop(msgspec.Struct):
    pass


class Stopper(Actor):
    @handler
    async def go(self, msg: SelfStop) -> str:
        await self.ref.stop()
        return "bye"


async def test_an_actor_stopping_itself_through_its_ref_does_not_wait_for_itself() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Stopper, capacity=2)
        with anyio.fail_after(1):
            assert await ref.ask(SelfStop()) == "bye"
        await anyio.sleep(0.01)
        assert not ref.alive


async def test_body_error_and_child_crash_are_both_raised() -> None:
    with pytest.raises(BaseExceptionGroup) as caught:
        async with Supervisor("t") as sup:
            ref = sup.spawn(Counter, capacity=4)
            await ref.tell(Boom())
            try:
                await anyio.sleep(1)
            finally:
                raise KeyError("body")
    assert {type(e) for e in caught.value.exceptions} == {ValueError, KeyError}


async def test_nothing_leaks_a_task() -> None:
    before = len(anyio.get_running_tasks())
    ticks: list[int] = []
    async with Supervisor("t", stop_grace=0.02) as sup:
        sup.spawn(Background, ticks, False, capacity=4)
        temporary = sup.spawn(Counter, capacity=4, restart=Restart.TEMPORARY)
        transient = sup.spawn(Counter, capacity=4, restart=Restart.TRANSIENT)
        await temporary.tell(Boom())
        await transient.tell(Boom())
        with pytest.raises(AskTimeout):
            await transient.ask(Hold(anyio.Event()), timeout=0.01)
        await anyio.sleep(0.01)
        assert len(anyio.get_running_tasks()) > before
    assert len(anyio.get_running_tasks()) == before
    assert not transient._cell._deferred and transient._cell._current is None


class BadStop(Actor):
    @handler
    def get(self, msg: Get) -> None: ...

    async def on_stop(self) -> None:
        raise RuntimeError("on_stop failed")


async def test_an_error_while_stopping_on_exit_reaches_the_owner() -> None:
    log: list[str] = []
    with pytest.raises(RuntimeError, match="on_stop failed"):
        async with Supervisor("t") as sup:
            sup.spawn(Counter, 0, log, capacity=1)
            sup.spawn(BadStop, capacity=1)
            await anyio.sleep(0.01)
    assert "stop Counter" in log
