"""An agent CLI's version, read at a run's first use of its executable and checked against what was tested.

`--version` is run once per executable and modification time in a process (a CLI updated in
place is read again), under a keeper like any CLI, and given `VERSION_TIMEOUT_SECONDS`. Below
the minimum (harnesses/versions.py) the agent's open fails with a DefinitionError naming the
version, the minimum and the install command; a newer or untested version, or one that can't be
read, is warned of once a run, and the run goes on with it.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio

from ..errors import DefinitionError
from .process import run_in_group
from .versions import TESTED, Version, parse_version, shown, standing, verdict

VERSION_TIMEOUT_SECONDS = 10.0  # for `<cli> --version` to answer (pi on a cold Node.js takes about 1 s)
SAID_CHARS = 300  # of what a `--version` that gave no version printed, quoted in the warning


@dataclass(frozen=True, slots=True)
class CliVersion:
    """What `<path> --version` said: the version, or why there is none."""

    cli: str
    path: str
    version: Version | None
    problem: str = ""  # why no version was read

    @property
    def text(self) -> str | None:
        return shown(self.version) if self.version is not None else None


_read: dict[tuple[str, int], CliVersion] = {}  # by real path and modification time (ns): read once a process


async def read_version(cli: str, path: str, env: Mapping[str, str], cwd: Path) -> CliVersion:
    """`cli`'s version as `path --version` prints it (pi 0.x prints it on standard error)."""
    real = os.path.realpath(path)
    try:
        key = (real, os.stat(real).st_mtime_ns)
    except OSError as error:
        return CliVersion(cli, path, None, f"it can't be read: {error.strerror or error}")
    if key in _read:
        return _read[key]
    exited = None
    with anyio.move_on_after(VERSION_TIMEOUT_SECONDS):  # in a TMPDIR of its own: opencode makes `$TMPDIR/opencode` even to say its version
        exited = await run_in_group([path, "--version"], input=b"", cwd=cwd, env=env)
    if exited is None:
        found = CliVersion(cli, path, None, f"`{path} --version` gave no answer in {VERSION_TIMEOUT_SECONDS:g} s")
    else:
        said = (exited.stdout + "\n" + exited.stderr).strip()
        version = parse_version(said) if exited.exit_code == 0 else None
        problem = "" if version is not None else (
            f"`{path} --version` exited with status {exited.exit_code}" + (f": {said[-SAID_CHARS:]}" if said else "")
        )
        found = CliVersion(cli, path, version, problem)
    _read[key] = found  # a timeout too: the run goes on, and so does the next, without waiting again
    return found


async def _unrecorded(found: CliVersion, agent: str) -> None:
    return None


def known_version(path: str) -> str | None:
    """The version `path --version` said, if it was read in this process (a failing turn's reason names it)."""
    real = os.path.realpath(path)
    try:
        found = _read.get((real, os.stat(real).st_mtime_ns))
    except OSError:
        return None
    return found.text if found is not None else None


class CliChecks:
    """A run's checks of the CLIs its agents open on: each executable read and judged once a run.

    `warn` is told each warning once (the Workflow sets it to its log); `used` each executable
    the run uses, with its version and the agent that opened on it first (the run's record)."""

    def __init__(self, used: Callable[[CliVersion, str], Awaitable[None]] = _unrecorded) -> None:
        self.warn: Callable[[str], None] = lambda message: None
        self._used = used
        self._seen: dict[str, CliVersion] = {}  # by path

    async def check(self, agent: str, cli: str, path: str, env: Mapping[str, str], cwd: Path) -> CliVersion:
        """`cli` at `path`'s version; DefinitionError below the minimum, a warning (once) outside the tested ranges.

        A CLI with no declared versions (cursor, which isn't on npm) isn't run for one."""
        if cli not in TESTED:
            return CliVersion(cli, path, None, "no versions of it are declared")
        found = self._seen.get(path)
        if found is None:
            found = await read_version(cli, path, env, cwd)
        if found.version is not None and standing(cli, found.version) == "below":
            raise DefinitionError(f"{verdict(cli, found.version)} ({path})")
        if path in self._seen:
            return found
        self._seen[path] = found
        await self._used(found, agent)
        if found.version is None:
            self.warn(f"{cli}'s version is unknown, so it isn't checked: {found.problem}")
        elif (said := verdict(cli, found.version)) is not None:
            self.warn(f"{said} ({path})")
        return found
