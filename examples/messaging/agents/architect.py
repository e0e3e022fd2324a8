"""A stand-in architect: answers each design question it is asked with `wfa reply`."""

import os
import re
import subprocess
import sys

prompt = sys.stdin.read()
askers = re.findall(r"A question from (\S+?);", prompt)
for asker in askers:
    answer = "In the queue worker: the HTTP client is shared with the batch path, which must not retry."
    subprocess.run([os.environ["WFA"], "reply", asker, answer], check=True)
