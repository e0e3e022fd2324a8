"""What a sandbox may see, write and reach: its spec, checked whole before it opens.

A sandbox holds its whole spec or doesn't open: every path must exist, every network entry
must be a host name (`api.example.com`) or a subdomain suffix (`*.pypi.org`: its subdomains,
not itself), with no scheme, port, path or IP address. Relative paths are taken from the
sandbox's cwd. Pure, but for `resolve_spec`, which looks at the file system.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Any

import msgspec

from ..errors import DefinitionError

MAX_HOST_CHARS = 253  # a DNS name, without its trailing dot
MAX_LABEL_CHARS = 63
MAX_ENTRIES = 256  # of read, of write, and of network, each
_LABEL_CHARACTERS = set("abcdefghijklmnopqrstuvwxyz0123456789-")
WILDCARD = "*."


class SandboxSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A sandbox's spec: its cwd (readable), more to read, where it may write, which hosts it may reach.

    `SandboxSpec()` is a reader: it reads its cwd, writes nothing, reaches only its model.
    """

    cwd: str | None = None
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    network: tuple[str, ...] = ()


class RunSandboxFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`awf run --sandbox box.json`: the run's one sandbox, working in --cwd (so it names no cwd or key)."""

    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    network: tuple[str, ...] = ()


class ResolvedSpec(msgspec.Struct, frozen=True):
    """A spec checked against the file system: absolute, real paths; network entries lowercased."""

    cwd: Path
    read: tuple[Path, ...]
    write: tuple[Path, ...]
    network: tuple[str, ...]


def host_problem(entry: str) -> str | None:
    """Why `entry` is not a network entry (an exact host or `*.suffix`), or None if it is one."""
    if not isinstance(entry, str) or not entry:
        return "an entry is a host name like 'api.example.com' or a suffix like '*.pypi.org'"
    if any(mark in entry for mark in ("://", "/", ":", "@", "?", "#")) or entry.strip() != entry:
        return f"{entry!r} has a scheme, port, path or space: give the host name alone, like 'api.example.com'"
    host = entry[len(WILDCARD) :] if entry.startswith(WILDCARD) else entry
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return f"{entry!r} is an IP address: a sandbox reaches hosts by name only"
    if len(host) > MAX_HOST_CHARS:
        return f"{entry!r} is longer than a host name can be ({MAX_HOST_CHARS} characters)"
    labels = host.lower().split(".")
    for label in labels:
        if not label or len(label) > MAX_LABEL_CHARS or not set(label) <= _LABEL_CHARACTERS:
            return f"{entry!r} is not a host name: labels of letters, digits and '-', separated by '.' ('*.' only in front)"
        if label.startswith("-") or label.endswith("-"):
            return f"{entry!r} is not a host name: a label can't start or end with '-'"
    if labels[-1].isdigit():
        return f"{entry!r} is not a host name: its last label is a number"
    if entry.startswith(WILDCARD) and len(labels) < 2:
        return f"{entry!r} would allow a whole top-level domain: give at least two labels after '*.'"
    return None


def check_spec(spec: Any) -> SandboxSpec:
    """`spec` (a SandboxSpec or a mapping of its fields) as a SandboxSpec; DefinitionError if it isn't one."""
    if not isinstance(spec, SandboxSpec):
        try:
            spec = msgspec.convert(spec, SandboxSpec)
        except msgspec.ValidationError as error:
            raise DefinitionError(f"not a sandbox spec: {error}") from None
    for field in ("read", "write", "network"):
        if len(getattr(spec, field)) > MAX_ENTRIES:
            raise DefinitionError(f"a sandbox's {field} has at most {MAX_ENTRIES} entries")
    for entry in spec.network:
        problem = host_problem(entry)
        if problem is not None:
            raise DefinitionError(f"sandbox network: {problem}")
    for entry in (*spec.read, *spec.write, *((spec.cwd,) if spec.cwd is not None else ())):
        if not isinstance(entry, str) or not entry or "\0" in entry:
            raise DefinitionError(f"sandbox path {entry!r} is not a path")
    return spec


def resolve_spec(spec: SandboxSpec, base: Path) -> ResolvedSpec:
    """The spec with every path made absolute (from its cwd, itself from `base`) and real,
    each checked to exist; raises DefinitionError naming the first that doesn't."""
    cwd = _existing((base / spec.cwd) if spec.cwd is not None else base, "cwd")
    if not cwd.is_dir():
        raise DefinitionError(f"sandbox cwd {cwd} is not a directory")
    read = tuple(_existing(cwd / entry, "read") for entry in spec.read)
    write = tuple(_existing(cwd / entry, "write") for entry in spec.write)
    return ResolvedSpec(cwd, read, write, tuple(entry.lower() for entry in spec.network))


def _existing(path: Path, field: str) -> Path:
    real = Path(os.path.realpath(path))
    if not real.exists():
        raise DefinitionError(f"sandbox {field} {path} does not exist: a sandbox holds its whole spec or doesn't open")
    return real


def allows(network: tuple[str, ...], host: str) -> bool:
    """Whether `host` is one of `network`'s exact hosts, or a subdomain of one of its suffixes."""
    host = host.lower().rstrip(".")
    for entry in network:
        if entry.startswith(WILDCARD):
            if host.endswith(entry[1:]):  # ".pypi.org": a subdomain, never the suffix itself
                return True
        elif host == entry:
            return True
    return False
