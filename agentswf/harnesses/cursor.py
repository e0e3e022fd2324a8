"""Cursor's agent (`cursor-agent`) headless: `cursor-agent -p --output-format json`, resumed by id.

cursor-agent is not on npm, so it can't be installed here: this adapter is built from its
documented flags and output (one JSON object with `session_id`, `is_error` and `result`),
and tested against a stand-in CLI that prints that shape. Its absent capabilities (no
effort flag, no waiting for a reply) are in the capability table with their reasons.
"""

from __future__ import annotations

from typing import Any

from .base import Attempt
from .cli import CliHarness, OutputReader


class CursorReader(OutputReader):
    def event(self, event: dict[str, Any]) -> None:
        if event.get("type", "result") != "result":
            return
        self.finished = True
        self.session = event.get("session_id") or self.session
        if event.get("is_error"):
            self.error = str(event.get("result") or "an error")


class CursorHarness(CliHarness):
    name = "cursor"
    executable_name = "cursor-agent"
    install = "curl https://cursor.com/install -fsS | bash"
    login_hint = "Run `cursor-agent login`, or set CURSOR_API_KEY in the runtime's env."

    def argv(self, attempt: Attempt) -> list[str]:
        argv = [self.executable, "-p", "--output-format", "json", "--force"]
        if attempt.session:
            argv += ["--resume", attempt.session]
        if self.model:
            argv += ["--model", self.model]
        return argv + list(self.args)

    def reader(self, attempt: Attempt) -> CursorReader:
        return CursorReader()
