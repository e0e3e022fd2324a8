"""A sandboxed agent's fresh home holds only its CLI's credential, config and first-run answers."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from pathlib import Path

import pytest

import agentswf
from agentswf import workflow
from agentswf.errors import DefinitionError
from agentswf.sandbox import runner
from agentswf.sandbox.homes import model_endpoints, prepare_home, sandbox_env
from agentswf.sandbox.proxy import Endpoint

from .kit import ANSWER, agent, needs_bwrap

pytestmark = pytest.mark.anyio


def files(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*") if path.is_file()}


def test_claude_gets_its_credential_and_first_run_answers_and_nothing_of_its_history(tmp_path):
    user = tmp_path / "user"
    (user / ".claude" / "projects").mkdir(parents=True)
    (user / ".claude" / ".credentials.json").write_text('{"token": "t"}')
    (user / ".claude" / "projects" / "old.jsonl").write_text("history")
    (user / ".claude.json").write_text(json.dumps({"oauthAccount": {"email": "me"}, "projects": {"/secret": {}}}))
    home = tmp_path / "home"
    prepare_home(home, "claude", {"HOME": str(user)})
    assert files(home) == {".claude/.credentials.json", ".claude/.claude.json"}
    answers = json.loads((home / ".claude" / ".claude.json").read_text())
    assert answers == {"hasCompletedOnboarding": True, "bypassPermissionsModeAccepted": True, "oauthAccount": {"email": "me"}}
    assert oct(home.stat().st_mode & 0o777) == "0o700"


def test_codex_and_pi_get_their_auth_and_config_from_where_their_variables_point(tmp_path):
    codex = tmp_path / "codex-home"
    (codex / "sessions").mkdir(parents=True)
    (codex / "auth.json").write_text("{}")
    (codex / "config.toml").write_text('model_provider = "gw"\n[model_providers.gw]\nbase_url = "http://127.0.0.1:9999/v1"\n')
    (codex / "sessions" / "old.jsonl").write_text("history")
    prepare_home(tmp_path / "h1", "codex", {"CODEX_HOME": str(codex)})
    assert files(tmp_path / "h1") == {".codex/auth.json", ".codex/config.toml"}
    assert model_endpoints("codex", {"CODEX_HOME": str(codex)}) == {Endpoint("127.0.0.1", 9999)}
    assert model_endpoints("codex", {"HOME": str(tmp_path / "nobody")}) == {Endpoint("api.openai.com", 443), Endpoint("chatgpt.com", 443)}

    pi = tmp_path / "pi-agent"
    pi.mkdir()
    (pi / "models.json").write_text(json.dumps({"providers": {"x": {"baseUrl": "http://localhost:8080/v1"}}}))
    (pi / "auth.json").write_text("{}")
    prepare_home(tmp_path / "h2", "pi", {"PI_CODING_AGENT_DIR": str(pi)})
    assert files(tmp_path / "h2") == {".pi/agent/models.json", ".pi/agent/auth.json"}
    assert Endpoint("localhost", 8080) in model_endpoints("pi", {"PI_CODING_AGENT_DIR": str(pi)})

    assert model_endpoints("claude", {"ANTHROPIC_BASE_URL": "http://127.0.0.1:7/"}) == {Endpoint("127.0.0.1", 7)}
    assert model_endpoints("shell", {}) == frozenset()
    prepare_home(tmp_path / "h3", "shell", {"HOME": str(tmp_path / "user")})
    assert files(tmp_path / "h3") == set()


def test_the_acp_clis_get_their_config_and_credentials_from_where_their_environment_keeps_them(tmp_path):
    user = tmp_path / "user"
    config = {"provider": {"gw": {"options": {"baseURL": "http://127.0.0.1:9100/v1"}}, "anthropic": {}}}
    for path, text in {
        ".config/opencode/opencode.json": json.dumps(config), ".local/share/opencode/auth.json": "{}",
        ".local/share/opencode/opencode.db": "history", ".qwen/settings.json": "{}", ".qwen/oauth_creds.json": "{}",
        ".qwen/projects/x/chats/old.jsonl": "history", ".gemini/settings.json": "{}", ".gemini/oauth_creds.json": "{}",
        ".gemini/tmp/p/chats/session-old.jsonl": "history", "copilot/config.json": "{}", "copilot/session-state/a/events.jsonl": "h",
    }.items():  # fmt: skip
        (user / path).parent.mkdir(parents=True, exist_ok=True)
        (user / path).write_text(text)
    env = {"HOME": str(user), "COPILOT_HOME": str(user / "copilot")}
    expected = {
        "opencode": {".config/opencode/opencode.json", ".local/share/opencode/auth.json"},
        "qwen": {".qwen/settings.json", ".qwen/oauth_creds.json"},
        "gemini": {".gemini/settings.json", ".gemini/oauth_creds.json"},
        "copilot": {".copilot/config.json"},
    }
    for cli, copied in expected.items():
        prepare_home(tmp_path / cli, cli, env)
        assert files(tmp_path / cli) == copied, cli
    xdg = {"XDG_CONFIG_HOME": str(user / ".config"), "HOME": "/nonexistent"}
    prepare_home(tmp_path / "xdg", "opencode", xdg)
    assert files(tmp_path / "xdg") == {".config/opencode/opencode.json"}

    opencode = model_endpoints("opencode", env)
    assert Endpoint("127.0.0.1", 9100) in opencode and Endpoint("api.anthropic.com", 443) in opencode
    assert model_endpoints("qwen", {"OPENAI_BASE_URL": "http://127.0.0.1:9101/v1"}) == {Endpoint("127.0.0.1", 9101)}
    assert model_endpoints("gemini", {"GOOGLE_GEMINI_BASE_URL": "http://localhost:9102"}) == {Endpoint("localhost", 9102)}
    assert Endpoint("generativelanguage.googleapis.com", 443) in model_endpoints("gemini", {})
    assert model_endpoints("copilot", {"COPILOT_PROVIDER_BASE_URL": "http://127.0.0.1:9103/v1"}) == {Endpoint("127.0.0.1", 9103)}
    assert model_endpoints("acp", env) == frozenset()  # an agent run by command=[…]: what the sandbox's network allows

    inside = sandbox_env({"GEMINI_CLI_HOME": "/elsewhere", "COPILOT_HOME": "/elsewhere"}, tmp_path / "home", None)
    assert inside["GEMINI_CLI_HOME"] == str(tmp_path / "home") and inside["COPILOT_HOME"] == str(tmp_path / "home" / ".copilot")


def test_the_environment_inside_points_into_the_home_and_at_the_proxy_and_withholds_the_users_sockets(tmp_path):
    home = tmp_path / "home"
    env = {"HOME": "/root", "SSH_AUTH_SOCK": "/run/agent", "https_proxy": "http://corp:8080", "KEEP": "1", "TMPDIR": "/var/t"}
    inside = sandbox_env(env, home, 3128)
    assert inside["HOME"] == str(home) and inside["TMPDIR"] == "/tmp" and inside["KEEP"] == "1"
    assert inside["CODEX_HOME"] == str(home / ".codex") and inside["XDG_CONFIG_HOME"] == str(home / ".config")
    assert "SSH_AUTH_SOCK" not in inside
    assert inside["HTTPS_PROXY"] == inside["https_proxy"] == "http://127.0.0.1:3128"
    assert inside["NO_PROXY"] == "localhost,127.0.0.1,::1"
    closed = sandbox_env(env, home, None)
    assert not any(name.upper().endswith("_PROXY") for name in closed)


async def test_a_machine_whose_kernel_refuses_namespaces_is_told_so_at_open(tmp_path):
    fake = tmp_path / "bwrap"  # a bwrap that fails as bwrap does where user namespaces are off
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(DefinitionError, match="can't make a sandbox here .bwrap: No permissions.*user namespaces"):
        await runner.probe(str(fake))


def test_the_users_git_identity_is_in_the_home_and_nothing_else_of_their_git_config(tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    (user / ".gitconfig").write_text('[user]\n\tname = "A \\"Quoted\\" Person"\n\temail = a@example.com\n[core]\n\tfsmonitor = /evil\n')
    home = tmp_path / "home"
    prepare_home(home, "shell", {"HOME": str(user)})
    assert files(home) == {".gitconfig"}
    said = subprocess.run(["git", "config", "--file", str(home / ".gitconfig"), "--list"], capture_output=True, text=True, check=True)
    assert said.stdout == 'user.name=A "Quoted" Person\nuser.email=a@example.com\n'
    prepare_home(tmp_path / "h2", "shell", {"HOME": str(tmp_path / "nobody")})  # no identity: no .gitconfig
    assert files(tmp_path / "h2") == set()


@needs_bwrap
async def test_a_sandboxed_git_commit_is_made_with_the_users_identity(place):
    """The sandbox's home is fresh, so git in it knew no name: `git commit` failed "Author identity
    unknown". The user's own name and email (their global config) are there now."""
    repo = place / "ws"
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "first"]):
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=X", "-c", "user.email=x@x", *args], check=True)
    (place / "home" / ".gitconfig").write_text("[user]\n\tname = A Person\n\temail = a@example.com\n")
    body = f"git commit -q --allow-empty -m mine && say \"$(git log -1 --format='%an <%ae>')\"\n{ANSWER}"
    token = secrets.token_hex(4)

    async def fn(wf):
        box = await wf.sandboxes.open("box", cwd="ws", write=["."])
        a = await wf.agents.open("a", runtime=agent(repo, "a", body, token), sandbox=box)
        return (await a.run("Commit.", timeout=30)).value

    definition = workflow(name="sbx", description="A sandboxed commit.")(fn)
    env = {**os.environ, "HOME": str(place / "home")}
    result = await agentswf.run(definition, run_root=place / "runs", cwd=place, env=env)
    assert result.value == "A Person <a@example.com>", result.reason
