"""What a sender is told of when its peer reads the message: one pure rule, both engines' words."""

from __future__ import annotations

import pytest

from agentswf.engine.mail.rules import how_read


@pytest.mark.parametrize(
    ("kind", "state", "reply", "told"),
    [
        ("participant", "idle", False, "when they read their inbox"),
        ("participant", "working", True, "when they read their inbox"),
        ("agent", "idle", True, "now: your reply starts its next turn"),
        ("agent", "not-started", True, "now: your reply starts its next turn"),
        ("agent", "awaiting-reply", True, "now: your reply starts its next turn"),
        ("agent", "working", True, "when its current turn ends"),
        ("agent", "working", False, "when its current turn ends"),
        ("agent", "awaiting-reply", False, "with the reply it awaits"),
        ("agent", "idle", False, "now, in a turn of its own"),
        ("agent", "stopped", False, "now, in a turn of its own"),
    ],
)
def test_how_read_is_one_rule_of_kind_state_and_reply(kind, state, reply, told):
    assert how_read(kind, state, reply=reply) == told
