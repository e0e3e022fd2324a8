"""The tmux client of a pane, run in the agent's process tree: what a tmux server says, the agent's.

    python -S -I tmux_runner.py <tmux> <socket> <timeout seconds>

A tmux client obeys its server: `MSG_SHELL` and `MSG_EXEC` make it exec what the server
names, `MSG_LOCK` run a shell command. The pane's socket is in the pane's `$TMUX`, so an
agent can unlink it and listen there itself. So no tmux client of the run runs in the
run's own process tree: this loop runs under a keeper of the pane's (with the pane's mark,
held as the agent's), and runs one tmux client per request. Whatever a server makes a
client run is then the agent's: refused on the operator socket as the agent's, and killed
with the pane or at the end of the agent's turn (`tmux.TmuxServer.sweep`).

A request is one line, a JSON array of tmux's arguments; the answer is a header line,
`<exit status> <stdout bytes> <stderr bytes>`, then those bytes. The run reads the answer
as hostile (bounded, its header checked): anything in the agent's tree can write to it.

Standard library only, started once per pane.
"""

import json
import subprocess
import sys


def main(argv: list[str]) -> None:
    tmux, socket, timeout = argv[0], argv[1], float(argv[2])
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    for line in requests:
        args = json.loads(line)
        try:
            done = subprocess.run(
                [tmux, "-S", socket, "-f", "/dev/null", *args], stdin=subprocess.DEVNULL, capture_output=True,
                timeout=timeout, check=False,
            )
            status, out, err = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired:
            status, out, err = -1, b"", b"tmux did not answer in time"
        answers.write(b"%d %d %d\n" % (status, len(out), len(err)) + out + err)
        answers.flush()


# Imported by the run's `_START` line, not run as the main script (as keeper.py is).
if __name__ == "__main__":
    main(sys.argv[1:])
