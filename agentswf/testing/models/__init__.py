"""Scripted model servers: the real coding-agent CLIs (claude, codex, pi) run offline.

    from agentswf.testing.models import ScriptedModel, Shell, Text, steps, codex_env

    async with ScriptedModel(steps(Shell("echo hi > out.txt"), Text("done"))) as model:
        env = codex_env(model, tmp_path)      # run `codex exec …` with this env
        ...
        assert model.requests[-1].conversation.tool_results

The server answers Anthropic Messages (claude; pi), OpenAI Responses (codex; pi) and
Chat Completions (pi, opencode, qwen) on 127.0.0.1, from a script that reads the conversation
state; `acp_envs` points the ACP CLIs at it.
"""

from .acp_envs import copilot_env, gemini_env, opencode_env, qwen_env
from .envs import CLI_DIR_VARIABLE, PROVIDER, claude_env, codex_env, find_cli, pi_env
from .script import SHELL_ARGUMENTS, Conversation, Dialect, Script, Shell, Step, Text, Tool, steps
from .server import MODEL_ID, ModelRequest, ScriptedModel
from .sse import Usage

__all__ = [
    "CLI_DIR_VARIABLE",
    "MODEL_ID",
    "PROVIDER",
    "SHELL_ARGUMENTS",
    "Conversation",
    "Dialect",
    "ModelRequest",
    "Script",
    "ScriptedModel",
    "Shell",
    "Step",
    "Text",
    "Tool",
    "Usage",
    "claude_env",
    "codex_env",
    "copilot_env",
    "find_cli",
    "gemini_env",
    "opencode_env",
    "pi_env",
    "qwen_env",
    "steps",
]
