"""A stand-in reviewer: runs the project's checks and hands in a typed verdict.

It answers as any agent would, through `wfa result` with the fields as flags.
"""

import os
import subprocess
import sys

sys.stdin.read()  # the prompt; this reviewer's judgement is the checks
checks = subprocess.run([sys.executable, "check.py"], capture_output=True, text=True)
problem = checks.stdout.strip().splitlines()[0] if checks.returncode else ""
verdict = ["--verdict", "changes", "--problem", problem] if problem else ["--verdict", "approve"]
answer = subprocess.run([os.environ["WFA"], "result", os.environ["WFA_CALL_ID"], *verdict])
sys.exit(answer.returncode)
