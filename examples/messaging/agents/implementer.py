"""A stand-in implementer: asks the architect, then the coordinator, then hands in its change.

Each question is `wfa send --await-reply`, which doesn't block: it ends its turn, and the
reply starts its next one, whose prompt carries the reply. It tells where it is by
what its prompt holds.
"""

import os
import subprocess
import sys

WFA = os.environ["WFA"]
prompt = sys.stdin.read()


def wfa(*args, message=None):
    done = subprocess.run([WFA, *args], input=message, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"wfa {args[0]} exited {done.returncode}: {done.stderr}")
    return done.stdout


if "coordinator's reply" in prompt:
    merged = "Merge it" in prompt.split("coordinator's reply", 1)[1]
    wfa("result", os.environ["WFA_CALL_ID"], "--where", "queue", "--merged", "true" if merged else "false")
elif "architect's reply" in prompt:
    wfa("send", "--await-reply", "coordinator", message="Retries are in the queue worker, per the architect. May I merge?\n")
else:
    wfa("send", "--await-reply", "architect", message="Should retries live in the HTTP client or in the queue worker?\n")
