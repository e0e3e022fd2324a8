"""What each harness can do: every capability is given, or absent with the reason why.

A new harness takes a position on every capability (a test walks the whole table), and
a runtime asking for what its harness lacks is refused when the agent opens, quoting the
reason.
"""

from __future__ import annotations

from dataclasses import dataclass

CAPABILITIES = (
    "resume", "effort", "await_reply", "waiting", "usage", "cost", "sandbox", "fork", "compact", "set", "pane"
)


@dataclass(frozen=True, slots=True)
class Given:
    how: str


@dataclass(frozen=True, slots=True)
class Absent:
    reason: str


Capability = Given | Absent

_HEADLESS_WAITING = Absent(
    "wfa waiting is offered only where the harness confirms what it was sent (a claude TUI in a pane); "
    "this harness runs headless, or its pane can't confirm delivery"
)
_NO_PANE = "not verified: cursor-agent can't be installed from npm here, so its TUI's screens haven't been measured"

TABLE: dict[str, dict[str, Capability]] = {
    "shell": {
        "resume": Absent("a shell agent is run anew for each attempt: it has no native session"),
        "effort": Absent("a program has no effort levels"),
        "await_reply": Given("the reply starts the command's next run"),
        "waiting": _HEADLESS_WAITING,
        "usage": Absent("a program reports no tokens"),
        "cost": Absent("a program reports no dollars"),
        "sandbox": Given("bubblewrap around the command; it reaches only what network names"),
        "fork": Absent("a shell agent has no session to copy: it is run anew for each attempt"),
        "compact": Absent("a shell agent has no context to compact"),
        "set": Absent("a program has no model or effort to switch"),
        "pane": Absent("a shell agent has no TUI"),
    },
    "claude": {
        "resume": Given("claude -p --resume <session id>"),
        "effort": Given("--effort low|medium|high|xhigh|max"),
        "await_reply": Given("the reply resumes the session in a new headless run"),
        "waiting": Given(
            "in a pane (placement='pane') only: the transcript confirms the check-in was received; "
            "headless, wfa waiting is refused unsupported-command"
        ),
        "usage": Given("the stream-json result line's usage"),
        "cost": Given("the result line's total_cost_usd"),
        "sandbox": Given("bubblewrap around claude -p; a home with its credential, its base URL reachable"),
        "fork": Given("claude -p --resume <id> --fork-session --session-id <new>, stdin /cost: no model call"),
        "compact": Given(
            "claude -p --resume <id> --fork-session, stdin /compact <focus>: the copy is the session from then on; "
            "the summary is the row after compact_boundary"
        ),
        "set": Given("--model / --effort on every later attempt, resuming the same session"),
        "pane": Given("its TUI in a tmux pane of the agent's own, prompts typed, delivery read from its transcript"),
    },
    "codex": {
        "resume": Given("codex exec resume <thread id>"),
        "effort": Given('-c model_reasoning_effort="minimal|low|medium|high|xhigh"'),
        "await_reply": Given("the reply resumes the thread in a new codex exec"),
        "waiting": _HEADLESS_WAITING,
        "usage": Given("turn.completed usage"),
        "cost": Absent("codex prints no dollars; its tokens can be priced from its usage"),
        "sandbox": Given("bubblewrap around codex exec, its own sandbox off; its provider's base_url reachable"),
        "fork": Given("codex app-server, thread/fork: a copy of the thread, no model call"),
        "compact": Given(
            "codex app-server: a copy of the thread (thread/fork), the focus added (thread/inject_items), "
            "thread/compact/start; the copy is the session from then on. The summary is read from its rollout"
        ),
        "set": Given('--model / -c model_reasoning_effort on every later codex exec resume'),
        "pane": Given(
            "its TUI (--no-daemon) in a tmux pane of the agent's own, prompts pasted; it confirms no delivery, "
            "so a silent turn is nudged once, and wfa waiting and --await-reply are refused there"
        ),
    },
    "pi": {
        "resume": Given("pi --session <session id>, from the agent's cwd"),
        "effort": Given("--thinking off|minimal|low|medium|high|xhigh"),
        "await_reply": Given("the reply resumes the session in a new pi run"),
        "waiting": _HEADLESS_WAITING,
        "usage": Given("each message_end's usage, summed"),
        "cost": Given("each message_end's usage.cost.total, summed"),
        "sandbox": Given("bubblewrap around pi; a home with its models.json and auth, their base URLs reachable"),
        "fork": Given("pi --mode rpc --fork <session>, answering get_state with the copy's file: no model call"),
        "compact": Given("pi --mode rpc --session <session>, its compact command with the focus: the summary is its answer's"),
        "set": Given("--model / --thinking on every later run, resuming the same session"),
        "pane": Given(
            "its TUI in a tmux pane of the agent's own, prompts pasted; it confirms no delivery, "
            "so a silent turn is nudged once, and wfa waiting and --await-reply are refused there"
        ),
    },
    "cursor": {
        "resume": Given("cursor-agent -p --resume <session id>"),
        "effort": Absent("cursor has no effort flag: the effort is part of the model id, e.g. gpt-5-high"),
        "await_reply": Absent("cursor can't await a reply headless: send without --await-reply, say where to answer"),
        "waiting": _HEADLESS_WAITING,
        "usage": Absent("not verified: cursor-agent can't be installed from npm here, so its usage isn't read"),
        "cost": Absent("cursor-agent prints no dollars"),
        "sandbox": Given("bubblewrap around cursor-agent (not verified: it can't be installed from npm here)"),
        "fork": Absent("not verified: cursor-agent can't be installed from npm here, so a copy of its chat isn't made"),
        "compact": Absent("headless cursor has no compaction (only its TUI's /summarize)"),
        "set": Given("--model on every later attempt (the effort is part of the model id)"),
        "pane": Absent(_NO_PANE),
    },
}

_ACP_PANE = Absent("an ACP agent is driven over its standard streams, one process per attempt: it has no pane")
_ACP_COMPACT = Absent("ACP has no compaction request: an ACP agent compacts by its own rules, if at all")
_ACP_FORK = Given(
    "session/fork at the copy's first attempt, in its process, where the agent's initialize offers it "
    "(claude-agent-acp does): no model call; where it doesn't, that attempt fails saying so"
)


def _acp(usage: Capability, cost: Capability, resume: str, fork: Capability = _ACP_FORK) -> dict[str, Capability]:
    """An ACP runtime's row: what the protocol gives every agent, and what this one reports."""
    return {
        "resume": Given(resume),
        "effort": Absent("ACP has no effort: where an agent has one, it is a config option of its session"),
        "await_reply": Given("the reply reopens the session in a new agent process"),
        "waiting": _HEADLESS_WAITING,
        "usage": usage,
        "cost": cost,
        "sandbox": Given("bubblewrap around the agent, its CLI's config and credentials copied into the sandbox's home, "
                         "its model reached through the sandbox's proxy; one run by command=[…] (but claude's and codex's "
                         "adapters) gets an empty home and the sandbox's network"),
        "fork": fork,
        "compact": _ACP_COMPACT,
        "set": Given("the model through the session's config option `model` (or session/set_model) on every later attempt"),
        "pane": _ACP_PANE,
    }


TABLE |= {
    "acp": _acp(
        Given("the prompt response's usage, else qwen's per-call _meta.usage, else gemini's _meta.quota"),
        Given("a usage_update's cost, as the agent process's total (claude-agent-acp's)"),
        "session/resume where the agent advertises it, else session/load",
    ),
    "opencode": _acp(
        Given("the prompt response's usage: opencode counts only the turn's last model call there"),
        Given("usage_update's cost.amount, the session's running total, less the last turn's"),
        "session/resume",
        Given("session/fork at the copy's first attempt: no model call"),
    ),
    "qwen": _acp(
        Given("each model call's _meta.usage on an empty agent_message_chunk, summed"),
        Absent("qwen reports no dollars over ACP; its tokens can be priced from its usage"),
        "session/resume",
        Absent("qwen 0.24 offers no session/fork over ACP (its headless --fork-session is another command)"),
    ),
    "gemini": _acp(
        Given("the prompt response's _meta.quota.token_count"),
        Absent("gemini reports no dollars over ACP; its tokens can be priced from its usage"),
        "session/load, its session file renamed first when it was written in the same minute",
        Absent("gemini 0.61 offers no session/fork"),
    ),
    "copilot": _acp(
        Given("the prompt response's usage"),
        Absent("copilot reports no dollars over ACP; its tokens can be priced from its usage"),
        "session/load (copilot has no session/resume)",
        Absent("copilot 1.0 offers no session/fork"),
    ),
}

EFFORT_LEVELS: dict[str, tuple[str, ...]] = {
    "claude": ("low", "medium", "high", "xhigh", "max"),
    "codex": ("minimal", "low", "medium", "high", "xhigh"),
    "pi": ("off", "minimal", "low", "medium", "high", "xhigh"),
}


def refusal(harness: str, name: str) -> str | None:
    """Why `harness` can't do `name`, or None if it can."""
    entry = TABLE[harness][name]
    return entry.reason if isinstance(entry, Absent) else None
