"""The project's checks: each prints a problem and exits 1, or exits 0."""

import sys

import calc

problems = []
if calc.add(2, 3) != 5:
    problems.append(f"calc.py: add(2, 3) returns {calc.add(2, 3)}, not 5")
if calc.mean([1, 2, 3]) != 2:
    problems.append("calc.py: mean([1, 2, 3]) is not 2")
print("\n".join(problems))
sys.exit(1 if problems else 0)
