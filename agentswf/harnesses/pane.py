"""Placement "pane": an agent's CLI as its interactive TUI in a tmux window, kept across its turns.

One attempt is one prompt delivered into the pane: the first attempt starts the agent's
tmux server (`tmux.py`, under the agent's keeper) and its TUI, answering the startup
screens its `TuiSpec` names (never picking an update); each attempt then types or pastes
its prompt, and ends when the TUI has gone idle again. claude's spec is here; codex's and
pi's are in pane_codex.py and pane_pi.py. Reading the screen (`capture-pane`)
says idle, blocked (a permission prompt) or not logged in; for claude the transcript
confirms what it was sent (`ClaudeTranscript`): accepted once the prompt is a user row,
received once an assistant row descends from it, and the turn over once claude writes its
`turn_duration` row under it (the screen alone can sit still while a command runs). codex
and pi confirm nothing: a turn is over when the screen is still and not busy, and the turn
nudges once. An attempt that is cancelled (the deadline, the run stopping) takes the pane
down with everything in it; the next attempt starts it again on the same session.
Reading the screen is pane_screen.py's (a lagging TUI drops and draws keys late: a key goes
only to a still screen, a prompt is put in again when it has no user row); what a turn spent
is read from the session file the TUI writes (pane_usage.py).

Everything on the screen and in the transcript comes from the agent's side: it is read
as text, bounded, and only ever matched against fixed markers.
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import msgspec
import structlog

from ..errors import HarnessError
from ..wire.nesting import too_deep
from .base import Attempt, AttemptEnding, AttemptResult, Harness, Operation, OperationResult
from .capabilities import refusal
from .cli import CliHarness
from .pane_codex import CODEX_TUI
from .pane_keep import KeepPane, KeptPane, keep_when_run_ends, kept_socket, should_keep
from .pane_pi import PI_TUI
from .pane_screen import found, input_box, selected, startup_screen, takes_input, unsent
from .pane_spec import StartupScreen, TuiSpec, find_session, session_file
from .pane_usage import file_size, usage_since
from .regular import read_regular
from .tmux import TmuxServer, tmux_path
from .usage import Usage

POLL_SECONDS = 0.15  # between two reads of the screen
IDLE_STILL_SECONDS = 1.5  # an unchanged screen with no busy marker for this long is idle
STARTUP_SECONDS = 60.0  # from launch to the TUI taking input
DELIVERY_ACCEPT_SECONDS = 30.0  # for the transcript to show the prompt as a user row
SCREEN_LINES_IN_REASON = 15
MAX_TRANSCRIPT_LINE_BYTES = 1024 * 1024  # a longer transcript line is skipped, never decoded
TRANSCRIPT_READ_BYTES = 4 * 1024 * 1024  # read at most this much of the transcript per poll
TURN_END_SUBTYPE = "turn_duration"  # claude's `system` row at the end of each turn (2.1.332)
CLAUDE_SETTLE_SECONDS = 1.0  # its prompt drawn this long before typing: typed at once, 1 prompt in 9 was lost
MENU_MOVES = 10  # arrow presses at most, to reach a startup screen's choice
MENU_STILL_SECONDS = 0.5  # a menu is read only once its screen has not changed for this long
MENU_STILL_MAX_SECONDS = 5.0  # but no longer than this (an animated screen never stops changing)
KEY_SHOWN_SECONDS = 3.0  # for a key's effect to show; a key with none by then was dropped, and is pressed again
TYPED_SHOWN_SECONDS = 5.0  # for a typed prompt to show in the input box; not shown by then: typed again
RETYPE_SECONDS = 8.0  # after Enter, the box empty, no user row for this long: the prompt was lost, typed again
DELIVERY_TRIES = 3  # times a prompt is typed at most
log = structlog.get_logger("agentswf.panes")
PANE_SOCKET_PREFIX = "t"  # then a digest of the agent's key: `awf attach` finds it from the key


def pane_socket(run_sockets: Path, agent: str) -> Path:
    """Where agent `agent`'s tmux server listens, in the run's sockets directory (which can't be listed)."""
    return run_sockets / f"{PANE_SOCKET_PREFIX}{hashlib.sha256(agent.encode()).hexdigest()[:12]}"


def claude_launch(cli: CliHarness, session: str | None) -> tuple[list[str], str | None]:
    """claude's TUI: Bash allowed (so `wfa` runs), anything else asks; a session id we choose."""
    # not auto mode (claude's default since 2.1.3xx): its safety check calls Anthropic's
    # servers, and without them it holds every command on a screen of its own
    argv = [cli.executable, "--permission-mode", "default", "--allowed-tools", "Bash"]
    chosen = session or str(uuid.uuid4())
    argv += ["--resume", chosen] if session else ["--session-id", chosen]
    if cli.model:
        argv += ["--model", cli.model]
    if cli.effort:
        argv += ["--effort", cli.effort]
    return argv + list(cli.args), chosen


def claude_sessions(env: Mapping[str, str]) -> tuple[Path, str]:
    return claude_config(env) / "projects", "*/*.jsonl"


def claude_config(env: Mapping[str, str]) -> Path:
    return Path(env.get("CLAUDE_CONFIG_DIR") or Path(env.get("HOME", os.path.expanduser("~"))) / ".claude")


CLAUDE_TUI = TuiSpec(
    startup=(
        StartupScreen("Yes, I trust this folder", "Yes, I trust this folder"),
        # the runtime's env gave the key: that is the operator's choice, so it is taken
        StartupScreen("Detected a custom API key", "Yes"),
    ),
    ready=("shift+tab to cycle", "? for shortcuts"),
    busy=("esc to interrupt",),
    blocked=("Auto mode can't check actions", "Do you want to proceed?", "Do you want to make this edit", "Do you want to create", "Do you want to allow"),
    login=("Select login method", "Please run /login", "Invalid API key", "OAuth token has expired"),
    typed=True,  # claude 2.1.288 takes a pasted multi-line prompt as pasted text and doesn't act on it
    confirms_delivery=True,
    launch=claude_launch,
    settle=CLAUDE_SETTLE_SECONDS,
    sessions=claude_sessions,
    boxed=True,
)

TUIS: dict[str, TuiSpec] = {"claude": CLAUDE_TUI, "codex": CODEX_TUI, "pi": PI_TUI}


def tui_refusal(harness: str) -> str | None:
    """Why `harness` can't run in a pane (the capability table's reason), or None if it can."""
    return refusal(harness, "pane")


def screen_tail(screen: str, lines: int = SCREEN_LINES_IN_REASON) -> str:
    kept = [line.rstrip() for line in screen.splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


class ClaudeTranscript:
    """claude's session transcript, read as it grows: was the prompt accepted, and received?

    `$CLAUDE_CONFIG_DIR/projects/<cwd>/<session>.jsonl`, one JSON row per line; a user row
    carries what was typed, and every row names its parent (`parentUuid`)."""

    def __init__(self, config_dir: Path, session: str) -> None:
        self.config_dir, self.session = config_dir, session
        self.offset = 0
        self.partial = b""
        self.skipping = False  # inside an overlong line, until its end
        self.parents: dict[str, str | None] = {}
        self.prompt_rows: list[str] = []  # user rows holding the prompt being confirmed
        self.assistants: list[str] = []
        self.ends: list[str] = []  # rows that end a turn (`system`, subtype `turn_duration`)
        self.wanted = ""

    def expect(self, prompt: str) -> None:
        """From now on, confirm `prompt`: the rows before don't count."""
        self.wanted = prompt.strip().splitlines()[0].strip() if prompt.strip() else ""
        self.prompt_rows, self.assistants, self.ends = [], [], []
        self.read()
        self.prompt_rows, self.assistants, self.ends = [], [], []

    def _path(self) -> Path | None:
        projects = self.config_dir / "projects"
        try:
            return next(projects.glob(f"*/{self.session}.jsonl"), None)
        except OSError:
            return None

    def read(self) -> None:
        path = self._path()
        if path is None:
            return
        data = read_regular(path, TRANSCRIPT_READ_BYTES, offset=self.offset)  # a FIFO planted there never blocks
        if data is None:
            return
        self.offset += len(data)
        *lines, rest = (self.partial + data).split(b"\n")
        if self.skipping and lines:  # the end of the overlong line
            lines, self.skipping = lines[1:], False
        if len(rest) > MAX_TRANSCRIPT_LINE_BYTES:  # an overlong line: skipped to its end, never decoded
            self.skipping = True
        self.partial = b"" if self.skipping else rest
        for line in lines:
            if line and len(line) <= MAX_TRANSCRIPT_LINE_BYTES and not too_deep(line):
                self._row(line)

    def _row(self, line: bytes) -> None:
        try:
            row = msgspec.json.decode(line)
        except msgspec.DecodeError:
            return
        if not isinstance(row, dict) or not isinstance(row.get("uuid"), str):
            return
        parent = row.get("parentUuid")
        self.parents[row["uuid"]] = parent if isinstance(parent, str) else None
        if row.get("type") == "user" and self.wanted and self.wanted in _text(row.get("message")):
            self.prompt_rows.append(row["uuid"])
        elif row.get("type") == "assistant":
            self.assistants.append(row["uuid"])
        elif row.get("type") == "system" and row.get("subtype") == TURN_END_SUBTYPE:
            self.ends.append(row["uuid"])

    @property
    def accepted(self) -> bool:
        return bool(self.prompt_rows)

    @property
    def received(self) -> bool:
        return any(self._descends(row) for row in self.assistants)

    @property
    def finished(self) -> bool:
        """claude ended the turn the prompt started (it writes how long the turn took)."""
        return any(self._descends(row) for row in self.ends)

    def _descends(self, row: str) -> bool:
        seen: set[str] = set()
        current: str | None = row
        while current is not None and current not in seen:
            if current in self.prompt_rows:
                return True
            seen.add(current)
            current = self.parents.get(current)
        return False


def _text(message: Any) -> str:
    """A transcript message's text: its content string, or its text blocks joined."""
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    return ""


def in_a_pane(harness: str, what: str) -> str:
    """Why an agent of `harness` in a pane can't `what` (compact, fork, switch model or effort): the
    CLI can, headless, but its TUI holds the session in the pane, and these are run headless."""
    return f"a {harness} agent in a pane can't {what} (run it without a pane, placement='headless', to {what})"


class PaneHarness(Harness):
    """An agent CLI's TUI in a tmux pane of its own; the turn sees one attempt per prompt."""

    def __init__(
        self, cli: CliHarness, tui: TuiSpec, tmux: str, keep_pane: KeepPane = "never",
        check_ins: Mapping[str, float] | None = None,
    ) -> None:
        self.cli, self.tui, self.tmux, self.keep_pane = cli, tui, tmux, keep_pane
        self.chosen_check_ins = dict(check_ins or {})
        self.name = cli.name  # type: ignore[misc]
        self.last_attempt: Attempt | None = None  # what a kept pane resumes with (its env, cwd, run)
        self.last_outcome: str | None = None  # of the agent's last turn: on-failure keeps a pane it didn't answer
        self.server: TmuxServer | None = None
        self.session: str | None = None
        self.transcript: ClaudeTranscript | None = None
        self.launched = 0.0  # wall clock, when its TUI last started: the sessions written since are its

    @property
    def supports_waiting(self) -> bool:  # type: ignore[override]
        return self.tui.confirms_delivery

    @property
    def confirms_delivery(self) -> bool:  # type: ignore[override]
        return self.tui.confirms_delivery

    @property
    def can_await(self) -> bool:  # type: ignore[override]
        """Only where delivery is confirmed: a reply typed into a pane that can't confirm it may be lost."""
        return self.cli.can_await and self.tui.confirms_delivery

    @classmethod
    def for_cli(
        cls, cli: CliHarness, env: Mapping[str, str], keep_pane: KeepPane = "never",
        check_ins: Mapping[str, float] | None = None,
    ) -> PaneHarness:
        why = tui_refusal(cli.name)
        if why is not None:
            raise HarnessError(why)
        return cls(cli, TUIS[cli.name], tmux_path(env), keep_pane, check_ins)

    def cli_executable(self) -> tuple[str, str] | None:
        return self.cli.cli_executable()

    @property
    def check_ins(self) -> Mapping[str, float]:
        return self.chosen_check_ins

    def turn_settled(self, outcome: str) -> None:
        self.last_outcome = outcome

    def with_settings(self, model: str | None, effort: str | None) -> Harness:
        raise NotImplementedError(in_a_pane(self.name, "switch model or effort"))

    async def compact(self, operation: Operation) -> OperationResult:
        raise NotImplementedError(in_a_pane(self.name, "compact"))

    async def fork(self, operation: Operation) -> OperationResult:
        raise NotImplementedError(in_a_pane(self.name, "fork"))

    async def run(self, attempt: Attempt) -> AttemptResult:
        self.last_attempt = attempt
        try:
            if self.server is None or not self.server.running:
                failed = await self._launch(attempt)
                if failed is not None:
                    await self._stop()
                    return AttemptResult(failed, session=self.session)
            elif attempt.started is not None:
                attempt.started(self._keeper_pid())
            begun = self._session_file(attempt)
            begun_at = file_size(begun)  # where this turn's rows begin (no file yet: 0)
            ending = await self._turn(attempt.prompt, attempt.received)
        except BaseException:
            self._learn_session(attempt)
            await self._stop()  # cancelled mid-turn (the deadline, the run stopping): nothing of it is left
            raise
        self._learn_session(attempt)
        if ending.kind != "exited":
            await self._stop()
        elif self.server is not None:
            await self.server.sweep()  # what the agent started beyond its TUI ends with its turn
        return AttemptResult(ending, session=self.session, usage=self._usage(attempt, begun, begun_at))

    def _session_file(self, attempt: Attempt) -> Path | None:
        if self.session is None or self.tui.sessions is None:
            return None
        directory, pattern = self.tui.sessions(self.cli.env(attempt))
        return session_file(directory, pattern, self.session)

    def _usage(self, attempt: Attempt, begun: Path | None, begun_at: int) -> Usage | None:
        """What the turn spent, from the rows its session file gained (all of a file begun since); priced
        where the CLI gives no cost."""
        path = self._session_file(attempt)
        usage = usage_since(path, begun_at if path == begun else 0)
        return self.cli.operation_usage(usage, usage.model if usage is not None else None)

    def _keeper_pid(self) -> int:
        assert self.server is not None and self.server.keeper is not None
        return self.server.keeper.pid

    def argv(self, attempt: Attempt) -> list[str]:
        """The TUI's command line: resuming the agent's session once it has one."""
        argv, known = self.tui.launch(self.cli, self.session or attempt.session)
        self.session = known or self.session
        return argv

    def _learn_session(self, attempt: Attempt) -> None:
        """Where the TUI chose its own session id: the session the turn's prompt went to, once written."""
        if self.session is not None or self.tui.sessions is None:
            return
        directory, pattern = self.tui.sessions(self.cli.env(attempt))
        self.session = find_session(directory, pattern, self.launched, attempt.call_id)

    async def _launch(self, attempt: Attempt) -> AttemptEnding | None:
        """Start the agent's server and TUI, and get it past its startup screens; a failed ending if it can't."""
        env = self.cli.env(attempt)
        env.setdefault("TERM", "xterm-256color")
        self.server = TmuxServer(self.tmux, pane_socket(attempt.launcher.parent.parent, attempt.agent), attempt.holds)
        pid = await self.server.start(env, attempt.cwd)
        if attempt.started is not None:
            attempt.started(pid)
        self.launched = time.time()
        await self.server.open_window(self.argv(attempt), attempt.cwd)
        if self.tui.confirms_delivery:
            assert self.session is not None
            self.transcript = ClaudeTranscript(claude_config(env), self.session)
        failed = await self._past_startup()
        if failed is None:
            self.server.settled()
        return failed

    async def _past_startup(self) -> AttemptEnding | None:
        server = self.server
        assert server is not None
        screen = ""
        ready_since: float | None = None
        with anyio.move_on_after(STARTUP_SECONDS):
            while True:
                screen = await server.screen()
                if await server.dead():
                    return AttemptEnding("failed", reason=f"{self.name} exited as it started:\n{screen_tail(screen)}")
                login = found(screen, self.tui.login)
                if login is not None:
                    return AttemptEnding(
                        "failed", reason=f"{self.name} isn't logged in ({login!r} on its screen)\n{self.cli.login_hint}"
                    )
                startup = startup_screen(screen, self.tui)
                if startup is not None:
                    await self._choose(startup)
                    ready_since = None
                elif not takes_input(screen, self.tui):
                    ready_since = None
                elif ready_since is None:
                    ready_since = anyio.current_time()
                if ready_since is not None and anyio.current_time() - ready_since >= self.tui.settle:
                    return None
                await anyio.sleep(POLL_SECONDS)
        return AttemptEnding(
            "failed", reason=f"{self.name}'s TUI didn't take input within {STARTUP_SECONDS:g} s:\n{screen_tail(screen)}",
            retryable=True,
        )

    async def _still_screen(self) -> str:
        """The screen once it has stopped changing (a menu's last key drawn), or as it is after a while."""
        server = self.server
        assert server is not None
        screen, since = await server.screen(), anyio.current_time()
        with anyio.move_on_after(MENU_STILL_MAX_SECONDS):
            while anyio.current_time() - since < MENU_STILL_SECONDS:
                await anyio.sleep(POLL_SECONDS)
                now = await server.screen()
                if now != screen:
                    screen, since = now, anyio.current_time()
        return screen

    async def _press(self, key: str, before: str) -> str:
        """Press `key` on screen `before`, and wait for its effect to show (the screen changing); the screen then."""
        server = self.server
        assert server is not None
        await server.keys(key)
        screen = before
        with anyio.move_on_after(KEY_SHOWN_SECONDS):
            while screen == before:
                await anyio.sleep(POLL_SECONDS)
                screen = await server.screen()
        return screen

    async def _choose(self, startup: StartupScreen) -> None:
        """Move the menu's cursor to the screen's choice, and take it.

        Each key goes to a screen that has stopped changing, the next only once the last one's
        effect shows: a lagging TUI draws a key late, and a key pressed on a stale screen could
        move past the choice (claude's trust menu wraps to "No, exit") or confirm the next menu."""
        for _ in range(MENU_MOVES):
            screen = await self._still_screen()
            if startup.marker not in screen:
                return  # gone: taken, or the TUI moved on
            choice = selected(screen, self.tui.cursor) or ""
            if choice.startswith(startup.choice):
                await self._press("Enter", screen)
                return
            # menus here list the choice below or above: try down first, then wrap around
            await self._press("Down", screen)
        raise HarnessError(f"{self.name}'s startup screen {startup.marker!r} offered no {startup.choice!r}")

    async def _deliver(self, prompt: str) -> None:
        """Put `prompt` in and press Enter. Where the input box can be read (claude's), Enter waits for the
        box to show the prompt, and isn't pressed if it never does (a lagging TUI dropped the keys, or a
        startup screen came up over the box): the turn then types it again (`_lost`)."""
        server = self.server
        assert server is not None
        if not self.tui.typed:
            await server.paste(prompt)
        else:
            await server.type(prompt)
        shown = not self.tui.boxed
        with anyio.move_on_after(TYPED_SHOWN_SECONDS):
            while not shown:
                screen = await server.screen()
                if startup_screen(screen, self.tui) is not None:
                    return  # Enter here would take the screen's default (claude's trust menu: "No, exit")
                shown = bool(input_box(screen, self.tui.cursor))
                await anyio.sleep(POLL_SECONDS)
        if shown:
            await anyio.sleep(POLL_SECONDS)
            await server.keys("Enter")

    async def _turn(self, prompt: str, received: Callable[[], None] | None) -> AttemptEnding:
        """Deliver `prompt`, then watch until the TUI is idle again, blocked, or gone."""
        server = self.server
        assert server is not None
        if self.transcript is not None:
            self.transcript.expect(prompt)
        await self._deliver(prompt)
        delivered = sent = anyio.current_time()
        tries = 1
        last, still_since = "", anyio.current_time()
        while True:
            await anyio.sleep(POLL_SECONDS)
            screen = await server.screen()
            now = anyio.current_time()
            if screen != last:
                last, still_since = screen, now
            still = now - still_since >= IDLE_STILL_SECONDS
            if await server.dead():
                return AttemptEnding("failed", reason=f"{self.name} exited in its pane:\n{screen_tail(screen)}")
            login = found(screen, self.tui.login)
            if login is not None:
                reason = f"{self.name} isn't logged in ({login!r} on its screen)\n{self.cli.login_hint}"
                return AttemptEnding("failed", reason=reason)
            blocked = found(screen, self.tui.blocked)
            if blocked is not None and still:
                return AttemptEnding("blocked", reason=f"{self.name} is held by a prompt on its screen:\n{screen_tail(screen)}")
            transcript = self.transcript
            if transcript is not None:
                transcript.read()
                if not transcript.accepted:
                    if now - delivered > DELIVERY_ACCEPT_SECONDS:
                        return AttemptEnding(
                            "failed", reason=f"{self.name} didn't take the prompt within {DELIVERY_ACCEPT_SECONDS:g} s "
                            f"(typed {tries} times):\n{screen_tail(screen)}", retryable=True,
                        )
                    startup = startup_screen(screen, self.tui)
                    if startup is not None:  # drawn over the prompt after it was ready: answered, the prompt typed again
                        await self._choose(startup)
                        sent = 0.0
                    waited = anyio.current_time() - sent
                    redo = unsent(screen, self.tui) if tries < DELIVERY_TRIES and waited >= RETYPE_SECONDS else None
                    if redo is not None:
                        log.info("the prompt has no user row: put in again", agent=self.name, redo=redo, tries=tries)
                        await (self._deliver(prompt) if redo == "type" else server.keys("Enter"))
                        tries, sent = tries + 1, anyio.current_time()
                    continue
                if not transcript.received:
                    continue
                if received is not None:
                    received()
                    received = None
                if transcript.finished and found(screen, self.tui.busy) is None:
                    return AttemptEnding("exited")
                continue
            if still and found(screen, self.tui.busy) is None and found(screen, self.tui.ready) is not None:
                return AttemptEnding("exited")

    async def _stop(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            await server.stop()

    async def close(self) -> None:
        """The agent is closing: its pane goes, and is started again outside the run if it is kept."""
        await self._stop()
        attempt = self.last_attempt
        if attempt is None or self.session is None or not should_keep(self.keep_pane, self.last_outcome):
            return
        env = self.cli.env(attempt)
        env.setdefault("TERM", "xterm-256color")
        run_sockets = attempt.launcher.parent.parent
        argv, _ = self.tui.launch(self.cli, self.session)
        pane = KeptPane(
            str(kept_socket(run_sockets, attempt.agent)), attempt.agent, self.name, str(run_sockets), self.session,
            str(attempt.cwd), time.time(),
        )
        keep_when_run_ends(self.tmux, pane, argv, env)

