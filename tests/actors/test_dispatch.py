"""Handler tables: built from annotations when the class is defined, checked when a message is sent."""

from __future__ import annotations

import pytest

from agentswf.actors import Actor, Mailbox, Supervisor, handler

from .kit import Add, Counter, Get

pytestmark = pytest.mark.anyio


def test_the_table_maps_each_annotated_type_to_its_handler() -> None:
    assert set(Counter._handlers) >= {Add, Get}
    assert Counter._handlers[Add][1] is True  # async
    assert Counter._handlers[Get][1] is False  # plain def


def test_subclasses_inherit_and_override_handlers() -> None:
    class Doubler(Counter):
        @handler
        async def add(self, msg: Add) -> int:
            self.n += 2 * msg.k
            return self.n

    assert Doubler._handlers[Add][0] is Doubler.add
    assert Doubler._handlers[Get][0] is Counter.get


def test_a_handler_annotated_with_a_union_handles_each_of_its_types() -> None:
    class Either(Actor):
        @handler
        def either(self, msg: Add | Get) -> None: ...

    assert Either._handlers[Add][0] is Either._handlers[Get][0] is Either.either
    with pytest.raises(TypeError, match="two handlers"):

        class Overlap(Actor):
            @handler
            def either(self, msg: Add | Get) -> None: ...

            @handler
            def get(self, msg: Get) -> None: ...


def test_bad_handlers_are_refused_where_they_are_defined() -> None:
    with pytest.raises(TypeError, match="msgspec.Struct"):

        class NotStruct(Actor):
            @handler
            def on_int(self, msg: int) -> None: ...

    with pytest.raises(TypeError, match="two handlers"):

        class Twice(Actor):
            @handler
            def a(self, msg: Add) -> None: ...

            @handler
            def b(self, msg: Add) -> None: ...

    with pytest.raises(TypeError, match="must take"):

        class Arity(Actor):
            @handler
            def a(self, msg: Add, extra: int) -> None: ...


def test_mailbox_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="capacity"):
        Mailbox("m", 0)


async def test_spawn_takes_an_actor_class_inside_the_block() -> None:
    sup = Supervisor("t")
    with pytest.raises(RuntimeError, match="async with"):
        sup.spawn(Counter, capacity=1)
    async with sup:
        with pytest.raises(TypeError):
            sup.spawn(lambda: Counter(), capacity=1)  # type: ignore[arg-type]
