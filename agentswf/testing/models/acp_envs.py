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
