"""`.ci/compat`'s helpers: what to install, one JSON row per CLI and version from a run's JUnit XML,
and the table of them.

    python .ci/compat_row.py --spec CLI minimum|latest      the npm spec to install
    python .ci/compat_row.py RESULT.xml CLI VERSION WHICH   one row (no file: not installed, none ran)
    python .ci/compat_row.py --table ROW.json ...           benchmarks/COMPAT.md from the rows there are
"""

from __future__ import annotations

import datetime
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def spec(cli: str, which: str) -> str:
    """The npm spec of `cli`'s declared minimum (under the package it had then) or of its latest."""
    from agentswf.harnesses.versions import TESTED, package_of, shown

    tested = TESTED[cli]
    return f"{package_of(cli, tested.minimum)}@{shown(tested.minimum)}" if which == "minimum" else f"{tested.package}@latest"


def row(result: Path, cli: str, version: str, which: str) -> dict[str, object]:
    if not result.exists():
        return {"cli": cli, "version": version, "which": f"{which}, not installed", "passed": 0, "failed": []}
    suite = ET.parse(result).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")  # type: ignore[assignment]
    failed = [f"{case.get('classname')}.{case.get('name')}" for case in suite.iter("testcase")
              if case.find("failure") is not None or case.find("error") is not None]  # fmt: skip
    passed = int(suite.get("tests", 0)) - int(suite.get("skipped", 0)) - len(failed)
    return {"cli": cli, "version": version, "which": which, "passed": passed, "failed": failed}


def table(rows: list[dict[str, object]]) -> str:
    lines = [
        "# Compatibility of the agent CLIs",
        "",
        f"Written by `.ci/compat` on {datetime.date.today()}: each CLI at its declared minimum and at",
        "@latest (agentswf/harnesses/versions.py), the other two at .ci/run's pins, against the",
        "real-CLI tests (the end-to-end tests of every test file that runs a CLI, `-n 2`, on a machine",
        "shared with other work); each run's output is left in .ci/compat-node/.",
        "",
        "| CLI | version | passed | failed |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| {r['cli']} | {r['version']} ({r['which']}) | {r['passed']} | {len(r['failed'])} |" for r in rows]  # type: ignore[arg-type]
    for r in rows:
        if r["failed"]:
            lines += ["", f"{r['cli']} {r['version']} failed:", ""]
            lines += [f"- `{name}`" for name in r["failed"]]  # type: ignore[attr-defined]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1] == "--spec":
        print(spec(sys.argv[2], sys.argv[3]))
    elif sys.argv[1] == "--table":
        sys.stdout.write(table([json.loads(Path(name).read_text()) for name in sys.argv[2:] if Path(name).exists()]))
    else:
        print(json.dumps(row(Path(sys.argv[1]), *sys.argv[2:5])))
