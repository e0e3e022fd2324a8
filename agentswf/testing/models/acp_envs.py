"""Isolated environments that point the ACP CLIs (opencode, qwen, gemini, copilot) at a `ScriptedModel`.

As `envs.py` does for claude, codex and pi: each writes the CLI's config under `home` and returns
the variables to set (`Runtime(harness="opencode", env=opencode_env(model, tmp_path))`). With the
pinned versions (opencode 1.18.33, qwen 0.24.4, gemini 0.61.0, copilot 1.0.102) these settings were
measured to make no DNS lookup: each turns off what looked a name up (opencode's model catalog and
plugin install, qwen's and gemini's usage statistics, copilot's GitHub calls) and the side requests
a script would otherwise have to answer (qwen's memory agent and follow-up suggestions).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .envs import API_KEY, API_KEY_VARIABLE, PROVIDER
from .server import MODEL_ID, ScriptedModel

GEMINI_MODEL = "gemini-2.5-flash"  # a model gemini knows: its requests name it


def opencode_env(model: ScriptedModel, home: str | os.PathLike[str], *, ask: bool = True) -> dict[str, str]:
    """opencode: a Chat Completions provider "fake" in $XDG_CONFIG_HOME/opencode/opencode.json, model
    `fake/fake-model`. `ask` makes it ask before its shell runs (`"bash": "ask"`), as the others do."""
    root = Path(home)
    config = root / ".config" / "opencode"
    config.mkdir(parents=True, exist_ok=True)
    entry = {"name": "Fake", "tool_call": True, "limit": {"context": 128000, "output": 16384},
             "cost": {"input": 1, "output": 2}}  # fmt: skip
    settings = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {PROVIDER: {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
                                "options": {"baseURL": f"{model.base_url}/v1", "apiKey": f"{{env:{API_KEY_VARIABLE}}}"},
                                "models": {MODEL_ID: entry}}},
        "model": f"{PROVIDER}/{MODEL_ID}",
        "small_model": f"{PROVIDER}/{MODEL_ID}",
        "autoupdate": False,
        "share": "disabled",
        "permission": {"bash": "ask" if ask else "allow"},
    }
    (config / "opencode.json").write_text(json.dumps(settings, indent=2))
    return {
        "HOME": str(root), "XDG_CONFIG_HOME": str(root / ".config"), "XDG_DATA_HOME": str(root / ".local" / "share"),
        "XDG_CACHE_HOME": str(root / ".cache"), "XDG_STATE_HOME": str(root / ".local" / "state"),
        API_KEY_VARIABLE: API_KEY, "npm_config_offline": "true", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "OPENCODE_DISABLE_CLAUDE_CODE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_SHARE": "1",
    }  # fmt: skip


def qwen_env(model: ScriptedModel, home: str | os.PathLike[str]) -> dict[str, str]:
    """qwen: ~/.qwen/settings.json on the OpenAI-compatible auth, model `fake-model` over Chat Completions;
    its usage statistics, auto-update, memory agent and follow-up suggestions off."""
    config = Path(home) / ".qwen"
    config.mkdir(parents=True, exist_ok=True)
    settings = {
        "security": {"auth": {"selectedType": "openai"}}, "model": {"name": MODEL_ID},
        "general": {"enableAutoUpdate": False}, "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False, "enableAutoSkill": False},
        "ui": {"enableFollowupSuggestions": False},
    }  # fmt: skip
    (config / "settings.json").write_text(json.dumps(settings, indent=2))
    return {"HOME": str(home), "OPENAI_BASE_URL": f"{model.base_url}/v1", "OPENAI_API_KEY": API_KEY,
            "OPENAI_MODEL": MODEL_ID, "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1"}  # fmt: skip


def gemini_env(model: ScriptedModel, home: str | os.PathLike[str]) -> dict[str, str]:
    """gemini: ~/.gemini/settings.json on an API key, model `gemini-2.5-flash` over the Gemini API at the
    scripted model; folder trust (which stops a headless run in an untrusted directory), usage
    statistics, telemetry and auto-update off."""
    config = Path(home) / ".gemini"
    config.mkdir(parents=True, exist_ok=True)
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "model": {"name": GEMINI_MODEL},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
    }  # fmt: skip
    (config / "settings.json").write_text(json.dumps(settings, indent=2))
    return {"HOME": str(home), "GOOGLE_GEMINI_BASE_URL": model.base_url, "GEMINI_API_KEY": API_KEY}


def copilot_env(model: ScriptedModel, home: str | os.PathLike[str]) -> dict[str, str]:
    """copilot: its own provider (BYOK) on Chat Completions at the scripted model, model `fake-model`, with
    no GitHub login: COPILOT_OFFLINE stops its GitHub calls. The parent's GitHub tokens must not be set."""
    config = Path(home) / ".copilot"
    config.mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(home), "COPILOT_HOME": str(config), "COPILOT_OFFLINE": "true", "COPILOT_AUTO_UPDATE": "false",
        "COPILOT_PROVIDER_BASE_URL": f"{model.base_url}/v1", "COPILOT_PROVIDER_TYPE": "openai",
        "COPILOT_PROVIDER_API_KEY": API_KEY, "COPILOT_PROVIDER_WIRE_API": "completions", "COPILOT_MODEL": MODEL_ID,
        "COPILOT_PROVIDER_MAX_PROMPT_TOKENS": "128000", "COPILOT_PROVIDER_MAX_OUTPUT_TOKENS": "16384",
    }  # fmt: skip
