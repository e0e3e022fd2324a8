"""A sandboxed agent's own git directory on a worktree (`sandbox.gitbox`): the pure parts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agentswf.sandbox.gitbox import pack_names


@pytest.mark.parametrize("object_format", ["sha1", "sha256"])
def test_a_pack_indexs_names_are_read_as_git_wrote_them(tmp_path: Path, object_format: str) -> None:
    """What the agent packed (`git gc` in its git directory) is carried back by the names its
    packs' indexes list; an index of either object format reads as itself, never as the other."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", f"--object-format={object_format}", str(repo)], check=True)
    names = [
        subprocess.run(["git", "-C", str(repo), "hash-object", "-w", "--stdin"], input=f"{i}\n".encode(),
                       capture_output=True, check=True).stdout.decode().strip()
        for i in range(7)
    ]  # fmt: skip
    base = repo / ".git" / "objects" / "pack" / "pack"
    subprocess.run(["git", "-C", str(repo), "pack-objects", "-q", str(base)], input="".join(f"{name}\n" for name in names).encode(),
                   capture_output=True, check=True)  # fmt: skip
    [index] = (repo / ".git" / "objects" / "pack").glob("*.idx")
    data = index.read_bytes()
    assert sorted(pack_names(data)) == sorted(names)
    assert pack_names(data[:-1]) == [] and pack_names(b"not an index") == [] and pack_names(b"") == []
