"""What every turn's prompt teaches the agent: how to hand in its answer, exactly.

The launcher's absolute path, because `wfa` is not on the agent's PATH; the call id;
the fields as flags, or a quoted heredoc (`<<'WF_JSON'`, never indented, since a copied
terminator with leading spaces never closes it) with the JSON Schema in full, since
agents answer a schema they can read and guess at one they can't.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from ..wire.teaching import Flag, Taught

QUOTING_RULE = "Put every value in single quotes; a ' inside a value is written '\\''."
NUDGE_TEXT = "You finished without handing in the answer this turn asks for. Hand it in now."


def _flag_example(flag: Flag) -> str:
    return f"--{flag.name} '<{flag.hint}>'"


def answer_block(launcher: Path, call_id: str, taught: Taught) -> str:
    """The lines that teach `wfa result` for this call."""
    command = f"{launcher} result {call_id}"
    if taught.form == "none":
        return f"When you are done, say so by running:\n\n{command}\n"
    if taught.form == "flags":
        required = [flag for flag in taught.flags or () if flag.required]
        optional = [flag for flag in taught.flags or () if not flag.required]
        lines = [
            "When the answer is ready, return it by running:",
            "",
            " ".join([command, *(_flag_example(flag) for flag in required)]),
            "",
            QUOTING_RULE,
        ]
        if optional:
            lines.append(
                "You may also give: " + " ".join(_flag_example(flag) for flag in optional) + "."
            )
        return "\n".join(lines) + "\n"
    schema = msgspec.json.encode(taught.schema).decode()
    return (
        "When the answer is ready, return it by running:\n\n"
        f"{command} <<'WF_JSON'\n<json>\nWF_JSON\n\n"
        f"The JSON must match this schema:\n{schema}\n"
    )


def turn_prompt(
    prompt: str, *, launcher: Path, call_id: str, taught: Taught, instructions: str | None = None
) -> str:
    """The whole prompt of a turn: instructions (first turn only), the ask, how to answer."""
    parts = [part for part in (instructions, prompt.strip()) if part]
    parts.append(answer_block(launcher, call_id, taught))
    return "\n\n".join(parts)


def nudge_prompt(*, launcher: Path, call_id: str, taught: Taught, text: str = NUDGE_TEXT) -> str:
    """The check-in sent once when an agent ends its turn without an answer."""
    return f"{text}\n\n{answer_block(launcher, call_id, taught)}"
