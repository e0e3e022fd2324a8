"""What every turn's prompt teaches the agent: how to hand in its answer, exactly.

The launcher's absolute path, because `wfa` is not on the agent's PATH; the call id;
the fields as flags, or a quoted heredoc (`<<'WF_JSON'`, never indented, since a copied
terminator with leading spaces never closes it) with the JSON Schema in full, since
agents answer a schema they can read and guess at one they can't.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from .teaching import Flag, Taught

QUOTING_RULE = "Put every value in single quotes; a ' inside a value is written '\\''."
NUDGE_TEXT = "You finished without handing in the answer this turn asks for. Hand it in now."


def _flag_example(flag: Flag) -> str:
    return f"--{flag.name} '<{flag.hint}>'"


def usage_line(command: str, taught: Taught) -> str:
    """`command` (launcher, verb, call id or tool name) with its input as taught: the refusals' usage line."""
    if taught.is_text:
        return f"usage: {command} <<'WF_TEXT' (the answer on the lines after, then WF_TEXT)"
    if taught.form == "flags":
        return f"usage: {command} {taught.flags_usage()}"
    if taught.form == "json":
        return f"usage: {command} <<'WF_JSON' (the JSON on the lines after, then WF_JSON)"
    return f"usage: {command}"


def answer_block(launcher: Path, call_id: str, taught: Taught) -> str:
    """The lines that teach `wfa result` for this call."""
    command = f"{launcher} result {call_id}"
    if taught.is_text:
        return (
            "When the answer is ready, return it by running:\n\n"
            f"{command} <<'WF_TEXT'\n<your answer, as plain text>\nWF_TEXT\n"
        )
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
        notes = taught.flag_notes()
        if notes:
            lines += ["", "What each flag is:", *notes]
        return "\n".join(lines) + "\n"
    schema = msgspec.json.encode(taught.schema).decode()
    return (
        "When the answer is ready, return it by running:\n\n"
        f"{command} <<'WF_JSON'\n<json>\nWF_JSON\n\n"
        f"The JSON must match this schema:\n{schema}\n"
    )


def tools_block(launcher: Path, tools: Mapping[str, Any]) -> str:
    """The lines that teach `wfa tool`: each tool's name, description and input."""
    command = f"{launcher} tool"
    forms = {tool.taught.form for tool in tools.values()}
    lines = ["You have tools the workflow runs for you. Call one with:", ""]
    lines.append(f"{command} <name> --<option> '<value>' ...")
    if "json" in forms:
        lines += ["", "or, for a tool whose input is taught as JSON:", "", f"{command} <name> <<'WF_JSON'", "<json>", "WF_JSON"]
    lines += ["", QUOTING_RULE, ""]
    for name, tool in tools.items():
        lines.append(f"- {name}: {tool.description.strip()}")
        if tool.taught.form == "flags":
            lines.append(f"  {command} {name} {tool.taught.flags_usage()}")
            lines += [f"    {note}" for note in tool.taught.flag_notes()]
        elif tool.taught.form == "none":
            lines.append(f"  {command} {name}")
        else:
            schema = msgspec.json.encode(tool.taught.schema).decode()
            lines.append(f"  Its input is JSON matching this schema: {schema}")
            lines += [f"{command} {name} <<'WF_JSON'", "<json>", "WF_JSON"]
    return "\n".join(lines) + "\n"


def turn_prompt(
    prompt: str,
    *,
    launcher: Path,
    call_id: str,
    taught: Taught,
    instructions: str | None = None,
    tools: Mapping[str, Any] | None = None,
    peers: str = "",
) -> str:
    """The whole prompt of a turn: instructions (first turn only), the ask, how to answer, peers, tools."""
    parts = [part for part in (instructions, prompt.strip()) if part]
    parts.append(answer_block(launcher, call_id, taught))
    if peers:
        parts.append(peers)
    if tools:
        parts.append(tools_block(launcher, tools))
    return "\n\n".join(parts)


def nudge_prompt(
    *,
    launcher: Path,
    call_id: str,
    taught: Taught,
    tools: Mapping[str, Any] | None = None,
    peers: str = "",
    text: str = NUDGE_TEXT,
    waiting: bool = False,
) -> str:
    """The check-in sent once when an agent ends its turn without an answer.

    Where the harness offers `wfa waiting`, it teaches that too: an agent still on long
    work says so, and the next check-in waits (never past the turn's deadline).
    """
    parts = [text, answer_block(launcher, call_id, taught)]
    if waiting:
        parts.append(
            "If you are still on work this answer needs (a build, a test run), say so instead:\n\n"
            f"{launcher} waiting {call_id} --reason '<what you are doing>' --timeout 10m\n\n"
            "It holds off the next check-in; it never moves the turn's deadline."
        )
    if peers:
        parts.append(peers)
    if tools:
        parts.append(tools_block(launcher, tools))
    return "\n\n".join(parts)


def peers_block(launcher: Path, peers: list[dict[str, Any]], *, can_await: bool) -> str:
    """The lines that teach `wfa send`, `wfa reply` and `wfa peers`, and who the peers are."""
    if not peers:
        return ""
    wfa = str(launcher)
    lines = ["You can message these peers:"]
    for peer in peers:
        can = {"send": "you can send", "reply": "you can reply", "both": "you can send and reply"}[peer["can"]]
        lines.append(f"- {peer['peer']} ({peer['kind']}; {can}): {peer['purpose']}")
    lines += ["", "Send a message:", f"{wfa} send <peer> <<'EOF'", "<message>", "EOF"]
    if can_await:
        lines += [
            "Ask a question (this doesn't block: go on with other work, end your turn, and the reply starts your next turn):",
            f"{wfa} send --await-reply <peer> <<'EOF'",
            "<question>",
            "EOF",
        ]
    lines += [
        "Answer a question a peer asked you (you must, before you hand in your own answer):",
        f"{wfa} reply <peer> <<'EOF'",
        "<answer>",
        "EOF",
        f"{wfa} peers lists your peers, their state, and what you owe.",
    ]
    return "\n".join(lines) + "\n"


def mail_text(mail: list[Any]) -> str:
    """Messages as the agent reads them, each with who sent it and what is expected of it."""
    parts = []
    for item in mail:
        if item.kind == "question":
            heading = f"A question from {item.sender}; it awaits your reply (wfa reply {item.sender}):"
        elif item.kind == "reply":
            heading = f"{item.sender}'s reply to your question:"
        elif item.kind == "notice":
            heading = "From the run:"
        else:
            heading = f"A message from {item.sender}:"
        parts.append(f"{heading}\n<<<\n{item.text}\n>>>")
    return "\n\n".join(parts)


MESSAGE_TURN_TEXT = (
    "This turn was started by the messages above and takes no result: reply if you were asked, "
    "then end your turn."
)
OWED_REMINDER = "You ended your turn without replying to {peers}. Reply now (wfa reply {first}), then end your turn."


def message_turn_prompt(
    mail: list[Any], *, launcher: Path, peers: str, tools: Mapping[str, Any] | None, reminder: str = ""
) -> str:
    """A turn a message started: the messages, and how to reply; it takes no `wfa result`."""
    parts = [reminder] if reminder else []
    if mail:
        parts.append(mail_text(mail))
    parts.append(MESSAGE_TURN_TEXT)
    if peers:
        parts.append(peers)
    if tools:
        parts.append(tools_block(launcher, tools))
    return "\n\n".join(parts)


def continuation_prompt(
    mail: list[Any], *, launcher: Path, call_id: str, taught: Taught, peers: str, tools: Mapping[str, Any] | None
) -> str:
    """The next attempt of a turn still open: the mail that started it, then how to answer."""
    parts = [mail_text(mail), "The turn is still open.", answer_block(launcher, call_id, taught)]
    if peers:
        parts.append(peers)
    if tools:
        parts.append(tools_block(launcher, tools))
    return "\n\n".join(parts)
