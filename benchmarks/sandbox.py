"""What a sandbox adds to a turn's start and to one `wfa` call, against the same agent unsandboxed, in one run.

    python benchmarks/sandbox.py [N]              (default N=20)
    python benchmarks/sandbox.py --repository [N] [WORKTREES...]   (default N=5; 0 100 1000)

Shell agents, so the CLI costs nothing of its own: each turn runs `/bin/sh` on a script.

- turn: `agent.run` of an agent that answers at once (`wfa result`), timed around
  `agent.run`: the start of the process tree (keeper, and for a sandbox bubblewrap, the
  namespaces and mounts, and with a network the proxy socket and the forwarder in front) and
  one `wfa` round trip;
- wfa: one `wfa tool noop` call, timed inside the agent's shell around 20 calls in a row
  (the interpreter's start through the sandbox's mounts, the connection, the identity check
  walking two more parents).

Three agents, interleaved N times: `plain` (unsandboxed: the baseline), `reader`
(`wf.sandboxes.open(key)`: no network, so no proxy) and `networked` (`network=["pypi.org"]`:
the proxy and the forwarder). Prints medians, the ratio to plain and the milliseconds added.

`--repository`: a turn in a git repository of REFS_IN_REPOSITORY branches on as many commits,
and each number of linked worktrees given (git's own entries, `.git/worktrees/<name>`, as `git
worktree add` leaves them but for their checkouts): `plain` (unsandboxed, in the repository),
`reader` (a sandbox reading it: bubblewrap's own cost, nothing of git's), `writer` (a sandbox writing the repository: its git controls held, its submodules and pointers
read before and swept after) and `worktree` (an agent on `wf.worktree` in its own sandbox
writing `.`: its git directory made before, what it did carried back after). `start` is from
`agent.run` to the agent's command's first line (the clock it reads, `date +%s%N`); `turn` is
the whole `agent.run`, the carrying back included. What a sandbox must hold read-only there
must cost no mount, nor a read, per linked worktree or per ref.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

import agentswf
from agentswf import Runtime, tool, workflow

CALLS_PER_TURN = 20
ANSWER = '"$WFA" result "$WFA_CALL_ID" ok\n'
LOOP = f"""\
t0=$(date +%s%N)
i=0; while [ $i -lt {CALLS_PER_TURN} ]; do "$WFA" tool noop >/dev/null || exit 1; i=$((i+1)); done
t1=$(date +%s%N)
"$WFA" result "$WFA_CALL_ID" "$(( (t1 - t0) / {CALLS_PER_TURN} ))"
"""
KINDS = ("plain", "reader", "networked")
REPOSITORY_KINDS = ("plain", "reader", "writer", "worktree")
STARTED = 'started=$(date +%s%N); "$WFA" result "$WFA_CALL_ID" "$started"\n'  # when its command began, in ns
REFS_IN_REPOSITORY = 20_000
WORKTREE_COUNTS = (0, 100, 1000)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout


def make_repository(path: Path, worktrees: int) -> None:
    """A repository with REFS_IN_REPOSITORY branches on as many commits (made by `git fast-import`,
    its refs packed, as `git pack-refs` leaves them) and `worktrees` linked worktrees' entries."""
    git(path.parent, "init", "-q", "-b", "main", str(path))
    for key, value in (("user.name", "Bench"), ("user.email", "bench@example.com"), ("commit.gpgsign", "false")):
        git(path, "config", key, value)
    stream = ["commit refs/heads/main", "mark :1", "committer B <b@example.com> 1700000000 +0000", "data 5", "first",
              "M 644 inline README", "data 6", "bench", ""]  # fmt: skip
    for i in range(REFS_IN_REPOSITORY):
        stream += [f"commit refs/heads/dependabot/pip/package-{i}", f"committer B <b@example.com> {1700000001 + i} +0000",
                   "data 4", "bump", "from :1", f"M 644 inline requirements-{i % 50}.txt", f"data {len(str(i)) + 1}", str(i), ""]  # fmt: skip
    subprocess.run(["git", "-C", str(path), "fast-import", "--quiet"], input="\n".join(stream).encode() + b"\n", check=True)
    git(path, "pack-refs", "--all")
    git(path, "checkout", "-q", "main")
    head = git(path, "rev-parse", "HEAD").strip()
    for i in range(worktrees):  # what `git worktree add` writes in the repository, without the checkouts
        entry = path / ".git" / "worktrees" / f"wt-{i}"
        entry.mkdir(parents=True)
        (entry / "HEAD").write_text(f"{head}\n")
        (entry / "commondir").write_text("../..\n")
        (entry / "gitdir").write_text(f"{path.parent / 'elsewhere' / f'wt-{i}'}/.git\n")


async def repository_turns(repo: Path, n: int) -> dict[str, dict[str, list[float]]]:
    """Each kind's turns in `repo`, interleaved `n` times: their starts and their whole turns, in seconds."""
    times: dict[str, dict[str, list[float]]] = {kind: {"start": [], "turn": []} for kind in REPOSITORY_KINDS}

    @workflow(name="bench-repository", description="Turns in a repository, sandboxed and not.")
    async def flow(wf):
        runtime = Runtime(harness="shell", command=("/bin/sh", "-c", STARTED))
        agents = {
            "plain": await wf.agents.open("plain", runtime=runtime),
            "reader": await wf.agents.open("reader", runtime=runtime, sandbox={}),
            "writer": await wf.agents.open("writer", runtime=runtime, sandbox={"write": ["."]}),
            "worktree": await wf.agents.open("worktree", runtime=runtime, cwd=wf.worktree("w"), sandbox={"write": ["."]}),
        }
        for agent in agents.values():  # the first turn of each makes its directory (and home): not timed
            await agent.run("Answer.", timeout=120)
        for _ in range(n):
            for kind, agent in agents.items():
                called, start = time.time(), time.perf_counter()
                turn = await agent.run("Answer.", timeout=120)
                times[kind]["turn"].append(time.perf_counter() - start)
                assert turn.answered, turn.outcome
                times[kind]["start"].append(int(turn.value) / 1e9 - called)

    result = await agentswf.run(flow, run_root=repo.parent / "runs", cwd=repo)
    if not result.completed:
        sys.exit(f"the benchmark's run {result.outcome}: {result.reason}")
    return times


async def repository(n: int, counts: tuple[int, ...]) -> None:
    print(f"N={n} turns of each; {REFS_IN_REPOSITORY} refs on as many commits; medians, ratio to plain, ms added")
    for count in counts:
        with tempfile.TemporaryDirectory(prefix="awf-bench-sandbox-") as root:
            repo = Path(root) / "repo"
            made = time.perf_counter()
            make_repository(repo, count)
            made = time.perf_counter() - made
            times = await repository_turns(repo, n)
        print(f"worktrees {count} (the repository made in {made:.1f} s)")
        for measure in ("start", "turn"):
            baseline = statistics.median(times["plain"][measure])
            for kind in REPOSITORY_KINDS:
                median = statistics.median(times[kind][measure])
                print(
                    f"  {measure:5} {kind:9} {median * 1000:8.2f} ms  ratio {median / baseline:5.2f}  "
                    f"added {(median - baseline) * 1000:+8.2f} ms"
                )


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory(prefix="awf-bench-sandbox-") as root:
        base = Path(root)
        (base / "answer.sh").write_text(ANSWER)
        (base / "loop.sh").write_text(LOOP)
        times: dict[str, dict[str, list[float]]] = {kind: {"turn": [], "wfa": []} for kind in KINDS}

        @workflow(name="bench-sandbox", description="Turns and wfa calls, sandboxed and not.")
        async def flow(wf):
            boxes = {
                "plain": None,
                "reader": await wf.sandboxes.open("reader"),
                "networked": await wf.sandboxes.open("networked", network=["pypi.org"]),
            }
            noop = {"noop": tool(lambda: "ok", description="Nothing.")}
            answer = {
                kind: await wf.agents.open(f"{kind}-answer", runtime=Runtime(harness="shell", command=("/bin/sh", str(base / "answer.sh"))), sandbox=box)
                for kind, box in boxes.items()
            }  # fmt: skip
            loop = {
                kind: await wf.agents.open(f"{kind}-loop", runtime=Runtime(harness="shell", command=("/bin/sh", str(base / "loop.sh"))), sandbox=box, tools=noop)
                for kind, box in boxes.items()
            }  # fmt: skip
            for kind in KINDS:  # the first turn of each makes its directory (and home): not timed
                await answer[kind].run("Answer.", timeout=30)
                await loop[kind].run("Loop.", timeout=60)
            for _ in range(n):
                for kind in KINDS:
                    start = time.perf_counter()
                    turn = await answer[kind].run("Answer.", timeout=30)
                    times[kind]["turn"].append(time.perf_counter() - start)
                    assert turn.answered, turn.outcome
                    turn = await loop[kind].run("Loop.", timeout=60)
                    assert turn.answered, turn.outcome
                    times[kind]["wfa"].append(int(turn.value) / 1e9)

        result = await agentswf.run(flow, run_root=base / "runs", cwd=base)
        if not result.completed:
            sys.exit(f"the benchmark's run {result.outcome}: {result.reason}")
    print(f"N={n} turns of each, {CALLS_PER_TURN} wfa calls a turn; medians, ratio to plain, ms added")
    for measure in ("turn", "wfa"):
        baseline = statistics.median(times["plain"][measure])
        for kind in KINDS:
            median = statistics.median(times[kind][measure])
            print(
                f"{measure:5} {kind:10} {median * 1000:8.2f} ms  ratio {median / baseline:5.2f}  "
                f"added {(median - baseline) * 1000:+7.2f} ms"
            )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--repository"]:
        given = [int(arg) for arg in sys.argv[2:]]
        anyio.run(repository, given[0] if given else 5, tuple(given[1:]) or WORKTREE_COUNTS)
    else:
        anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 20)
