"""Strays (review 3): a process that outruns the keeper's kills. The keeper finds what is under
it in /proc, then kills what it found; a process that forks and exits at once, over and over,
is never the one found by the time the kill comes, and the keeper gives up after its patience."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from ..harnesses.kit import WAIT_FOR, N, run_wf, shell_agent

pytestmark = pytest.mark.anyio

HOP_C = r"""
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
/* hop DIR MICROSECONDS: fork and let the parent exit, over and over (a pause between: a chain of
   forks at full speed is killed by some machines' init), adding a byte to DIR/beat every 64 hops;
   stop once DIR/stop exists. The run's mark stays in its environment: only the kills count. */
int main(int argc, char **argv) {
    int pause = atoi(argv[2]);
    if (chdir(argv[1]) != 0) return 1;
    for (unsigned long n = 0;; n++) {
        if (pause) usleep(pause);
        if (fork() > 0) _exit(0);  /* a failed fork: this one goes on */
        if (n % 64 == 0) {
            if (access("stop", F_OK) == 0) return 0;
            int beat = open("beat", O_WRONLY | O_CREAT | O_APPEND, 0600);
            write(beat, ".", 1);
            close(beat);
        }
    }
}
"""
BEATS_SECONDS = 1.0  # a live hopper touches its beat many times in this


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the keeper's, below either backend
async def test_a_process_that_forks_away_from_each_kill_is_still_killed(tmp_path: Path) -> None:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler")
    (tmp_path / "hop.c").write_text(HOP_C)
    subprocess.run([compiler, "-O2", "-o", str(tmp_path / "hop"), str(tmp_path / "hop.c")], check=True)
    body = WAIT_FOR + textwrap.dedent(
        """\
        "$OUT/hop" "$OUT" 200 </dev/null >/dev/null 2>&1 &
        wait_for beat
        "$WFA" result "$WFA_CALL_ID" --n 1
        """
    )

    async def fn(wf):
        a = await wf.agents.open("a", runtime=shell_agent(tmp_path, "a", body))
        return (await a.run("Count.", schema=N, timeout=20)).value.n

    try:
        result = await run_wf(fn, tmp_path)
        assert result.value == 1, result.reason
        beat = tmp_path / "beat"
        assert beat.exists()  # it hopped
        before = beat.stat().st_size
        time.sleep(BEATS_SECONDS)
        after = beat.stat().st_size
        assert after == before, "a process of the agent's outlived its run"
    finally:
        (tmp_path / "stop").touch()


def test_a_token_usage_notice_of_another_shape_is_no_usage():
    """A line written into codex app-server's output (a sibling reaches it through /proc) with
    `tokenUsage` of another type: skipped, as any line of an unknown shape, not an AttributeError
    that fails the compaction."""
    from agentswf.harnesses.codex_app import Notice, usage_of

    for shape in ([1], "x", 3, True):
        assert usage_of(Notice("thread/tokenUsage/updated", {"threadId": "t", "tokenUsage": shape})) is None


# The keeper's parent made a subreaper, as the run's own process is not: an orphan of a keeper
# that gave up comes to it (not to the machine's init, which may kill or reap it at once), and
# it reaps them, so that what outlived the keeper is seen to beat on.
UNDER_A_SUBREAPER = """
import os, subprocess, sys, time
from agentswf.harnesses import keeper
hop, out, beats, pause = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
assert keeper.become_subreaper()
read, write = os.pipe()
cli = f'"{hop}" "{out}" {pause} </dev/null >/dev/null 2>&1 & while [ ! -e "{out}/beat" ]; do sleep 0.01; done'
started = time.monotonic()
kept = subprocess.Popen(keeper.keep_command(sys.executable, read, 2.0, None, ["/bin/sh", "-c", cli]), pass_fds=(read,))
kept.wait()  # the CLI exited: the keeper killed what it could
took = time.monotonic() - started

def reap(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                time.sleep(0.001)
        except ChildProcessError:
            time.sleep(0.001)

before = os.path.getsize(os.path.join(out, "beat"))
reap(beats)
after = os.path.getsize(os.path.join(out, "beat"))
open(os.path.join(out, "stop"), "w").close()
reap(0.5)
print("alive" if after > before else "dead", f"{took:.1f}s")
"""


@pytest.mark.parametrize("pause", [0, 50, 200, 1000])  # microseconds between hops
def test_a_process_that_forks_away_from_each_kill_doesnt_outlive_its_keeper(tmp_path: Path, pause: int) -> None:
    import sys

    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler")
    (tmp_path / "hop.c").write_text(HOP_C)
    subprocess.run([compiler, "-O2", "-o", str(tmp_path / "hop"), str(tmp_path / "hop.c")], check=True)
    (tmp_path / "under.py").write_text(UNDER_A_SUBREAPER)
    done = subprocess.run(
        [sys.executable, str(tmp_path / "under.py"), str(tmp_path / "hop"), str(tmp_path), str(BEATS_SECONDS), str(pause)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    (tmp_path / "stop").touch()
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "dead", done.stdout


# A run's directory of sockets is removed at its end, by the run, its watchdog, or the next `awf`
# command's sweep; an agent of another run, still live, can write it (it is the person's). It
# fills one directory there with files, and once the removal is busy with them swaps the other
# directories, already listed, for links to a directory of the person's.
SWAPPED_DIRECTORIES = 50
FILES_TO_REMOVE = 20_000


def test_removing_a_runs_directory_follows_no_link_put_in_a_directorys_place(tmp_path: Path) -> None:
    import os
    import sys

    run_dir, precious = tmp_path / "awf-x", tmp_path / "precious"
    (run_dir / "big").mkdir(parents=True)
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work\n")
    for n in range(FILES_TO_REMOVE):
        (run_dir / "big" / str(n)).touch()
    for n in range(SWAPPED_DIRECTORIES):
        (run_dir / f"d{n}").mkdir()
    os.chmod(run_dir, 0o300)  # as place.py makes it: nobody lists it
    removal = subprocess.Popen([sys.executable, "-c", f"from agentswf.harnesses.keeper import remove_tree; remove_tree({str(run_dir)!r})"])
    try:
        while os.path.exists(run_dir / "big" / "0") and removal.poll() is None:
            pass  # until it is busy with `big`
        for n in range(SWAPPED_DIRECTORIES):
            try:
                os.rename(run_dir / f"d{n}", tmp_path / f"moved{n}")
                os.symlink(precious, run_dir / f"d{n}")
            except OSError:
                continue  # removed already
    finally:
        removal.wait(timeout=60)
    assert (precious / "thesis.tex").exists()
