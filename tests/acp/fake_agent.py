"""A test stand-in for an ACP agent: a real process speaking the Agent Client Protocol on its
standard streams, whose "model" is a script read from the prompt. It is no real agent's
behaviour, only the protocol's: the ACP harness's own tests run against it, and the real CLIs
(opencode, qwen, gemini, copilot, the adapters) are tested in tests/acp/test_real_acp_clis.py.

Like a real agent it runs its shell commands itself (`bash -c`, its environment carrying `wfa`),
asks for permission first, reports the command as a tool call, keeps its sessions on disk (under
$FAKE_ACP_HOME) and replays one on `session/load` (after its answer with FAKE_ACP_LATE_REPLAY=1, as
gemini does). The prompt's `SCENARIO <name>` says what it runs (`plan`). Everything it is sent is logged, a line per message, to $FAKE_ACP_HOME/received.jsonl.
To test the client's defences it also writes a line that is no JSON-RPC, and sends a request the
client doesn't serve (`fs/read_text_file`). Standard library only.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

HOME = Path(os.environ["FAKE_ACP_HOME"])
TAUGHT = re.compile(r"(/\S+/wfa) result (\w+)")
INPUT_TOKENS, OUTPUT_TOKENS, COST = 100, 20, 0.01  # per model "call": one per command, one to finish
RESUME = os.environ.get("FAKE_ACP_RESUME") == "1"  # advertise session/resume (else only session/load)
STUBBORN = os.environ.get("FAKE_ACP_STUBBORN") == "1"  # ignore SIGTERM and stdin's end, as claude-agent-acp does
LATE_REPLAY = os.environ.get("FAKE_ACP_LATE_REPLAY") == "1"  # answer a load before its replay, as gemini does
REPLAY_GAP_SECONDS = 0.02  # between a late replay's updates: the client has sent its prompt by then

inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
answers: dict[int, Any] = {}
next_id = 0


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def log(message: dict[str, Any]) -> None:
    with (HOME / "received.jsonl").open("a") as file:
        file.write(json.dumps(message) + "\n")


def reader() -> None:
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        log(message)
        inbox.put(message)
    inbox.put(None)


def ask(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A request to the client, its answer awaited (a cancel meanwhile is kept for later)."""
    global next_id
    next_id += 1
    key = next_id
    send({"id": key, "method": method, "params": params})
    held = []
    while True:
        message = inbox.get()
        if message is None:
            sys.exit(0)
        if message.get("id") == key and "method" not in message:
            for kept in held:
                inbox.put(kept)
            return message
        held.append(message)


def update(session: str, body: dict[str, Any]) -> None:
    send({"method": "session/update", "params": {"sessionId": session, "update": body}})


def store(session: str) -> Path:
    return HOME / "sessions" / f"{session}.json"


def plan(prompt: str) -> list[str]:
    found = TAUGHT.search(prompt)
    if not found:
        return []
    wfa, call = found.groups()
    answer = f"{wfa} result {call} --verdict approve"
    scenario = re.search(r"SCENARIO (\w+)", prompt)
    name = scenario.group(1) if scenario else "answer"
    out = os.environ.get("FAKE_ACP_OUT", str(HOME))
    return {
        "answer": [answer],
        "correct": [f"{wfa} result {call} --verdict maybe", answer],
        "tool": [f"{wfa} tool count --n 2", answer],
        "forbidden": [f"touch {out}/forbidden", answer],
        "recall": [f"{wfa} result {call} --turns {{turns}}"],
        "hang": [f"echo $$ > {out}/hang.pid; sleep 1000"],
        "silent": [],  # the nudge's prompt names no scenario: it answers then
    }.get(name, [answer])


def run(command: str, session: str) -> tuple[str, bool]:
    """The command run in bash, its output; False if a `session/cancel` came first (the command killed)."""
    process = subprocess.Popen(["bash", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    while process.poll() is None:
        try:
            message = inbox.get(timeout=0.05)
        except queue.Empty:
            continue
        if message is None or message.get("method") == "session/cancel":
            process.kill()
            process.wait()
            return "", False
    return process.stdout.read() if process.stdout else "", True


def prompt(key: int, params: dict[str, Any]) -> None:
    session = params["sessionId"]
    history = json.loads(store(session).read_text())
    text = "".join(part.get("text", "") for part in params["prompt"] if part.get("type") == "text")
    before = len(history)
    history.append({"role": "user", "text": text})
    turns = sum(entry["role"] == "user" for entry in history)
    sys.stdout.write("this line is not JSON-RPC\n")
    ask("fs/read_text_file", {"sessionId": session, "path": "/etc/passwd"})
    calls, stop = 1, "end_turn"
    for n, command in enumerate(plan(text)):
        command = command.replace("{turns}", str(turns))
        call = f"call_{n}"
        update(session, {"sessionUpdate": "tool_call", "toolCallId": call, "title": "bash", "kind": "execute",
                         "status": "pending", "rawInput": {}})
        update(session, {"sessionUpdate": "tool_call_update", "toolCallId": call, "title": command,
                         "rawInput": {"command": command}})
        options = [{"optionId": "always", "name": "Always allow", "kind": "allow_always"},
                   {"optionId": "once", "name": "Allow", "kind": "allow_once"},
                   {"optionId": "no", "name": "Reject", "kind": "reject_once"}]
        chosen = ask("session/request_permission", {"sessionId": session, "options": options,
                     "toolCall": {"toolCallId": call, "title": command, "kind": "execute"}})
        option = (chosen.get("result") or {}).get("outcome", {}).get("optionId")
        calls += 1
        if option == "always":
            (HOME / "allowed-always").write_text(command)
        if option not in ("once", "always"):
            update(session, {"sessionUpdate": "tool_call_update", "toolCallId": call, "status": "failed"})
            history.append({"role": "tool", "text": "rejected"})
            continue
        output, finished = run(command, session)
        if not finished:
            stop = "cancelled"
            break
        update(session, {"sessionUpdate": "tool_call_update", "toolCallId": call, "status": "completed",
                         "content": [{"type": "content", "content": {"type": "text", "text": output}}]})
        history.append({"role": "tool", "text": output})
    update(session, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Finished."}})
    history.append({"role": "agent", "text": "Finished."})
    total = sum(1 for entry in history[before:] if entry["role"] in ("tool", "agent")) * COST  # this process's
    update(session, {"sessionUpdate": "usage_update", "used": 1000, "size": 128000,
                     "cost": {"amount": round(total, 6), "currency": "USD"}})
    store(session).write_text(json.dumps(history))
    usage = {"inputTokens": INPUT_TOKENS * calls, "outputTokens": OUTPUT_TOKENS * calls,
             "totalTokens": (INPUT_TOKENS + OUTPUT_TOKENS) * calls}
    send({"id": key, "result": {"stopReason": stop, "usage": usage}})


def main() -> None:
    (HOME / "sessions").mkdir(parents=True, exist_ok=True)
    (HOME / f"agent.{os.getpid()}.pid").write_text(str(os.getpid()))
    if STUBBORN:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    threading.Thread(target=reader, daemon=True).start()
    session_caps = {"resume": {}} if RESUME else {}
    if os.environ.get("FAKE_ACP_FORK") == "1":
        session_caps["fork"] = {}
    while (message := inbox.get()) is not None:
        method, key, params = message.get("method"), message.get("id"), message.get("params") or {}
        if method == "initialize":
            send({"id": key, "result": {"protocolVersion": 1, "agentInfo": {"name": "fake-acp", "version": "0.1"},
                  "agentCapabilities": {"loadSession": True, "sessionCapabilities": session_caps}}})
        elif method == "session/new":
            session = f"fake-{uuid.uuid4().hex}"
            store(session).write_text("[]")
            send({"id": key, "result": {"sessionId": session, "configOptions": [
                {"id": "model", "name": "Model", "type": "select", "currentValue": "fake-model", "options": []}]}})
        elif method in ("session/load", "session/resume"):
            session = params["sessionId"]
            if not store(session).exists():
                send({"id": key, "error": {"code": -32002, "message": f"no session {session}"}})
                continue
            if method == "session/resume":
                send({"id": key, "result": {}})
                continue
            if LATE_REPLAY:
                send({"id": key, "result": {}})
            for entry in json.loads(store(session).read_text()):
                kind = "user_message_chunk" if entry["role"] == "user" else "agent_message_chunk"
                update(session, {"sessionUpdate": kind, "content": {"type": "text", "text": entry["text"]}})
                if LATE_REPLAY:
                    time.sleep(REPLAY_GAP_SECONDS)
            if not LATE_REPLAY:
                send({"id": key, "result": {}})
        elif method == "session/fork":
            copy = f"fake-{uuid.uuid4().hex}"
            store(copy).write_text(store(params["sessionId"]).read_text())
            send({"id": key, "result": {"sessionId": copy}})
        elif method == "session/set_config_option":
            (HOME / "model").write_text(str(params.get("value")))
            send({"id": key, "result": {"configOptions": []}})
        elif method == "session/prompt":
            prompt(key, params)
        elif key is not None:
            send({"id": key, "error": {"code": -32601, "message": f"no {method}"}})
    while STUBBORN:
        time.sleep(60)


if __name__ == "__main__":
    main()
