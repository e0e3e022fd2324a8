"""A stand-in fixer: reads the problem from its prompt, fixes calc.py, reports what changed.

Its answer is a list of files and a summary, which is taught as JSON: it hands it in
through `wfa result` with the JSON on standard input, as a heredoc would.
"""

import json
import os
import pathlib
import subprocess
import sys

prompt = sys.stdin.read()
source = pathlib.Path("calc.py")
changed = []
if "add(2, 3)" in prompt and "return a - b" in source.read_text():
    source.write_text(source.read_text().replace("return a - b", "return a + b"))
    changed.append("calc.py")
report = {"files": changed, "summary": "add() now adds" if changed else "nothing to fix"}
answer = subprocess.run(
    [os.environ["WFA"], "result", os.environ["WFA_CALL_ID"]], input=json.dumps(report), text=True
)
sys.exit(answer.returncode)
