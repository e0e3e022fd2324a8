"""A sandboxed agent's harness home, its environment, and the model endpoints it may reach.

Each sandboxed agent gets a fresh home of its own, in its directory under the run's (gone
when the run is, `kill -9` included), or kept where its run says from one opening of it to
the next (a Temporal worker's, `runner.Sandbox.homes`): nothing of the user's `$HOME` but the
CLI's credential or config and its first-run answers, copied in from where the agent's
environment says the CLI keeps them. The CLI's sessions then live there, so later turns resume them.

The endpoints are read from the same place (a base URL variable, codex's `config.toml`,
pi's `models.json`, opencode's `opencode.json`), with each CLI's public API as the default:
they are always reachable from the agent's sandbox, whatever its `network` says. An ACP agent
run by `command=[…]` keeps no home known here (but claude's and codex's adapters, which keep
theirs): it gets an empty one, and reaches what the sandbox's `network` allows.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..git import GitFailed, git
from .proxy import Endpoint

HOME_MODE = 0o700
IDENTITY = ("user.name", "user.email")  # of the user's git config, what a commit is made with
GLOBAL_GIT_CONFIG = ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL")  # where git finds the user's own config
MAX_CONFIG_BYTES = 1024 * 1024  # of a credential or config file copied in, or read for its endpoints
STAGING_PREFIX = ".new-"  # of a home being made beside where it goes: no `home_name` starts with a dot but a hash
STAGING_NAME_BYTES = 8  # random bytes in its name
PLAIN_NAME = re.compile(r"[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,63}")
"""A key used as it is for a kept home's name (an agent's, a workflow's, a run id): no dot first,
so neither `.`, `..` nor a hidden name, and no slash."""

@dataclass(frozen=True, slots=True)
class Kept:
    """Where a CLI keeps some of its files: `place` under $HOME, or `within` the directory the
    variable `variable` names where the agent's environment sets it (`place`'s last parts); and
    the files of it copied into a sandbox's home (credentials and config: no history)."""

    place: str
    files: tuple[str, ...]
    variable: str | None = None
    within: str = ""

    def inside(self, home: Path) -> Path:
        """What `variable` names in a sandbox's `home`."""
        return home / self.place.removesuffix(self.within).rstrip("/")


HOME_FILES: dict[str, tuple[Kept, ...]] = {
    "claude": (Kept(".claude", (".credentials.json",), "CLAUDE_CONFIG_DIR"),),
    "codex": (Kept(".codex", ("auth.json", "config.toml"), "CODEX_HOME"),),
    "pi": (Kept(".pi/agent", ("auth.json", "models.json", "settings.json"), "PI_CODING_AGENT_DIR"),),
    "opencode": (
        Kept(".config/opencode", ("opencode.json", "opencode.jsonc"), "XDG_CONFIG_HOME", "opencode"),
        Kept(".local/share/opencode", ("auth.json",), "XDG_DATA_HOME", "opencode"),
    ),
    "qwen": (Kept(".qwen", ("settings.json", "oauth_creds.json")),),
    "gemini": (Kept(".gemini", ("settings.json", "oauth_creds.json", "google_accounts.json"), "GEMINI_CLI_HOME", ".gemini"),),
    "copilot": (Kept(".copilot", ("config.json",), "COPILOT_HOME"),),
}
"""What each CLI (an ACP agent's too) keeps in its home that a sandboxed one is given."""
CLAUDE_FIRST_RUN = {"hasCompletedOnboarding": True, "bypassPermissionsModeAccepted": True}
CLAUDE_KEPT_KEYS = ("oauthAccount", "primaryApiKey", "userID")  # of ~/.claude.json: who is logged in

DEFAULT_ENDPOINTS: dict[str, tuple[str, ...]] = {
    "claude": ("https://api.anthropic.com",),
    "codex": ("https://api.openai.com", "https://chatgpt.com"),
    "pi": ("https://api.anthropic.com", "https://api.openai.com", "https://generativelanguage.googleapis.com", "https://openrouter.ai"),
    "cursor": ("https://api2.cursor.sh",),
    "opencode": ("https://api.anthropic.com", "https://api.openai.com", "https://opencode.ai"),
    "qwen": ("https://portal.qwen.ai", "https://chat.qwen.ai", "https://dashscope.aliyuncs.com"),
    "gemini": ("https://generativelanguage.googleapis.com", "https://cloudcode-pa.googleapis.com", "https://oauth2.googleapis.com"),
    "copilot": ("https://api.github.com", "https://api.githubcopilot.com", "https://api.individual.githubcopilot.com"),
}
BASE_URL_VARIABLES = {
    "claude": "ANTHROPIC_BASE_URL", "qwen": "OPENAI_BASE_URL", "gemini": "GOOGLE_GEMINI_BASE_URL",
    "copilot": "COPILOT_PROVIDER_BASE_URL",
}  # fmt: skip
"""The variable that points a CLI at its model instead of its defaults."""

WITHHELD = (
    "SSH_AUTH_SOCK", "GPG_AGENT_INFO", "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "DISPLAY", "WAYLAND_DISPLAY",
    "TMUX", "STY",
)  # fmt: skip
"""Sockets and sessions of the user's that don't exist inside; withheld so nothing reaches for them."""
PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY")
LOOPBACK_NAMES = "localhost,127.0.0.1,::1"


def _source_dir(kept: Kept, env: Mapping[str, str]) -> Path | None:
    """Where the agent's environment says the CLI keeps `kept`."""
    if kept.variable is not None and env.get(kept.variable):
        return Path(env[kept.variable]) / kept.within
    home = env.get("HOME")
    return Path(home) / kept.place if home else None


def _read(path: Path) -> bytes | None:
    """The start of the regular file at `path`, or None. Opened without blocking: another agent,
    unsandboxed, can put a FIFO in a credential's place, and the run waits for this home."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        chunks, left = [], MAX_CONFIG_BYTES
        while left > 0 and (chunk := os.read(descriptor, left)):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(descriptor)


def git_identity(env: Mapping[str, str]) -> dict[str, str]:
    """The name and email of the user's own git config (`git config --global`, where the agent's
    environment puts it: its HOME, XDG_CONFIG_HOME, GIT_CONFIG_GLOBAL), for a sandboxed `git commit`."""
    place = {name: env[name] for name in GLOBAL_GIT_CONFIG if name in env}
    if "HOME" not in place:
        return {}
    found = {}
    for key in IDENTITY:
        try:
            said = git("config", "--global", "--get", key, check=False, env=place)
        except GitFailed:  # no git: nothing to commit with either
            return {}
        value = said.stdout.removesuffix("\n")
        if said.returncode == 0 and value and "\0" not in value:
            found[key] = value
    return found


def identity_config(identity: Mapping[str, str]) -> str:
    """`identity` (`user.name`, `user.email`) as git config text."""
    if not identity:
        return ""
    return "[user]\n" + "".join(f"\t{key.split('.')[1]} = {quoted(value)}\n" for key, value in identity.items())


def quoted(value: str) -> str:
    """`value` as a git config value: in quotes, its backslashes, quotes, tabs and new lines escaped."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def home_name(key: str) -> str:
    """A file name for `key`, never another key's: the key itself if it is a plain name, else a dot
    and its SHA-256 (no plain name starts with a dot)."""
    return key if PLAIN_NAME.fullmatch(key) else "." + hashlib.sha256(key.encode()).hexdigest()


def found_home(home: Path) -> bool:
    """Whether `home` is a home made before: a directory of this user's, not a link to one."""
    try:
        found = os.lstat(home)
    except FileNotFoundError:
        return False
    return stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid()


def prepare_home(home: Path, harness: str, env: Mapping[str, str]) -> bool:
    """Make `home` (0700) with only the CLI's credential, config and first-run answers, and the
    user's git identity (`.gitconfig`); True. A home already there (`found_home`: kept from an
    earlier opening of the agent) is left as its agent left it, nothing written in it; False.
    It is made whole beside, then renamed into place: a worker killed while making it leaves
    no half-made home for the next opening to take; a link or a file in its place is an OSError."""
    if found_home(home):
        return False
    staging = home.with_name(STAGING_PREFIX + secrets.token_hex(STAGING_NAME_BYTES))
    try:
        _make_home(staging, harness, env)
        os.rename(staging, home)  # onto a directory with files (one made meanwhile), a link or a file: refused
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)  # made by this process, of files only
        if found_home(home):
            return False
        raise
    return True


def _make_home(home: Path, harness: str, env: Mapping[str, str]) -> None:
    os.mkdir(home, HOME_MODE)
    os.chmod(home, HOME_MODE)
    for sub in (".config", ".cache", ".local/share", ".local/state"):
        (home / sub).mkdir(parents=True, mode=HOME_MODE)
    identity = git_identity(env)
    if identity:
        (home / ".gitconfig").write_text(identity_config(identity))
    for kept in HOME_FILES.get(harness, ()):
        target, source = home / kept.place, _source_dir(kept, env)
        target.mkdir(parents=True, mode=HOME_MODE, exist_ok=True)
        for name in kept.files:
            data = _read(source / name) if source is not None else None
            if data is not None:
                descriptor = os.open(target / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
                with os.fdopen(descriptor, "wb") as copy:
                    copy.write(data)
    if harness == "claude":
        (kept,) = HOME_FILES["claude"]
        source = _source_dir(kept, env)
        answers: dict[str, Any] = dict(CLAUDE_FIRST_RUN)
        for config in ((source / ".claude.json") if source else None, Path(env.get("HOME", "/nonexistent")) / ".claude.json"):
            data = _read(config) if config is not None else None
            if data:
                try:
                    found = json.loads(data)
                except ValueError:
                    continue
                if isinstance(found, dict):
                    answers.update({key: found[key] for key in CLAUDE_KEPT_KEYS if key in found})
                    break
        (home / kept.place / ".claude.json").write_text(json.dumps(answers))


def endpoint_of(url: str) -> Endpoint | None:
    """The host and port a base URL reaches, or None if it names none."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return Endpoint(parts.hostname.lower(), port)


def _config(harness: str, name: str, env: Mapping[str, str]) -> Any:
    """The CLI's config file `name` (JSON, or TOML by its suffix) where its environment keeps it; {} if none or unreadable."""
    source = _source_dir(HOME_FILES[harness][0], env)
    data = _read(source / name) if source is not None else None
    try:
        return (tomllib.loads(data.decode()) if name.endswith(".toml") else json.loads(data)) if data else {}
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, ValueError):
        return {}


def _field(found: Any, *keys: str) -> Any:
    """`found[keys[0]][keys[1]]…`, or None where one isn't a mapping."""
    for key in keys:
        found = found.get(key) if isinstance(found, dict) else None
    return found


def configured_urls(harness: str, env: Mapping[str, str]) -> list[str]:
    """The base URLs the CLI is configured with (from its env and config files); none: its defaults."""
    urls: list[str] = []
    variable = BASE_URL_VARIABLES.get(harness)
    if variable is not None and env.get(variable):
        urls.append(env[variable])
    elif harness == "codex":
        config = _config("codex", "config.toml", env)
        chosen = _field(config, "model_providers", str(config.get("model_provider")))
        if isinstance(_field(chosen, "base_url"), str):
            urls.append(chosen["base_url"])
        elif env.get("OPENAI_BASE_URL"):
            urls.append(env["OPENAI_BASE_URL"])
    elif harness in ("pi", "opencode"):  # each provider's, and the defaults for a provider with none
        config = _config(harness, "models.json" if harness == "pi" else "opencode.json", env)
        providers = _field(config, "providers" if harness == "pi" else "provider")
        for provider in providers.values() if isinstance(providers, dict) else ():
            url = _field(provider, "baseUrl") if harness == "pi" else _field(provider, "options", "baseURL")
            if isinstance(url, str):
                urls.append(url)
        urls += DEFAULT_ENDPOINTS[harness]
    return urls or list(DEFAULT_ENDPOINTS.get(harness, ()))


def model_endpoints(harness: str, env: Mapping[str, str]) -> frozenset[Endpoint]:
    return frozenset(found for url in configured_urls(harness, env) if (found := endpoint_of(url)) is not None)


def sandbox_env(env: Mapping[str, str], home: Path, proxy_port: int | None) -> dict[str, str]:
    """The environment inside: the agent's, with its home, /tmp, and the proxy (if it has one)."""
    inside = {
        name: value
        for name, value in env.items()
        if name not in WITHHELD and name.upper() not in PROXY_VARIABLES
    }
    inside.update(
        HOME=str(home),
        TMPDIR="/tmp",
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_DATA_HOME=str(home / ".local/share"),
        XDG_STATE_HOME=str(home / ".local/state"),
        CLAUDE_CODE_TMPDIR="/tmp",
    )
    inside.update({kept.variable: str(kept.inside(home)) for places in HOME_FILES.values() for kept in places if kept.variable})
    if proxy_port is not None:
        url = f"http://127.0.0.1:{proxy_port}"
        for name in PROXY_VARIABLES[:3]:
            inside[name] = inside[name.lower()] = url
        inside["NO_PROXY"] = inside["no_proxy"] = LOOPBACK_NAMES
    return inside
