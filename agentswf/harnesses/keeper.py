"""The keeper: a small process per agent attempt, so that nothing the agent starts outlives it.

    python -S -I keeper.py keep <lifeline fd> <grace seconds> <scratch dir or ""> <argv…>
    python -S -I keeper.py watch <lifeline fd> <run dir>

(The run starts it with `-c`, importing this file, for its cached bytecode.)

`keep` makes itself a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`): whatever the CLI
starts, however it backgrounds it (`&`, `nohup`, `setsid`, a double fork), stays under
the keeper, since an orphan is reparented to its nearest subreaper, not to init. It runs
the CLI on its own standard streams and waits, and then kills every process left under it:

- the CLI exited: everything left is killed at once;
- SIGTERM (the run stopping the attempt): everything gets SIGTERM, the CLI a grace to exit
  (the grace the run gives), then everything left SIGKILL;
- the lifeline closed (the run holds its write end; it closes when the run dies, `kill -9`
  included): everything is killed at once.

It kills in passes (a process may fork while its siblings die) until a pass finds none,
reaps, removes the attempt's scratch directory (its TMPDIR, where the CLIs leave files: a dead
run's too), and exits with the CLI's status, or by the CLI's signal, as the CLI would have.
The CLI runs in a process group of its own; where there is no subreaper (not Linux), that
group is what the keeper kills, and what leaves it (`setsid`, a group of its own) escapes.

`watch` is the run's watchdog: when its lifeline closes (the run ended, or died) it kills
every process whose environment carries the run's mark (`MARK_VARIABLE`, which every
agent process gets; a second net under the keepers), and removes the run's directory and
its attempts' scratch directories (named with the mark) that their keepers didn't.

Standard library C modules and `os` only: a keeper starts once per attempt, so it loads
nothing it doesn't need (`_signal` rather than `signal`, which imports enum). It is
imported as `agentswf.harnesses.keeper` too, for `kill_marked` and the command lines.
"""

import _signal  # type: ignore[import-not-found]  # no stub: `signal`'s C half
import os
import select
import sys
import time

MARK_VARIABLE = "AGENTSWF_MARK"
SCRATCH_PREFIX = "awf-tmp-"  # an unsandboxed attempt's TMPDIR, `<prefix><run's mark>-…` in the run's temp directory
PASS_PAUSE_SECONDS = 0.005  # between killing passes, for the killed to become zombies
KILL_PATIENCE_SECONDS = 5.0  # passes stop after this long (a process stuck in the kernel can't be hurried)
FAST_PASSES = 64  # of the children's list, killed as read, in each pass: a fork-and-exit chain is caught here
_PR_SET_CHILD_SUBREAPER = 36
_SIGKILL = _signal.SIGKILL
_SIGTERM = _signal.SIGTERM


def become_subreaper() -> bool:
    """Make orphans of this process's descendants its children; False where the platform can't.

    `prctl` through `_ctypes`, the C layer of `ctypes`: importing `ctypes` itself costs a
    keeper about 4 ms, a third of its start.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        import _ctypes

        class Int(_ctypes._SimpleCData):
            _type_ = "i"

        class Function(_ctypes.CFuncPtr):
            _flags_ = _ctypes.FUNCFLAG_CDECL
            _restype_ = Int

        libc = _ctypes.dlopen(None)  # type: ignore[arg-type]  # None: the process's own symbols
        prctl = Function(_ctypes.dlsym(libc, "prctl"))
        return prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (ImportError, OSError, AttributeError):
        return False


def _processes() -> list[tuple[int, int]]:
    """(pid, parent pid) of every live process (zombies are done), from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/" + entry + "/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] not in (b"Z", b"X"):
            found.append((int(entry), int(fields[1])))
    return found


def children() -> list[int]:
    """This process's live children, from the kernel's one list of them (Linux 3.5 and later):
    read and signalled far faster than a process can fork and exit, as a scan of /proc is not.
    Zombies are listed too; signalling them does nothing."""
    pid = str(os.getpid())
    try:
        with open("/proc/" + pid + "/task/" + pid + "/children", "rb") as listed:
            return [int(child) for child in listed.read().split()]
    except (OSError, ValueError):
        return []


def descendants(root: int) -> list[int]:
    """The live processes under `root` (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for pid, parent in _processes():
        children.setdefault(parent, []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def marked(mark: str) -> list[int]:
    """Live processes whose environment has `MARK_VARIABLE` set to `mark` or to `mark/…`."""
    exact = (MARK_VARIABLE + "=" + mark).encode()
    under = exact + b"/"
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open("/proc/" + entry + "/environ", "rb") as environ:
                variables = environ.read().split(b"\0")
        except OSError:
            continue
        if any(variable == exact or variable.startswith(under) for variable in variables):
            found.append(int(entry))
    return found


def kill_marked(mark: str) -> int:
    """SIGKILL every process carrying `mark`, in passes until none is left; how many were found."""
    if not os.path.isdir("/proc"):
        return 0
    killed: set[int] = set()
    give_up = time.monotonic() + KILL_PATIENCE_SECONDS
    while time.monotonic() < give_up:
        found = [pid for pid in marked(mark) if pid not in killed or _alive(pid)]
        if not found:
            break
        _signal_all(found, _SIGKILL)
        killed.update(found)
        time.sleep(PASS_PAUSE_SECONDS)
    return len(killed)


def _alive(pid: int) -> bool:
    try:
        with open("/proc/" + str(pid) + "/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


class Keeper:
    """One attempt's CLI and everything under it."""

    def __init__(self, argv: list[str], lifeline: int, grace: float, scratch: str) -> None:
        self.argv = argv
        self.lifeline = lifeline
        self.grace = grace
        self.scratch = scratch  # the attempt's TMPDIR, removed once nothing under the keeper is left; "": none
        self.subreaper = become_subreaper()
        self.cli = 0
        self.status: int | None = None  # the CLI's wait status, once reaped

    def reap(self) -> bool:
        """Reap every child that has ended, keeping the CLI's status; whether any child is left."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.cli:
                self.status = status

    def kill_all(self, signum: int = _SIGKILL) -> None:
        """Signal every process under the keeper; with SIGKILL, in passes until none is left."""
        if not self.subreaper:  # the CLI's process group is all that can be found
            try:
                os.killpg(self.cli, signum)
            except (ProcessLookupError, PermissionError):
                pass
            self.reap()
            return
        give_up = time.monotonic() + KILL_PATIENCE_SECONDS
        while True:
            if not self.reap():  # no child left, live or not: under a subreaper, then no descendant either
                return
            _signal_all(children(), signum)  # at once: a process that forks and exits is one of them
            _signal_all(descendants(os.getpid()), signum)  # a scan can miss one: only no child at all ends this
            if signum != _SIGKILL or time.monotonic() > give_up:
                return
            for _ in range(FAST_PASSES):  # until its children are only the killed, waiting to be reaped
                live = children()
                if not live:
                    break
                _signal_all(live, signum)
            time.sleep(PASS_PAUSE_SECONDS)

    def run(self) -> None:
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_write, False)
        terminated = []
        _signal.signal(_signal.SIGCHLD, lambda signum, frame: None)
        _signal.signal(_SIGTERM, lambda signum, frame: terminated.append(signum))
        _signal.set_wakeup_fd(wake_write)
        os.set_inheritable(self.lifeline, False)  # the CLI has no business with it
        try:
            self.cli = os.posix_spawnp(
                self.argv[0], self.argv, os.environ, setpgroup=0, setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ)
            )
        except OSError as error:
            sys.stderr.write(f"agentswf: can't run {self.argv[0]}: {error.strerror or error}\n")
            self.remove_scratch()
            os._exit(127 if isinstance(error, FileNotFoundError) else 126)
        poller = select.poll()
        poller.register(self.lifeline, select.POLLIN | select.POLLHUP)
        poller.register(wake_read, select.POLLIN)
        run = run_pidfd()
        if run is not None:
            poller.register(run, select.POLLIN)
        term_by: float | None = None
        while self.status is None:
            timeout = None if term_by is None else max(0.0, term_by - time.monotonic())
            events = dict(poller.poll(None if timeout is None else int(timeout * 1000) + 1))
            if wake_read in events:
                os.read(wake_read, 512)
            self.reap()
            if self.status is not None:
                break
            if self.lifeline in events or (run is not None and run in events):  # the run is gone
                break
            if terminated and term_by is None:
                term_by = time.monotonic() + self.grace
                self.kill_all(_SIGTERM)
            if term_by is not None and time.monotonic() >= term_by:
                break
        self.kill_all()
        self.remove_scratch()
        self.exit()

    def remove_scratch(self) -> None:
        if self.scratch:
            remove_tree(self.scratch)

    def exit(self) -> None:
        """Exit as the CLI did: with its status, or by its signal."""
        status = self.status if self.status is not None else _SIGKILL  # a CLI never reaped was killed
        if os.WIFEXITED(status):
            os._exit(os.WEXITSTATUS(status))
        signum = os.WTERMSIG(status)
        _signal.set_wakeup_fd(-1)
        if signum != _SIGKILL:
            _signal.signal(signum, _signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)  # a signal that doesn't end a process by default


def run_pidfd() -> int | None:
    """A pidfd of the run (this process's parent), readable once the run has ended.

    The lifeline alone isn't enough: an agent can reopen a pipe's write end through
    /proc/<pid>/fd of a process it can reach and hold it, so the pipe never closes. A
    pidfd can't be kept open by anyone else. None where pidfds aren't to be had (not
    Linux, or a kernel before 5.3), or if the run is gone already."""
    parent = os.getppid()
    try:
        pidfd = os.pidfd_open(parent)
    except (AttributeError, OSError):
        return None
    if os.getppid() != parent:  # the run died before the pidfd was opened: it is some reaper's
        os.close(pidfd)
        return None
    return pidfd


def watch(lifeline: int, run_dir: str) -> None:
    """Wait for the run to end (its lifeline closes, or its pidfd says so); then kill what
    carries the run's mark and remove its directory."""
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    poller = select.poll()
    poller.register(lifeline, select.POLLIN | select.POLLHUP)
    run = run_pidfd()
    if run is not None:
        poller.register(run, select.POLLIN)
    while True:
        try:
            events = dict(poller.poll())
        except InterruptedError:
            continue
        if run is not None and run in events:
            break
        if lifeline in events:
            try:
                if not os.read(lifeline, 512):
                    break
            except InterruptedError:
                continue
            except OSError:
                break
    mark = os.path.basename(run_dir)
    kill_marked(mark)  # the keepers too, which remove their attempts' scratch directories if they get to it first
    remove_tree(run_dir)
    import tempfile  # here, not at the top: the watchdog alone pays for it, once a run

    root = tempfile.gettempdir()  # the run's: the watchdog has its environment
    for name in os.listdir(root):
        if name.startswith(SCRATCH_PREFIX + mark + "-"):
            remove_tree(os.path.join(root, name))


_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_O_PATH = getattr(os, "O_PATH", 0)  # Linux: a descriptor of a directory that needs no permission on it
_FILE_TYPE, _DIRECTORY_TYPE = 0o170000, 0o040000  # of st_mode (`stat.S_IFMT`, `stat.S_IFDIR`)


def remove_tree(path: str) -> None:
    """Remove a run's directory of sockets and launchers (its own mode forbids listing it),
    following no symbolic link. An agent of another run, still live, can write it, and swap a
    directory already listed for a link to one of yours: each directory is opened by a
    descriptor, never through a link, and emptied through it, so the link is only unlinked."""
    try:
        descriptor = _open_directory(path, None)
    except OSError:
        return
    try:
        _empty(descriptor)
    finally:
        os.close(descriptor)
    try:
        os.rmdir(path)
    except OSError:
        pass


def _open_directory(name: str, parent: int | None) -> int:
    """The directory `name` (in `parent`'s) opened for listing, made 0700 first; OSError for a link or a file."""
    if not _O_PATH:  # no Linux descriptors of a path: by name, checked to be a directory first
        if os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode & _FILE_TYPE != _DIRECTORY_TYPE:
            raise NotADirectoryError(name)
        os.chmod(name, 0o700, dir_fd=parent)
        return os.open(name, _DIRECTORY, dir_fd=parent)
    held = os.open(name, _O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    try:
        os.chmod(f"/proc/self/fd/{held}", 0o700)  # the very directory held, whatever its name is now
        return os.open(f"/proc/self/fd/{held}", _DIRECTORY & ~os.O_NOFOLLOW)
    finally:
        os.close(held)


def _empty(directory: int) -> None:
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        try:
            inner = _open_directory(entry.name, directory)
        except OSError:  # not a directory, or a link to one: unlinked
            try:
                os.unlink(entry.name, dir_fd=directory)
            except OSError:
                pass
            continue
        try:
            _empty(inner)
        finally:
            os.close(inner)
        try:
            os.rmdir(entry.name, dir_fd=directory)
        except OSError:
            pass


# Imported, not run as the main script (compiled from source every time); appended to the
# path, so that nothing beside it can stand in for a standard module.
_START = f"import sys; sys.path.append({os.path.dirname(os.path.abspath(__file__))!r}); import keeper; keeper.main(sys.argv[1:])"


def keep_command(python: str, lifeline: int, grace: float, scratch: str | None, argv: list[str]) -> list[str]:
    return [python, "-S", "-I", "-c", _START, "keep", str(lifeline), repr(grace), scratch or "", *argv]


def watch_command(python: str, lifeline: int, run_dir: str) -> list[str]:
    return [python, "-S", "-I", "-c", _START, "watch", str(lifeline), run_dir]


def main(argv: list[str]) -> None:
    if len(argv) >= 5 and argv[0] == "keep":
        Keeper(argv[4:], int(argv[1]), float(argv[2]), argv[3]).run()
    elif len(argv) == 3 and argv[0] == "watch":
        watch(int(argv[1]), argv[2])
    else:
        sys.exit("usage: keeper.py keep <fd> <grace> <scratch dir or \"\"> <argv…> | watch <fd> <run dir>")


if __name__ == "__main__":
    main(sys.argv[1:])
