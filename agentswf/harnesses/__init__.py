"""One module per agent CLI (claude, codex, pi, cursor) and shell: how each is started, resumed and stopped."""
