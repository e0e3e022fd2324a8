"""`wf.sandboxes.open(...)`: sandboxes a workflow puts its agents in.

A sandbox is checked whole when it opens (every path, every network entry, and that
bubblewrap can make one here) or it doesn't open: a `DefinitionError` before any agent of
it starts. It has nothing to tear down at the run's end: each attempt's namespaces and proxy
end with the attempt, and its agents' homes are in the run's directory of sockets, removed
with it (by the run's watchdog if the run is killed), unless they are kept (`keep_homes`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import msgspec
from msgspec.structs import replace

from ..engine.record.layout import make_private_dirs
from ..errors import DefinitionError
from ..harnesses.base import Harness
from ..harnesses.pane import PaneHarness
from ..harnesses.runtime import Runtime
from ..sandbox.homes import home_name
from ..sandbox.runner import Sandbox, SandboxedHarness, check_reach, find_bwrap, probe
from .worktrees import RunWorktrees

__all__ = ["Sandbox", "SandboxSpec", "Sandboxes", "open_sandbox", "read_run_sandbox", "run_sandbox"]
from ..sandbox.spec import RunSandboxFile, SandboxSpec, check_spec, resolve_spec

Log = Callable[..., None]
PRIVATE_PREFIX = "agent:"  # the key of an agent's own sandbox, from an inline spec
HOMES_NAME = "homes"  # in the record: the homes kept of its runs' sandboxed agents (`keep_homes`)


class Sandboxes:
    """The run's sandboxes by key (`wf.sandboxes`): `await wf.sandboxes.open(key, write=["."])`.

    `keep_homes` (a workflow's name and a run id, with a `record`) keeps its agents' homes, where
    their CLIs' sessions are, from one opening of an agent to the next (`kept_homes`): a Temporal
    worker opens an agent afresh for each turn.
    """

    def __init__(
        self, cwd: Path, log: Log, *, record: Path | None = None, worktrees: RunWorktrees | None = None,
        keep_homes: tuple[str, str] | None = None,
    ) -> None:
        self._cwd = cwd
        self._log = log
        self._record = Path(os.path.realpath(record)) if record is not None else None  # the run root
        self._homes = kept_homes(self._record, *keep_homes) if keep_homes is not None and self._record is not None else None
        self._worktrees = worktrees  # the run's (wf.worktree): an agent on one gets a git of its own
        self._open: dict[str, tuple[SandboxSpec, Sandbox]] = {}
        self._run_at: dict[Path, Sandbox] = {}  # the run's sandbox (awf run --sandbox), at each agent's cwd

    async def open(
        self,
        key: str,
        *,
        cwd: str | Path | None = None,
        read: tuple[str | Path, ...] | list[str | Path] = (),
        write: tuple[str | Path, ...] | list[str | Path] = (),
        network: tuple[str, ...] | list[str] = (),
    ) -> Sandbox:
        """Open a sandbox, or return the one open under `key` with the same spec.

        `cwd` (default: the run's) is readable, as are `read`; `write` is where its agents may
        write; `network` the hosts they may reach (`"api.example.com"`, `"*.pypi.org"`), besides
        each CLI's model endpoint. Relative paths are from `cwd`. With nothing given, a reader.
        """
        return await self._open_spec(key, given_spec(key, cwd, read, write, network))

    async def _open_spec(self, key: str, spec: SandboxSpec, base: Path | None = None) -> Sandbox:
        """The sandbox `spec` under `key`, its relative paths from `base` (the run's cwd unless given)."""
        existing = self._open.get(key)
        if existing is not None:
            if existing[0] != spec:
                raise DefinitionError(f"sandbox {key} is already open with a different spec")
            return existing[1]
        sandbox = await open_sandbox(key, spec, base or self._cwd, self._log, record=self._record, homes=self._homes)
        self._open[key] = (spec, sandbox)
        self._opened(sandbox)
        return sandbox

    def _opened(self, sandbox: Sandbox) -> None:
        """A line in the run's record: the sandbox and its whole spec."""
        spec = sandbox.spec
        self._log(
            f"sandbox {sandbox.key} opened", sandbox=sandbox.key, cwd=str(spec.cwd), read=", ".join(map(str, spec.read)),
            write=", ".join(map(str, spec.write)), network=", ".join(spec.network),
        )  # fmt: skip

    async def confine(self, agent: str, harness: Harness, sandbox: Any, cwd: Path) -> Harness:
        """The harness agent `agent` (working in `cwd`) runs on, in `sandbox` (a Sandbox, or an
        inline spec of its own)."""
        if (isinstance(harness, PaneHarness) and sandbox is not None) or (
            isinstance(harness, SandboxedHarness) and isinstance(harness.inner, PaneHarness)
        ):
            raise DefinitionError(f"agent {agent}: an agent in a pane can't be sandboxed yet; run it headless to sandbox it")
        real = Path(os.path.realpath(cwd))
        worktree = self._worktrees.containing(real) if self._worktrees is not None else None
        if isinstance(harness, SandboxedHarness):  # the run's sandbox (awf run --sandbox) has it already
            if sandbox is not None:
                raise DefinitionError(
                    f"agent {agent}: this run puts every agent in the sandbox given with awf run --sandbox, "
                    "so sandbox= can't be given"
                )
            at = await self._run_sandbox(harness.sandbox, real)
            if at is not harness.sandbox:
                return at.confine(agent, harness.inner, worktree)
            harness.worktree = worktree
            return harness
        if sandbox is None:
            return harness
        if not isinstance(sandbox, Sandbox):
            if not isinstance(sandbox, (SandboxSpec, Mapping)):
                raise DefinitionError(
                    f"agent {agent}: sandbox= takes a Sandbox from wf.sandboxes.open, or a spec of its own "
                    f"(a SandboxSpec or a dict of read, write, network), not {type(sandbox).__name__}"
                )
            spec = check_spec(sandbox)  # an agent's own: its paths from its cwd, unless the spec names a cwd
            sandbox = await self._open_spec(PRIVATE_PREFIX + agent, spec, real if spec.cwd is None else None)
            sandbox.own = True
        elif all(sandbox is not opened for _, opened in self._open.values()):
            raise DefinitionError(f"agent {agent}: sandbox {sandbox.key} is not one of this run's")
        check_reach(replace(sandbox.spec, cwd=real), self._record)  # the agent's cwd is in its sandbox too
        if self._homes is not None:  # where the agent's home is kept (made at its first turn)
            await anyio.to_thread.run_sync(make_private_dirs, self._homes)
        return sandbox.confine(agent, harness, worktree)

    async def _run_sandbox(self, sandbox: Sandbox, cwd: Path) -> Sandbox:
        """The run's sandbox at the agent's cwd `cwd`: its relative paths (`write=["."]`) from there,
        so an agent on a worktree writes that worktree; one per cwd, recorded as it opens."""
        if sandbox.given is None or cwd == sandbox.spec.cwd:
            check_reach(sandbox.spec, self._record)
            if sandbox.log is not self._log:  # its first agent: from now on, it records in this run
                sandbox.log, sandbox.record, sandbox.homes = self._log, self._record, self._homes
                self._opened(sandbox)
            return sandbox
        if cwd not in self._run_at:
            self._run_at[cwd] = await open_sandbox(
                sandbox.key, sandbox.given, cwd, self._log, record=self._record, homes=self._homes
            )
            self._opened(self._run_at[cwd])
        return self._run_at[cwd]


def kept_homes(record: Path, workflow: str, run_id: str) -> Path:
    """Where the homes of run `run_id` of `workflow` are kept, each in `<agent key>` (`home_name`)
    there: the same agent of the same run finds its own again on this file system, no other agent
    or run does, and no sandbox sees it but its own agent's (it is in the record, which every
    sandbox has covered where a path it is given holds it)."""
    return record / HOMES_NAME / home_name(workflow) / home_name(run_id)


def given_spec(key: str, cwd: str | Path | None, read: Any, write: Any, network: Any) -> SandboxSpec:
    """What `wf.sandboxes.open` was given, checked as a spec (on any engine: it reads no file)."""
    if not isinstance(key, str) or not key or len(key) > 64:
        raise DefinitionError(f"{key!r} is not a sandbox key: a non-empty string of at most 64 characters")
    if isinstance(network, str) or isinstance(read, (str, Path)) or isinstance(write, (str, Path)):
        raise DefinitionError("a sandbox's read, write and network are lists, like write=['.']")
    return check_spec(
        SandboxSpec(
            cwd=None if cwd is None else str(cwd),
            read=tuple(str(path) for path in read),
            write=tuple(str(path) for path in write),
            network=tuple(network),
        )
    )


def sandbox_cwd(sandbox: Any, run_cwd: Path) -> Path:
    """Where an agent opened in `sandbox` (a Sandbox, a spec, or None) works unless told: the sandbox's cwd."""
    if isinstance(sandbox, Sandbox):
        return sandbox.spec.cwd
    given = sandbox.get("cwd") if isinstance(sandbox, Mapping) else getattr(sandbox, "cwd", None)
    return (run_cwd / given).resolve() if isinstance(given, (str, Path)) else run_cwd


async def open_sandbox(
    key: str, spec: SandboxSpec, base: Path, log: Log, *, record: Path | None = None, homes: Path | None = None
) -> Sandbox:
    """A sandbox of `spec` checked whole (paths, network, bubblewrap) or a DefinitionError;
    `record` (the run root) is neither given to it nor seen from it; `homes` keeps its agents' homes."""
    resolved = resolve_spec(check_spec(spec), base)
    check_reach(resolved, record)
    bwrap = find_bwrap()
    await probe(bwrap)
    return Sandbox(key, resolved, bwrap=bwrap, log=log, record=record, given=spec, homes=homes)


def read_run_sandbox(file: str | Path) -> RunSandboxFile:
    """`awf run --sandbox FILE`'s file: JSON of read, write and network (no cwd or key)."""
    try:
        return msgspec.json.decode(Path(file).read_bytes(), type=RunSandboxFile)
    except OSError as error:
        raise DefinitionError(f"--sandbox {file}: {error.strerror or error}") from None
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise DefinitionError(f"--sandbox {file}: not a sandbox (a JSON object of read, write, network): {error}") from None


async def run_sandbox(
    given: RunSandboxFile, cwd: Path, make: Callable[[str, Runtime], Harness]
) -> Callable[[str, Runtime], Harness]:
    """The run's one sandbox (`awf run --sandbox`, `agentswf.run(sandbox=…)`), working in `cwd`,
    as the way every agent's harness is made: `make`'s, put in it."""
    spec = SandboxSpec(read=given.read, write=given.write, network=given.network)
    sandbox = await open_sandbox("run", spec, cwd, lambda message, **fields: None)
    return lambda key, runtime: sandbox.confine(key, make(key, runtime))
