"""What a sandbox may see, write and reach: its spec, checked whole before it opens.

A sandbox holds its whole spec or doesn't open: every path must exist, every network entry
must be a host name (`api.example.com`) or a subdomain suffix (`*.pypi.org`: its subdomains,
not itself), with a port if it names one (`api.example.com:8443`), and no scheme, path or IP
address. An entry's port is where a tunnel (CONNECT) to its hosts may go: TUNNEL_PORT where it
names none, since a tunnel elsewhere may carry plain HTTP the proxy doesn't read (for another
site behind the same address). Relative paths are taken from the sandbox's cwd. Pure, but for
`resolve_spec`, which looks at the file system.
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
TUNNEL_PORT = 443  # where a tunnel to a host named without a port may go: HTTPS's
MAX_PORT = 65535


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
        return (
            f"{entry!r} has a scheme, path or space, or a port that isn't a number: give a host name like "
            "'api.example.com', and a port only to name one, like 'api.example.com:8443'"
        )
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


def split_entry(entry: str) -> tuple[str, int | None]:
    """A network entry's host and the port it names (None where it names none, or none that is a number)."""
    host, colon, port = entry.rpartition(":")
    if not colon or not (port.isascii() and port.isdigit()):
        return entry, None
    return host, int(port)


def entry_problem(entry: Any) -> str | None:
    """Why `entry` is not a network entry (a host or `*.suffix`, and `:port` if it names one), or None if it is one."""
    if not isinstance(entry, str):
        return host_problem(entry)
    host, port = split_entry(entry)
    if port is not None and not 0 < port <= MAX_PORT:
        return f"{entry!r} names port {port}: a port is 1 to {MAX_PORT}"
    return host_problem(host)


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
        problem = entry_problem(entry)
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


def allows(network: tuple[str, ...], host: str, tunnel_port: int | None = None) -> bool:
    """Whether `host` is one of `network`'s exact hosts, or a subdomain of one of its suffixes; for
    a tunnel to `tunnel_port`, by an entry naming that port (or none, for TUNNEL_PORT). A plain
    request (None), which the proxy reads, may go to any port of a host an entry names."""
    host = host.lower().rstrip(".")
    for named in network:
        entry, port = split_entry(named)
        if tunnel_port is not None and tunnel_port != (TUNNEL_PORT if port is None else port):
            continue
        if entry.startswith(WILDCARD):
            if host.endswith(entry[1:]):  # ".pypi.org": a subdomain, never the suffix itself
                return True
        elif host == entry:
            return True
    return False
