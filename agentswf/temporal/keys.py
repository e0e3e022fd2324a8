"""A deployment's run key: who may speak to an agentswf workflow on Temporal, and what its turn workers run.

Temporal without authorization set up (the dev server, most self-hosted clusters) asks nobody
who is calling, and an agent on a worker runs next to the worker's own client. So identity
comes from a secret the agents don't have: one key per deployment, held by whatever starts
runs, hosts their workflow code, runs their turns, or decides for a person (`awf approve`).
Each update the workflow takes, each turn it schedules and each turn's result carries an
HMAC-SHA256 of what it says and where it belongs (the workflow's id and run, the update or
activity, who, a nonce): without the key nothing can be forged, and a signature made for one
thing is worth nothing for another.

The key is read from `AGENTSWF_TEMPORAL_KEY`, or from the file `AGENTSWF_TEMPORAL_KEY_FILE`
names, or from `default_key_file()`, which the commands that start runs and workers create
(0600) on first use, so runs on one machine work with nothing set up. Standard library and
msgspec only: `awf` reads it without the extra.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec

from ..errors import RunKeyError
from ..harnesses.environment import KEY_FILE_VARIABLE, KEY_VARIABLE
from ..harnesses.environment import KEY_VARIABLES as KEY_VARIABLES  # what an agent never gets: `scrubbed`
from .messages import Sealed

MIN_KEY_CHARS = 32  # a key shorter than this is refused: a guessable one protects nothing
NEW_KEY_BYTES = 32
MAX_KEY_FILE_BYTES = 4096  # read of a key file: a key is a line
KEY_ID_CHARS = 12  # a key's id, said in errors: a mismatch is named without showing either key
_PR_SET_DUMPABLE = 4


class RunKey:
    """The deployment's secret; `sign` and `verify` what crosses Temporal. Its repr shows its id only."""

    def __init__(self, secret: str | bytes) -> None:
        raw = secret.encode() if isinstance(secret, str) else bytes(secret)
        raw = raw.strip()
        if len(raw) < MIN_KEY_CHARS:
            raise RunKeyError(f"a run key is at least {MIN_KEY_CHARS} characters (this one has {len(raw)})")
        self._secret = raw
        self.id = hmac.new(raw, b"agentswf key id", hashlib.sha256).hexdigest()[:KEY_ID_CHARS]

    def sign(self, *parts: Any) -> str:
        """The HMAC of `parts` (JSON-able), over their canonical bytes."""
        return hmac.new(self._secret, canonical(parts), hashlib.sha256).hexdigest()

    def verify(self, tag: str, *parts: Any) -> bool:
        return isinstance(tag, str) and hmac.compare_digest(tag, self.sign(*parts))

    def __repr__(self) -> str:
        return f"<RunKey {self.id}>"


def canonical(value: Any) -> bytes:
    """The bytes a signature covers: JSON with sorted keys, the same for a value and its round trip
    through Temporal's JSON payloads (tuples are arrays, floats as Python writes them)."""
    return msgspec.json.encode(value, order="sorted")


def default_key_file() -> Path:
    """`$XDG_CONFIG_HOME/agentswf/temporal.key` (`~/.config/…` without it)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "agentswf" / "temporal.key"


def load_key(env: Mapping[str, str] | None = None, *, create: bool = False) -> RunKey:
    """The key from `env` (os.environ): its variable, else the file it names, else the default
    file, made if `create` and missing. Raises RunKeyError saying what to give."""
    env = os.environ if env is None else env
    if env.get(KEY_VARIABLE):
        return RunKey(env[KEY_VARIABLE])
    named = env.get(KEY_FILE_VARIABLE)
    path = Path(named).expanduser() if named else default_key_file()
    if not path.exists():
        if named or not create:
            raise RunKeyError(
                f"no run key at {path}: give this deployment's key in {KEY_VARIABLE}, or in a file named by "
                f"{KEY_FILE_VARIABLE} (default {default_key_file()}); docs/guide/temporal.md says how"
            )
        return _create(path)
    return _read(path)


def _read(path: Path) -> RunKey:
    """The key in `path`: a regular file of its owner's only, read once through one descriptor (a
    FIFO or a device put in its place is refused, not waited on)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise RunKeyError(f"the run key {path} can't be read: {error.strerror}") from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise RunKeyError(f"the run key {path} is not a regular file")
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise RunKeyError(f"the run key {path} can be read by others (mode {stat.filemode(info.st_mode)}): chmod 600 it")
        data = os.read(descriptor, MAX_KEY_FILE_BYTES)
    finally:
        os.close(descriptor)
    try:
        return RunKey(data.decode(errors="replace"))
    except RunKeyError as error:
        raise RunKeyError(f"{path}: {error}") from None


def _create(path: Path) -> RunKey:
    """A new key in `path`, readable by its owner only (made exclusively: two first uses get one key)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    secret = secrets.token_urlsafe(NEW_KEY_BYTES)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read(path)
    with os.fdopen(descriptor, "w") as file:
        file.write(secret + "\n")
    return RunKey(secret)


def held(key: RunKey) -> RunKey:
    """`key`, now held by this process: it is made non-dumpable, and the key's own variable leaves its
    environment (what it starts — a run's watchdog, say — inherits nothing to show in /proc)."""
    no_dump()
    os.environ.pop(KEY_VARIABLE, None)
    return key


def no_dump() -> bool:
    """Make this process non-dumpable (Linux `prctl(PR_SET_DUMPABLE, 0)`, as ssh-agent does): other
    processes of its user (its agents) can then neither read its /proc/<pid>/environ or mem nor
    ptrace it. A child that executes a program is dumpable again. False where it can't be done."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


SealKind = Literal["start", "update", "activity", "result"]


class SealBroken(RunKeyError):
    """What came isn't sealed with this key for where it came: `mismatch` when it was sealed with
    another key (a misconfigured deployment), not forged."""

    def __init__(self, message: str, *, mismatch: bool = False) -> None:
        super().__init__(message)
        self.mismatch = mismatch


def seal(
    key: RunKey, body: Any, *, kind: SealKind, workflow: str, run: str, name: str, by: str, nonce: str | None = None
) -> dict[str, Any]:
    """`body` sealed for `name` (an update, or an activity's type/id) of workflow `workflow`'s run `run`,
    as sent by `by`: the builtins that cross. An update gets a fresh nonce unless given one."""
    builtins = msgspec.to_builtins(body)
    once = secrets.token_hex(12) if nonce is None else nonce
    tag = key.sign(kind, workflow, run, name, by, once, builtins)
    return msgspec.to_builtins(Sealed(body=builtins, by=by, nonce=once, key=key.id, tag=tag))  # type: ignore[no-any-return]


def unseal(
    key: RunKey, raw: Any, *, kind: SealKind, workflow: str, run: str, name: str, what: str, holder: str = "this run"
) -> Sealed:
    """The Sealed `raw` is, if `key` sealed it for `name` of that workflow and run; else SealBroken,
    saying why in words about `what` (the update, the turn...) and `holder` (who holds `key`)."""
    try:
        sealed = msgspec.convert(raw, Sealed)
    except msgspec.ValidationError:
        raise SealBroken(f"{what} carries no signature of this deployment's run key") from None
    if sealed.key != key.id:
        raise SealBroken(
            f"{what} was signed with run key {sealed.key}, not with {holder}'s ({key.id}): every process of a "
            f"deployment (awf run, awf worker, awf approve...) needs the same key ({KEY_VARIABLE})",
            mismatch=True,
        )
    if not key.verify(sealed.tag, kind, workflow, run, name, sealed.by, sealed.nonce, sealed.body):
        raise SealBroken(f"{what}'s signature doesn't verify: it was not made for this, by a holder of the run key")
    return sealed
