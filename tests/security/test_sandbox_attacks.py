"""Attacks from a hostile agent inside a real sandbox (issue 15), found by attacking it: each
test is the attack as the agent's shell (or its CLI's proxy client) would make it."""

from __future__ import annotations

import secrets
import shutil
import socket
from pathlib import Path

import anyio
import pytest

import agentswf
from agentswf import workflow
from agentswf.engine.record.layout import read_lines
from agentswf.sandbox import proxy as proxy_module
from agentswf.sandbox.proxy import Allowlist, Proxy, is_own_address, is_public, parse_head, serving

from ..sandbox.kit import ANSWER, agent, needs_bwrap

pytestmark = pytest.mark.anyio


@pytest.fixture
def place(tmp_path):
    (tmp_path / "ws").mkdir()
    return tmp_path


async def _ask(path: Path, request: bytes) -> bytes:
    async with await anyio.connect_unix(path) as stream:
        await stream.send(request)
        reply = b""
        with anyio.fail_after(5):
            try:
                while True:
                    reply += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass
        return reply


async def _run_in(fn, cwd: Path, run_root: Path) -> agentswf.RunResult:
    definition = workflow(name="sbx", description="A sandboxed test workflow.")(fn)
    return await agentswf.run(definition, run_root=run_root, cwd=cwd)


@needs_bwrap
async def test_the_runs_record_under_a_run_root_of_any_name_in_a_writable_path_is_out_of_reach(place):
    """--run-root inside the workspace (not named `.awf`): the agent would forge its own stage
    records, turns and sessions, and the workflow file `awf continue` runs, if it could see them."""
    token = secrets.token_hex(4)
    root = place / "ws" / "records"
    body = f"""\
        say "records: $(ls -A {root} 2>/dev/null | wc -l)"
        mkdir -p {root}/sbx/forged 2>/dev/null && echo x >{root}/sbx/forged/run.json 2>/dev/null
        {ANSWER}
    """

    async def fn(wf):
        box = await wf.sandboxes.open("box", cwd="ws", write=["."])
        a = await wf.agents.open("a", runtime=agent(place / "ws", "a", body, token), sandbox=box)
        return (await a.run("Look.", timeout=20)).value

    result = await _run_in(fn, place, root)
    assert result.outcome == "completed", result.reason
    assert result.value == "records: 0"
    assert not (root / "sbx" / "forged").exists()


@needs_bwrap
@pytest.mark.parametrize("field", ["cwd", "read", "write"])
async def test_a_sandbox_given_a_path_inside_the_runs_record_is_refused(place, field):
    root = place / "ws" / "records"
    (root / "sbx").mkdir(parents=True)

    async def fn(wf):
        where = str(root / "sbx")
        await wf.sandboxes.open("box", **({"cwd": where} if field == "cwd" else {field: [where]}))

    result = await _run_in(fn, place, root)
    assert result.outcome == "failed" and "record" in (result.reason or ""), result.reason


@pytest.mark.parametrize("target", ["\x1b]0;owned\x07.test:443", "a.test\x1b[2J:443", "a.test\x00:443", "a\tb.test:443", "a.test\x7f:80"])
async def test_a_request_target_with_control_characters_is_refused_unlogged(tmp_path, target):
    """What the proxy refuses it logs, and `awf run` prints log lines to the operator's terminal:
    an escape sequence in a CONNECT target would be the agent writing to that terminal."""
    assert isinstance(parse_head(f"CONNECT {target} HTTP/1.1\r\n\r\n".encode(), b""), str)
    assert isinstance(parse_head(f"GET http://{target}/ HTTP/1.1\r\n\r\n".encode(), b""), str)
    logged: list[str] = []
    proxy = Proxy(Allowlist(frozenset(), ()), lambda message, **fields: logged.append(message), sandbox="b", agent="a")
    async with serving(tmp_path / "n.sock", proxy):
        reply = await _ask(tmp_path / "n.sock", f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
    assert reply.startswith(b"HTTP/1.1 400") and logged == []
    assert all(31 < ord(character) < 127 or character in "\r\n" for character in reply.decode())


@pytest.mark.parametrize(
    "address",
    [
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
        "2002:7f00:1::1",  # 6to4 of 127.0.0.1
        "2002:c0a8:101::1",  # 6to4 of 192.168.1.1
        "::127.0.0.1",  # IPv4-compatible
        "::ffff:127.0.0.1",
        "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, its client 127.0.0.1
    ],
)
def test_an_address_that_leads_to_a_private_one_is_not_public(address):
    assert not is_public(address)


def test_public_addresses_are_public_and_the_hosts_own_are_not():
    assert is_public("8.8.8.8") and is_public("2606:4700:4700::1111") and is_public("64:ff9b::808:808")
    assert is_own_address("127.0.0.1") and not is_own_address("192.0.2.1")
    try:
        own = socket.gethostbyname(socket.gethostname())  # this machine's address on its network
    except OSError:
        pytest.skip("this machine's name doesn't resolve")
    assert is_own_address(own)


async def test_an_allowed_name_that_resolves_to_the_hosts_own_address_is_refused(monkeypatch):
    """A name under an allowed suffix (`*.nip.io`, a DNS the agent's author controls) pointed at
    the machine's own address on its network would reach every port it listens on there."""
    own = "127.0.0.1"

    async def resolve(host, port, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (own, port))]

    monkeypatch.setattr(proxy_module, "is_public", lambda address: True)  # as a global address of this machine would be
    monkeypatch.setattr(proxy_module.anyio, "getaddrinfo", resolve)  # a stand-in DNS: no resolver here leads to it
    assert await proxy_module.public_addresses("own.nip.io", 443) == []


async def test_the_agents_together_hold_at_most_the_proxies_share_of_the_runs_descriptors(tmp_path, monkeypatch):
    """Each proxy takes MAX_CONNECTIONS; ten agents fanned out over one hostile repository,
    each holding its proxy's all, would take the run's every descriptor (soft limit 1024 is
    common) and fail its record. Across the process the proxies hold a share of the limit."""
    monkeypatch.setattr(proxy_module, "shared_connection_limit", lambda: 2)
    proxies = [Proxy(Allowlist(frozenset(), ()), lambda message, **fields: None, sandbox="b", agent=name) for name in "ab"]
    async with serving(tmp_path / "a.sock", proxies[0]), serving(tmp_path / "b.sock", proxies[1]):
        held = [await anyio.connect_unix(tmp_path / "a.sock") for _ in range(2)]  # agent a holds the share
        await anyio.sleep(0.1)
        refused = await _ask(tmp_path / "b.sock", b"CONNECT h.test:443 HTTP/1.1\r\n\r\n")
        assert refused.startswith(b"HTTP/1.1 503"), refused
        await held[0].aclose()
        await anyio.sleep(0.1)
        assert (await _ask(tmp_path / "b.sock", b"CONNECT h.test:443 HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 403")
        await held[1].aclose()
    assert proxy_module.shared_open() == 0


def test_a_module_planted_beside_the_workflow_file_doesnt_stand_in_for_the_standard_librarys(tmp_path):
    """A sandbox that writes its cwd writes beside the workflow's file when they share a folder
    (`awf run review.py --sandbox box.json` with `write: ["."]`). The folder goes on sys.path for
    the workflow's own neighbours; in front, `queue.py` there ran, outside any sandbox, at the
    next `awf run` or `awf continue` (the run imports `queue` after loading the workflow)."""
    import subprocess
    import sys

    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "flow.py").write_text(
        "from agentswf import workflow\nimport helper\n\n"
        "@workflow(name='flow', description='Reads its neighbour.')\nasync def flow(wf):\n    return helper.VALUE\n"
    )
    (folder / "helper.py").write_text("VALUE = 'neighbour'\n")  # a neighbour of its own still imports
    (folder / "queue.py").write_text(f"open({str(tmp_path / 'OWNED')!r}, 'w').close()\n")
    done = subprocess.run(
        [sys.executable, "-m", "agentswf", "run", str(folder / "flow.py"), "--run-root", str(tmp_path / "runs")],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert not (tmp_path / "OWNED").exists()
    assert done.returncode == 0 and done.stdout.strip() == '"neighbour"', done.stderr


def test_what_runs_the_agent_stays_read_only_inside_a_path_it_may_write():
    """A project's `.venv` (the `awf` that runs the workflow, and `wfa`'s interpreter) inside a
    `write: ["."]`: writable, the agent would change what runs outside it at the next `awf`."""
    from agentswf.sandbox.bwrap import AgentPaths, bwrap_argv
    from agentswf.sandbox.spec import ResolvedSpec

    from ..sandbox.test_bwrap import effective

    repo = Path("/work/repo")
    venv, explicit = repo / ".venv", repo / ".venv" / "cache"
    spec = ResolvedSpec(repo, (), (repo, explicit), ())
    argv = bwrap_argv(spec, AgentPaths(repo, Path("/t/a")), Path("/t/a/home"), ["sh"], system=(), runtime=(venv,))
    assert effective(argv, venv / "lib" / "site.py") == "--ro-bind"
    assert effective(argv, repo / "src") == "--bind"
    assert effective(argv, explicit / "x") == "--bind"  # what `write` names inside it, by name, is written


@needs_bwrap
@pytest.mark.skipif(shutil.which("git") is None, reason="git isn't installed")
async def test_a_writer_commits_but_cant_set_what_git_runs_outside_it(place):
    """`.git/config` (core.fsmonitor, core.hooksPath, a filter) and `.git/hooks` are commands your
    next `git status` or `git commit` runs, outside the sandbox: read-only in a repository it writes."""
    import subprocess

    ws = place / "ws"
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    token = secrets.token_hex(4)
    owned = place / "OWNED"
    body = f"""\
        git -c user.name=a -c user.email=a@b add -A >/dev/null 2>&1 && git -c user.name=a -c user.email=a@b commit -qm work >/dev/null 2>&1 \\
            && say "committed" || say "NO COMMIT"
        git config core.fsmonitor "touch {owned}" 2>/dev/null && say "CONFIG SET" || say "config: read-only"
        printf '#!/bin/sh\\ntouch {owned}\\n' >.git/hooks/pre-commit 2>/dev/null && say "HOOK SET" || say "hooks: read-only"
        {ANSWER}
    """

    async def fn(wf):
        box = await wf.sandboxes.open("box", cwd="ws", write=["."])
        a = await wf.agents.open("a", runtime=agent(ws, "a", body, token), sandbox=box)
        return (await a.run("Commit.", timeout=20)).value

    result = await _run_in(fn, place, place / "runs")
    assert result.outcome == "completed", result.reason
    assert result.value.split("\n") == ["committed", "config: read-only", "hooks: read-only"]
    subprocess.run(["git", "-C", str(ws), "status"], check=True, capture_output=True)
    assert not owned.exists()


def test_the_git_controls_of_a_repository_or_a_git_directory_given_to_write(tmp_path):
    from agentswf.errors import SandboxRefused
    from agentswf.sandbox.runner import git_controls
    from agentswf.sandbox.spec import ResolvedSpec

    repo, other, plain = tmp_path / "repo", tmp_path / "other", tmp_path / "plain"
    for path in (repo / ".git", other / ".git", plain):
        path.mkdir(parents=True)
    (repo / ".git" / "config").write_text("")
    (other / ".git" / "config").write_text("")
    spec = ResolvedSpec(repo, (), (repo, other / ".git", plain), ())
    assert git_controls(spec, repo) == [
        other / ".git" / "config", other / ".git" / "config.worktree", other / ".git" / "hooks",
        repo / ".git" / "config", repo / ".git" / "config.worktree", repo / ".git" / "hooks",
    ]  # fmt: skip
    assert (repo / ".git" / "hooks").is_dir()  # made, to be held read-only
    (other / ".git" / "hooks").rmdir()
    (other / ".git" / "hooks").symlink_to(plain)  # a link where it writes: it would replace the link
    with pytest.raises(SandboxRefused, match="hooks can't be held read-only .it is a symbolic link in a path"):
        git_controls(spec, repo)
    (other / ".git" / "hooks").unlink()
    (other / ".git" / "hooks").symlink_to(tmp_path / "outside")  # dangling, and the link where it writes
    with pytest.raises(SandboxRefused, match="it is a symbolic link in a path the sandbox may write"):
        git_controls(spec, repo)
    (other / ".git" / "hooks").unlink()
    away = tmp_path / "away"  # a submodule's git directory it doesn't write: its links stay as they are
    (away / ".git").mkdir(parents=True)
    (away / ".git" / "config").write_text("")
    (away / ".git" / "config.worktree").write_text("")
    (away / ".git" / "hooks").symlink_to(plain)  # a hooks directory in what it writes: held there
    sole = ResolvedSpec(plain, (), (plain,), ())
    assert git_controls(sole, plain, [away / ".git"]) == [plain]
    (away / ".git" / "hooks").unlink()
    (away / ".git" / "hooks").symlink_to(plain / "missing")  # the agent would make it
    with pytest.raises(SandboxRefused, match="a symbolic link to .*missing, which is missing"):
        git_controls(sole, plain, [away / ".git"])
    (repo / "sub").mkdir()
    (repo / "sub" / ".git").symlink_to(away / ".git")  # a repository's .git a link where it writes
    with pytest.raises(SandboxRefused, match=r"\.git can't be held read-only .it is a symbolic link in a path"):
        git_controls(ResolvedSpec(repo, (), (repo,), ()), repo / "sub")
    reader = ResolvedSpec(repo, (), (), ())
    assert git_controls(reader, repo) == []  # nothing it can write: nothing to hold


# A sandboxed agent on a worktree of its own (issue 31). The way the docs gave to commit from a
# sandbox was to let the agent write the repository's `.git` (`common_dir`): the agent then
# deleted the user's index and stash and moved their branch. Now it writes `.` only, commits in
# a git directory of its own, and the run carries its branch back at the turn's end.

ATTACK = """\
exec >/tmp/report 2>&1
R={repo}/.git
{{
  rm -f $R/index; git --git-dir=$R update-ref -d refs/stash; git --git-dir=$R update-ref refs/heads/main HEAD
  echo 'touch {owned}' > $R/hooks/pre-commit; git --git-dir=$R config core.fsmonitor 'touch {owned}'
  rm -rf $R/worktrees/* {other}/*
  git update-ref -d refs/stash; git update-ref refs/heads/main HEAD; git branch -D theirs
}} >/dev/null 2>&1
echo fixed > fix.py && git add fix.py && git commit -qm 'A fix.' && echo committed
ls $R | tr '\\n' ' '
"""


@needs_bwrap
@pytest.mark.parametrize("how", ["opened", "private", "run"])
async def test_an_agent_on_its_worktree_commits_and_cant_touch_the_users_index_stash_branches_or_worktrees(tmp_path, how):
    from ..worktrees.kit import everything, git, run_fixer, sh, user_repo

    repo = user_repo(tmp_path)
    other = tmp_path / "other"  # a linked worktree of the user's own
    git(repo, "worktree", "add", "-q", "-b", "theirs", str(other))
    (other / "wip.txt").write_text("their work\n")
    before = everything(repo), git(other, "status", "--porcelain"), (repo / ".git" / "worktrees" / "other" / "index").read_bytes()
    owned = tmp_path / "OWNED"
    result = await run_fixer(repo, how, sh(ATTACK.format(repo=repo, owned=owned, other=other)))
    assert result.outcome == "completed", result.reason
    assert result.value == "committed\nobjects ", result.value  # of the user's .git it sees the objects, read-only
    [end] = result.worktrees
    assert git(repo, "log", "-1", "--format=%s", end.branch) == "A fix.\n"
    assert git(repo, "show", f"{end.branch}:fix.py") == "fixed\n"
    after = everything(repo), git(other, "status", "--porcelain"), (repo / ".git" / "worktrees" / "other" / "index").read_bytes()
    assert after == before  # the user's index, stash, main, config, hooks, their worktree: as they were
    git(end.path, "status")
    git(repo, "status")
    assert not owned.exists()


SMUGGLE = """\
exec >/tmp/report 2>&1
G=$(git rev-parse --git-dir)
echo {secret}/.git/objects > $G/objects/info/alternates
mkdir -p $G/objects/{head} && ln -s {secret}/.git/objects/{head}/{tail} $G/objects/{head}/{tail}
mkdir -p $(dirname $G/refs/heads/{branch}) && echo {commit} > $G/refs/heads/{branch}
git log -1 --format=%H 2>/dev/null || echo unreadable
"""


@needs_bwrap
async def test_what_an_agent_leaves_in_its_git_directory_brings_nothing_of_another_repository_in(tmp_path):
    """The agent's git directory is its own to write: it points its alternates at a repository of
    the user's that it can't see, links a loose object of it in, and puts that commit on its branch.
    The run reads none of it: the branch stays, the object is never in the user's repository."""
    from ..worktrees.kit import everything, git, run_fixer, sh, user_repo

    repo = user_repo(tmp_path)
    secret = tmp_path / "secret"
    git(tmp_path, "init", "-q", str(secret))
    (secret / "key").write_text("SECRET\n")
    git(secret, "add", "key")
    git(secret, "-c", "user.name=S", "-c", "user.email=s@s", "commit", "-qm", "secret")
    blob = git(secret, "rev-parse", "HEAD:key").strip()
    commit = git(secret, "rev-parse", "HEAD").strip()
    before = everything(repo)
    branch_of = "awf/$(basename $(dirname $(pwd)))/fix"  # the run's id is its worktree's directory's
    body = SMUGGLE.format(secret=secret, head=blob[:2], tail=blob[2:], commit=commit, branch=branch_of)
    result = await run_fixer(repo, "opened", sh(body))
    assert result.outcome == "completed", result.reason
    assert result.value == "unreadable", result.value  # inside, the secret repository isn't there
    [end] = result.worktrees
    assert (end.state, end.reason) == ("removed", "nothing changed")
    for sha in (blob, commit):
        assert git(repo, "cat-file", "-t", sha, check=False) == ""
    assert everything(repo) == before
    logged = [line["fields"].get("carried") for line in read_lines(result.run_dir / "log.jsonl")]
    assert f"worktree fix: {end.branch} names no commit in the agent's git directory; the branch is left where it was" in logged


@needs_bwrap
async def test_a_submodule_an_agent_adds_on_its_worktree_is_taken_out_of_the_index_carried_back(tmp_path):
    """The agent's index is carried back into its worktree's: a submodule it added there, a
    repository of its own with a `core.fsmonitor`, would have your `git status` in the worktree
    run that command. It is taken out of the index as the turn ends, its directory left untracked."""
    from ..worktrees.kit import git, run_fixer, sh, user_repo

    repo = user_repo(tmp_path)
    owned = tmp_path / "OWNED"
    body = f"""\
exec >/tmp/report 2>&1
{{ git init -q sub && git -C sub config core.fsmonitor 'touch {owned}'
   git -C sub -c user.name=x -c user.email=y commit -q --allow-empty -m s && git add sub; }} >/dev/null 2>&1
git ls-files --stage sub | cut -c1-6
"""
    result = await run_fixer(repo, "opened", sh(body))
    assert result.value == "160000", result.value  # a submodule, in its own index
    [end] = result.worktrees
    assert git(end.path, "ls-files", "--stage", "sub") == ""  # not in the worktree's
    assert git(end.path, "status", "--porcelain") == "?? sub/\n"
    assert not owned.exists()
    logged = [line["fields"].get("undone") for line in read_lines(result.run_dir / "log.jsonl")]
    assert any(line and "submodule 'sub' was added" in line and "taken out of the index" in line for line in logged), logged


@needs_bwrap
async def test_an_agent_writing_the_repository_cant_touch_its_other_worktrees_entries(tmp_path):
    """A sandbox writing the repository holds its `.git/worktrees` read-only, whole: the other
    worktrees' index, HEAD, `commondir` and `config.worktree` (which your git reads there) are
    theirs, and it is one mount however many worktrees there are."""
    from ..worktrees.kit import git, user_repo

    repo = user_repo(tmp_path)
    other = tmp_path / "other"
    git(repo, "worktree", "add", "-q", "-b", "theirs", str(other))
    (other / "wip.txt").write_text("their work\n")
    entry = repo / ".git" / "worktrees" / "other"
    before = {path.name: path.read_bytes() for path in entry.iterdir() if path.is_file()}, git(other, "status", "--porcelain")
    token = secrets.token_hex(4)
    body = f"""\
        for f in index HEAD commondir config.worktree; do
            {{ echo x > .git/worktrees/other/$f; }} 2>/dev/null && say "$f WRITTEN"
        done
        rm -rf .git/worktrees 2>/dev/null; mv .git/worktrees .git/w 2>/dev/null && say MOVED
        git -c user.name=a -c user.email=b commit -q --allow-empty -m mine && say committed
        {ANSWER}
    """

    async def fn(wf):
        a = await wf.agents.open("a", runtime=agent(repo, "a", body, token), sandbox={"write": ["."]})
        return (await a.run("Work.", timeout=30)).value

    result = await _run_in(fn, repo, tmp_path / "runs")
    assert result.value == "committed", result.value
    after = {path.name: path.read_bytes() for path in entry.iterdir() if path.is_file()}, git(other, "status", "--porcelain")
    assert after == before
