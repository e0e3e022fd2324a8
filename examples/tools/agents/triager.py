"""A stand-in triager: reads the backlog through `wfa tool`, labels and prioritises each item.

It calls the tools as an LLM agent would from its shell: `list_items` by name alone,
`label_item` with JSON on standard input (as a heredoc gives it), `set_priority` with
flags. Keywords stand in for judgement.
"""

import json
import os
import subprocess
import sys

WFA = os.environ["WFA"]
RULES = [  # keyword -> (label, priority)
    ("crash", ("bug", "p1")),
    ("times out", ("performance", "p1")),
    ("duplicate", ("bug", "p2")),
    ("typo", ("cosmetic", "p3")),
]


def wfa(*args, stdin=None):
    done = subprocess.run([WFA, *args], input=stdin, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"wfa {args[0]} {args[1] if len(args) > 1 else ''} exited {done.returncode}: {done.stderr}")
    return done.stdout


sys.stdin.read()  # the prompt
items = json.loads(wfa("tool", "list_items"))
for item in items:
    title = item["title"].lower()
    label, priority = next((rule for word, rule in RULES if word in title), ("triage-needed", "p3"))
    labels = [label] + (["ops"] if "cron" in title else [])
    wfa("tool", "label_item", stdin=json.dumps({"id": item["id"], "labels": labels}))
    wfa("tool", "set_priority", "--id", item["id"], "--priority", priority)
wfa("result", os.environ["WFA_CALL_ID"], stdin=json.dumps(f"Triaged {len(items)} items."))
