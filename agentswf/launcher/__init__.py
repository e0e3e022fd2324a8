"""The socket's two ends: the `wfa` client an agent runs, the launcher script, the per-agent listener."""
