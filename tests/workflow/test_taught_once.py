"""A turn's schema is taught once per type, however many agents' turns take it: the JSON
schema's making was ≈ 3 % of a 1,000-agent run's CPU when each turn made its own."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from agentswf.errors import DefinitionError
from agentswf.workflow.agents import check_turn


class Verdict(msgspec.Struct):
    ok: bool
    notes: list[str] = []


def test_turns_of_one_type_share_its_teaching() -> None:
    first = check_turn("a", "Review.", Verdict, None, None)
    assert check_turn("b", "Review.", Verdict, None, None) is first
    assert check_turn("c", "Count.", list[int], None, None) is check_turn("d", "Count.", list[int], None, None)
    assert check_turn("e", "Say.", None, None, None).is_text


@pytest.mark.parametrize("schema", [{"type": "object"}, [int], object()])
def test_what_cant_be_a_schema_is_still_refused_every_time(schema: Any) -> None:
    for _ in range(2):
        with pytest.raises(DefinitionError, match="can't be a turn's schema"):
            check_turn("a", "Go.", schema, None, None)
