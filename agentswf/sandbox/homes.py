"""A sandboxed agent's harness home, its environment, and the model endpoints it may reach.

Each sandboxed agent gets a fresh home of its own, in its directory under the run's (gone
when the run is, `kill -9` included): nothing of the user's `$HOME` but the CLI's credential
or config and its first-run answers, copied in from where the agent's environment says the
CLI keeps them. The CLI's sessions then live there, so later turns resume them.

The endpoints are read from the same place (a base URL variable, codex's `config.toml`,
pi's `models.json`), with each CLI's public API as the default: they are always reachable
from the agent's sandbox, whatever its `network` says.
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..git import GitFailed, git
from .proxy import Endpoint

HOME_MODE = 0o700
IDENTITY = ("user.name", "user.email")  # of the user's git config, what a commit is made with
GLOBAL_GIT_CONFIG = ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL")  # where git finds the user's own config
MAX_CONFIG_BYTES = 1024 * 1024  # of a credential or config file copied in, or read for its endpoints

# What each CLI keeps in its home: (the variable naming its directory, the default under $HOME,
# the files copied in: credentials and config).
HOME_FILES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "claude": ("CLAUDE_CONFIG_DIR", ".claude", (".credentials.json",)),
    "codex": ("CODEX_HOME", ".codex", ("auth.json", "config.toml")),
    "pi": ("PI_CODING_AGENT_DIR", ".pi/agent", ("auth.json", "models.json", "settings.json")),
}
CLAUDE_FIRST_RUN = {"hasCompletedOnboarding": True, "bypassPermissionsModeAccepted": True}
CLAUDE_KEPT_KEYS = ("oauthAccount", "primaryApiKey", "userID")  # of ~/.claude.json: who is logged in

DEFAULT_ENDPOINTS: dict[str, tuple[str, ...]] = {
    "claude": ("https://api.anthropic.com",),
    "codex": ("https://api.openai.com", "https://chatgpt.com"),
    "pi": ("https://api.anthropic.com", "https://api.openai.com", "https://generativelanguage.googleapis.com", "https://openrouter.ai"),
    "cursor": ("https://api2.cursor.sh",),
}

WITHHELD = (
    "SSH_AUTH_SOCK", "GPG_AGENT_INFO", "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "DISPLAY", "WAYLAND_DISPLAY",
    "TMUX", "STY",
)  # fmt: skip
"""Sockets and sessions of the user's that don't exist inside; withheld so nothing reaches for them."""
PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY")
LOOPBACK_NAMES = "localhost,127.0.0.1,::1"


def _source_dir(harness: str, env: Mapping[str, str]) -> Path | None:
    if harness not in HOME_FILES:
        return None
    variable, default, _ = HOME_FILES[harness]
    if env.get(variable):
        return Path(env[variable])
    home = env.get("HOME")
    return Path(home) / default if home else None


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


def harness_dir(harness: str, home: Path) -> Path | None:
    """Where, in `home`, the CLI keeps its config."""
    return home / HOME_FILES[harness][1] if harness in HOME_FILES else None


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


def prepare_home(home: Path, harness: str, env: Mapping[str, str]) -> None:
    """Make `home` (new, 0700) with only the CLI's credential, config and first-run answers, and
    the user's git identity (`.gitconfig`)."""
    os.mkdir(home, HOME_MODE)
    os.chmod(home, HOME_MODE)
    for sub in (".config", ".cache", ".local/share", ".local/state"):
        (home / sub).mkdir(parents=True, mode=HOME_MODE)
    identity = git_identity(env)
    if identity:
        (home / ".gitconfig").write_text(identity_config(identity))
    target = harness_dir(harness, home)
    source = _source_dir(harness, env)
    if target is None:
        return
    target.mkdir(parents=True, mode=HOME_MODE, exist_ok=True)
    for name in HOME_FILES[harness][2]:
        data = _read(source / name) if source is not None else None
        if data is not None:
            descriptor = os.open(target / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            with os.fdopen(descriptor, "wb") as copy:
                copy.write(data)
    if harness == "claude":
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
        (target / ".claude.json").write_text(json.dumps(answers))


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


def configured_urls(harness: str, env: Mapping[str, str]) -> list[str]:
    """The base URLs the CLI is configured with (from its env and config files); none: its defaults."""
    source = _source_dir(harness, env)
    urls: list[str] = []
    if harness == "claude" and env.get("ANTHROPIC_BASE_URL"):
        urls.append(env["ANTHROPIC_BASE_URL"])
    elif harness == "codex":
        data = _read(source / "config.toml") if source else None
        try:
            config = tomllib.loads(data.decode()) if data else {}
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            config = {}
        providers = config.get("model_providers") if isinstance(config.get("model_providers"), dict) else {}
        chosen = providers.get(config.get("model_provider")) if isinstance(providers, dict) else None
        if isinstance(chosen, dict) and isinstance(chosen.get("base_url"), str):
            urls.append(chosen["base_url"])
        elif env.get("OPENAI_BASE_URL"):
            urls.append(env["OPENAI_BASE_URL"])
    elif harness == "pi":
        data = _read(source / "models.json") if source else None
        try:
            models = json.loads(data) if data else {}
        except ValueError:
            models = {}
        providers = models.get("providers") if isinstance(models, dict) else None
        for provider in providers.values() if isinstance(providers, dict) else ():
            if isinstance(provider, dict) and isinstance(provider.get("baseUrl"), str):
                urls.append(provider["baseUrl"])
        urls += DEFAULT_ENDPOINTS["pi"]
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
        CLAUDE_CONFIG_DIR=str(home / HOME_FILES["claude"][1]),
        CLAUDE_CODE_TMPDIR="/tmp",
        CODEX_HOME=str(home / HOME_FILES["codex"][1]),
        PI_CODING_AGENT_DIR=str(home / HOME_FILES["pi"][1]),
    )
    if proxy_port is not None:
        url = f"http://127.0.0.1:{proxy_port}"
        for name in PROXY_VARIABLES[:3]:
            inside[name] = inside[name.lower()] = url
        inside["NO_PROXY"] = inside["no_proxy"] = LOOPBACK_NAMES
    return inside
