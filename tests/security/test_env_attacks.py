"""What an agent's environment inherits of the run's: none of git's repository-local variables,
as git itself lists them (a run started from a git hook has them set to the person's repository)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from agentswf.workflow.worktrees import LOCAL_GIT_VARIABLES


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_every_variable_git_names_repository_local_is_dropped():
    named = subprocess.run(["git", "rev-parse", "--local-env-vars"], capture_output=True, text=True, check=True).stdout
    assert set(named.split()) <= LOCAL_GIT_VARIABLES
    assert "GIT_NO_LAZY_FETCH" in LOCAL_GIT_VARIABLES  # git 2.45's, newer than the git here may be
