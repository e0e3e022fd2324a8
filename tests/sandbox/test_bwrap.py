"""The bubblewrap command line is a pure function of the spec, the agent's paths and its home."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from agentswf.sandbox.bwrap import TMP_BYTES, AgentPaths, SystemEntry, bwrap_argv, forwarded, proxy_port
from agentswf.sandbox.spec import ResolvedSpec

SYSTEM = (SystemEntry("/usr"), SystemEntry("/bin", "usr/bin"), SystemEntry("/etc"))
AGENT = AgentPaths(Path("/work/repo"), Path("/tmp/awf-x/a1"))
HOME = Path("/tmp/awf-x/a1/home")
NAME = st.from_regex(r"[a-z]{1,6}", fullmatch=True)
PATH = st.lists(NAME, min_size=1, max_size=4).map(lambda parts: Path("/", *parts))


def mounts(argv: list[str]) -> list[tuple[str, str]]:
    """(flag, destination) of each mount, in order."""
    found = []
    for index, arg in enumerate(argv[: argv.index("--")]):
        if arg in ("--ro-bind", "--bind", "--symlink"):
            found.append((arg, argv[index + 2]))
        elif arg in ("--proc", "--dev", "--tmpfs"):
            found.append((arg, argv[index + 1]))
    return found


def effective(argv: list[str], path: Path) -> str | None:
    """The flag of the last mount at or above `path`: what the sandbox has there."""
    last = None
    for flag, destination in mounts(argv):
        if path == Path(destination) or Path(destination) in path.parents:
            last = flag
    return last


def test_a_reader_sees_the_system_its_cwd_and_its_own_directory_and_writes_only_its_home_and_tmp():
    spec = ResolvedSpec(Path("/work/repo"), (), (), ())
    argv = bwrap_argv(spec, AGENT, HOME, ["claude", "-p"], system=SYSTEM, runtime=(Path("/opt/py"),), bwrap="/usr/bin/bwrap")
    assert argv[0] == "/usr/bin/bwrap" and argv[-3:] == ["--", "claude", "-p"]
    for flag in ("--unshare-all", "--die-with-parent", "--new-session"):
        assert flag in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert "--share-net" not in argv
    assert argv[argv.index("--chdir") + 1] == "/work/repo"
    tmp = argv.index("/tmp") - 1
    assert argv[tmp - 2 : tmp + 1] == ["--size", str(TMP_BYTES), "--tmpfs"]  # its /tmp is bounded
    assert ("--symlink", "/bin") in mounts(argv)
    assert effective(argv, Path("/usr/lib/x")) == "--ro-bind"
    assert effective(argv, Path("/work/repo/src")) == "--ro-bind"
    assert effective(argv, Path("/opt/py/lib")) == "--ro-bind"
    assert effective(argv, Path("/tmp/awf-x/a1/wfa")) == "--ro-bind"
    assert effective(argv, HOME / ".claude") == "--bind"
    assert effective(argv, Path("/tmp/other")) == "--tmpfs"
    assert effective(argv, Path("/root/.ssh/id_rsa")) is None  # nothing of $HOME
    assert effective(argv, Path("/tmp/awf-x/a2/s.sock")) == "--tmpfs"  # another agent's directory isn't there


@given(st.lists(PATH, max_size=4), st.lists(PATH, max_size=4), PATH)
def test_write_wins_read_is_read_only_and_nothing_else_is_there(read, write, elsewhere):
    spec = ResolvedSpec(Path("/work/repo"), tuple(read), tuple(write), ())
    argv = bwrap_argv(spec, AGENT, HOME, ["sh"], system=(), runtime=())
    for path in write:
        assert effective(argv, path) == "--bind"
    for path in read:
        if not any(path == w or w in path.parents for w in write):
            assert effective(argv, path) == "--ro-bind"
    visible = [Path("/work/repo"), *read, *write, Path("/tmp")]
    if not any(elsewhere == v or v in elsewhere.parents for v in visible):
        assert effective(argv, elsewhere) is None
    assert effective(argv, HOME) == "--bind"  # the home stays writable whatever else is mounted


def test_a_child_is_mounted_after_its_parent():
    spec = ResolvedSpec(Path("/w"), (Path("/w/a/b"), Path("/w/a")), (Path("/w/a/b/c"),), ())
    argv = bwrap_argv(spec, AgentPaths(Path("/w"), Path("/t/a")), Path("/t/a/home"), ["sh"], system=())
    assert effective(argv, Path("/w/a/b/c/d")) == "--bind"
    assert effective(argv, Path("/w/a/b/x")) == "--ro-bind"


def test_the_forwarder_goes_in_front_on_a_port_no_tunnel_takes():
    argv = forwarded(["codex", "exec"], python="/py", forwarder=Path("/f.py"), proxy_socket=Path("/a/n.sock"),
                     tunnels=["127.0.0.1:3128"])  # fmt: skip
    assert argv == ["/py", "-S", "-I", "/f.py", "/a/n.sock", "3129", "127.0.0.1:3128", "--", "codex", "exec"]
    assert proxy_port([]) == 3128


def test_an_argv_bubblewrap_or_exec_would_not_take_is_too_long():
    from agentswf.sandbox.bwrap import BWRAP_MAX_ARGS, MAX_ARGV_BYTES, too_long

    assert too_long(["bwrap"] * BWRAP_MAX_ARGS) is None
    assert f"more than bubblewrap takes ({BWRAP_MAX_ARGS})" in (too_long(["bwrap"] * (BWRAP_MAX_ARGS + 1)) or "")
    long = "/" + "x" * 4095
    fits = MAX_ARGV_BYTES // (len(long) + 1)
    assert too_long([long] * fits) is None
    assert "bytes, more than the sandbox starts" in (too_long([long] * (fits + 1)) or "")
