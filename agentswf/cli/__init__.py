"""The `awf` command."""
