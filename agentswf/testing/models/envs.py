"""Isolated environments that point each real CLI at a `ScriptedModel`, with zero network.

Each helper writes the CLI's config under `home` and returns the variables to set on top
of the parent environment (`Runtime(harness="codex", env=codex_env(model, tmp_path))`).
With the pinned versions (claude 2.1.332, codex 0.171.0, pi 1.6.0 and 0.73.1) they were measured to
make no DNS lookup and to connect only to 127.0.0.1. The parent environment must not carry
variables that re-route a CLI, such as CLAUDE_CODE_USE_BEDROCK or OPENAI_BASE_URL.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Literal

from .server import MODEL_ID, ScriptedModel

CLI_DIR_VARIABLE = "AGENTSWF_CLI_DIR"  # a directory (or os.pathsep list) holding the CLIs
API_KEY_VARIABLE = "FAKE_API_KEY"  # the variable codex and pi read the (fake) key from
API_KEY = "sk-test"
PROVIDER = "fake"  # the provider name codex and pi are configured with
CODEX_MODEL = "gpt-5.5"  # a slug codex knows: an unknown one adds a metadata error item
PiApi = Literal["openai-completions", "openai-responses", "anthropic-messages"]


def find_cli(name: str) -> str | None:
    """The path of the CLI `name`: from $AGENTSWF_CLI_DIR first (an explicit choice), then PATH."""
    directory = os.environ.get(CLI_DIR_VARIABLE)
    return (directory and shutil.which(name, path=directory)) or shutil.which(name)


def claude_env(model: ScriptedModel, home: str | os.PathLike[str]) -> dict[str, str]:
    """claude: HOME and CLAUDE_CONFIG_DIR under `home`, the base URL, quiet and fail-fast.

    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC stops the telemetry lookups and the HEAD
    probe; CLAUDE_CODE_MAX_RETRIES=0 stops minutes of backoff on an error status.
    IS_SANDBOX=1 is set when running as root, where --dangerously-skip-permissions
    refuses to run without it.
    """
    config = Path(home) / ".claude"
    config.mkdir(parents=True, exist_ok=True)
    env = {
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(config),
        "ANTHROPIC_BASE_URL": model.base_url,
        "ANTHROPIC_API_KEY": API_KEY,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
    }
    if os.geteuid() == 0:
        env["IS_SANDBOX"] = "1"
    return env


def codex_env(model: ScriptedModel, home: str | os.PathLike[str], *, slug: str = CODEX_MODEL) -> dict[str, str]:
    """codex: $CODEX_HOME/config.toml with a fake Responses provider, plugins off.

    `features.plugins` alone causes lookups of github.com and chatgpt.com; the retries
    are off so an error status fails the turn at once.
    """
    codex_home = Path(home) / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        f"""model = {json.dumps(slug)}
model_provider = "{PROVIDER}"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.{PROVIDER}]
name = "{PROVIDER}"
base_url = "{model.base_url}/v1"
env_key = "{API_KEY_VARIABLE}"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[features]
plugins = false
remote_plugin = false
apps = false
"""
    )
    return {"HOME": str(home), "CODEX_HOME": str(codex_home), API_KEY_VARIABLE: API_KEY}


def pi_env(
    model: ScriptedModel, home: str | os.PathLike[str], api: PiApi = "openai-completions"
) -> dict[str, str]:
    """pi: models.json with provider "fake" (model "fake-model") speaking `api`, retries off.

    Run it with `--provider fake --model fake-model`. The Anthropic SDK appends
    /v1/messages itself, so that base URL has no /v1. `compaction.keepRecentTokens` is 0:
    pi 1.x compacts only what is older than that many recent tokens (20000 by default), so a
    scripted session, a few hundred tokens long, compacts as it does on 0.7x.
    """
    agent_dir = Path(home) / ".pi" / "agent"
    agent_dir.mkdir(parents=True, exist_ok=True)
    base_url = model.base_url if api == "anthropic-messages" else f"{model.base_url}/v1"
    entry = {"id": MODEL_ID, "reasoning": False, "input": ["text"], "contextWindow": 128000, "maxTokens": 16384,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}  # fmt: skip
    models = {"providers": {PROVIDER: {"baseUrl": base_url, "api": api, "apiKey": API_KEY_VARIABLE, "models": [entry]}}}
    settings = {"retry": {"enabled": False, "provider": {"maxRetries": 0}}, "enableInstallTelemetry": False,
                "compaction": {"keepRecentTokens": 0}}
    (agent_dir / "models.json").write_text(json.dumps(models, indent=2))
    (agent_dir / "settings.json").write_text(json.dumps(settings, indent=2))
    return {"HOME": str(home), "PI_CODING_AGENT_DIR": str(agent_dir), "PI_OFFLINE": "1", API_KEY_VARIABLE: API_KEY}
