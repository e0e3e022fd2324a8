"""A sandbox's spec is checked whole: host names and suffixes only, existing paths, nothing above the sockets."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentswf.errors import DefinitionError
from agentswf.sandbox.runner import check_reach
from agentswf.sandbox.spec import (
    RunSandboxFile,
    SandboxSpec,
    allows,
    check_spec,
    entry_problem,
    host_problem,
    resolve_spec,
)

LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
HOST = st.lists(LABEL, min_size=1, max_size=4).map(".".join).map(lambda host: host + ".example")


@pytest.mark.parametrize("entry", ["api.example.com", "*.pypi.org", "localhost", "a-b.c0.io", "API.Example.COM"])
def test_a_host_or_a_subdomain_suffix_is_an_entry(entry):
    assert host_problem(entry) is None and entry_problem(entry) is None


@pytest.mark.parametrize("entry", ["api.example.com:443", "*.pypi.org:8443", "localhost:1", "a.example:65535"])
def test_an_entry_may_name_a_port(entry):
    assert entry_problem(entry) is None and check_spec({"network": [entry]}).network == (entry,)


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("https://api.example.com", "scheme, path"),
        ("https://api.example.com:443", "scheme, path"),
        ("api.example.com/v1", "scheme, path"),
        ("api.example.com:https", "port that isn't a number"),
        ("api.example.com:", "port that isn't a number"),
        ("api.example.com:443:443", "port that isn't a number"),
        ("api.example.com:\u0663", "port that isn't a number"),  # a digit, but not an ASCII one
        ("api.example.com:0", "a port is 1 to 65535"),
        ("api.example.com:65536", "a port is 1 to 65535"),
        (":443", "host name like"),
        ("1.2.3.4", "IP address"),
        ("1.2.3.4:443", "IP address"),
        ("::1", "scheme, path"),
        ("[::1]:443", "scheme, path"),
        ("*.com", "top-level domain"),
        ("a..b", "not a host name"),
        ("-a.example", "start or end with '-'"),
        ("a.*.example", "not a host name"),
        ("", "host name like"),
        (" api.example.com", "space"),
        ("x" * 64 + ".example", "not a host name"),
        ("10.0.0.300", "last label is a number"),
    ],
)
def test_anything_else_is_refused_saying_why(entry, says):
    problem = entry_problem(entry)
    assert problem is not None and says in problem
    with pytest.raises(DefinitionError, match="sandbox network"):
        check_spec({"network": [entry]})


@given(HOST)
def test_an_exact_host_allows_itself_and_no_subdomain_or_neighbour(host):
    assert host_problem(host) is None
    assert allows((host,), host) and allows((host,), host.upper() + ".")
    assert not allows((host,), "sub." + host)
    assert not allows((host,), "x" + host)


@given(HOST, LABEL)
def test_a_suffix_allows_its_subdomains_only(host, label):
    entry = "*." + host
    assert host_problem(entry) is None
    assert allows((entry,), f"{label}.{host}") and allows((entry,), f"a.{label}.{host}")
    assert not allows((entry,), host)  # not the suffix itself
    assert not allows((entry,), f"{label}{host}")  # not a name that merely ends the same


@given(HOST, st.integers(1, 65535))
def test_a_tunnel_goes_to_port_443_or_to_the_port_an_entry_names(host, port):
    """A plain request the proxy reads may go to any port of a named host; a tunnel it doesn't read
    only to HTTPS's, or the entry's own."""
    for entry in (host, "*." + host):
        name = host if entry == host else "a." + host
        assert allows((entry,), name, 443) and allows((entry,), name, None)
        assert allows((f"{entry}:{port}",), name, port) and allows((f"{entry}:{port}",), name, None)
        if port != 443:
            assert not allows((entry,), name, port)
            assert not allows((f"{entry}:{port}",), name, 443)
        assert not allows((f"{entry}:{port}",), name, port % 65535 + 1)


def test_a_spec_is_a_struct_with_no_unknown_fields_and_the_run_file_names_no_cwd():
    assert check_spec({}) == SandboxSpec()
    with pytest.raises(DefinitionError, match="not a sandbox spec"):
        check_spec({"writes": ["."]})
    with pytest.raises(DefinitionError, match="not a sandbox spec"):
        check_spec({"read": "src"})
    import msgspec

    with pytest.raises(msgspec.ValidationError, match="unknown field `cwd`"):
        msgspec.json.decode(b'{"cwd": "/"}', type=RunSandboxFile)


def test_paths_resolve_from_the_sandbox_cwd_and_must_exist(tmp_path):
    (tmp_path / "ws" / "src").mkdir(parents=True)
    resolved = resolve_spec(SandboxSpec(cwd="ws", read=("src",), write=(".",), network=("A.Example",)), tmp_path)
    assert resolved.cwd == tmp_path / "ws"
    assert resolved.read == (tmp_path / "ws" / "src",) and resolved.write == (tmp_path / "ws",)
    assert resolved.network == ("a.example",)
    with pytest.raises(DefinitionError, match="does not exist: a sandbox holds its whole spec"):
        resolve_spec(SandboxSpec(cwd="ws", read=("src", "missing")), tmp_path)
    with pytest.raises(DefinitionError, match="is not a directory"):
        (tmp_path / "f").write_text("")
        resolve_spec(SandboxSpec(cwd="f"), tmp_path)


@pytest.mark.parametrize("path", ["/", "/tmp"])
def test_a_path_above_the_runs_sockets_is_refused(path):
    spec = resolve_spec(SandboxSpec(cwd="/", read=(path,)), Path("/"))
    with pytest.raises(DefinitionError, match="where every agent's socket is"):
        check_reach(spec)
