"""A launch's processes while it runs: the supervisor that starts it and leaves none of its processes
behind however it ends, the console copied to the launch's log as it comes, and the ways to end a
process tree that every part of commlens shares (launches, virtual nodes, interactive engines)."""

from __future__ import annotations

import collections
import glob
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

STDERR_TAIL_CHARS = 4000
KILL_GRACE_S = 3.0   # how long mpiexec may take to end its ranks before they are killed


# -- ending processes -------------------------------------------------------------------------------
# descendants(), kill_all() and the leftover files' functions also run inside the supervisor (`python -I
# -S -c`, the standard library alone), as part of its source: they use nothing but glob, os and signal.

def descendants(root: int) -> list[int]:
    """Every process below `root` (its children, theirs, ...), read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            found.append(pid)
            todo.append(pid)
    return found


def kill_all(pids, signum: int = signal.SIGKILL) -> None:
    """Sends `signum` to every process of `pids`; one already gone (or not ours) is passed over."""
    for pid in pids:
        try:
            os.kill(pid, signum)
        except OSError:
            pass


def alive(pid: int) -> bool:
    """Whether the process runs; a zombie (ended, not yet waited for) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def end_processes(pids, grace_s: float = 5.0, first: int | None = signal.SIGTERM) -> None:
    """Ends the processes `pids`: sends them `first` (None: nothing, they are ending on their own),
    gives them `grace_s` to go, then kills those left."""
    if first is not None:
        kill_all(pids, first)
    deadline = time.monotonic() + grace_s
    left = [pid for pid in pids if alive(pid)]
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = [pid for pid in left if alive(pid)]
    kill_all(left)


# -- a launch job told to stop ----------------------------------------------------------------------

class Interrupted(SystemExit):
    """A launch stopped from outside: by a signal (the workflow stopping its job), or because the
    workflow that started it is gone. Exits with 128 + the signal's number, as a shell reports it."""

    def __init__(self, why: str, signum: int):
        super().__init__(128 + signum)
        self.why = why


def stop_when_told(poll_s: float = 0.5) -> None:
    """Makes SIGTERM and SIGHUP raise Interrupted in this process, so that a launch under way ends every
    process of it on the way out, and does the same when the process that started this one is gone:
    a workflow killed with SIGKILL tells its jobs nothing, and they would run on, re-parented, while
    a rerun starts the same launches again. A second signal while stopping is ignored."""
    parent = os.getppid()
    parent_gone = threading.Event()

    def stop(signum, frame):
        for number in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(number, signal.SIG_IGN)
        why = (f"the workflow that started it (pid {parent}) is gone" if parent_gone.is_set()
               else f"stopped by {signal.Signals(signum).name}")
        raise Interrupted(why, signum)

    def watch():
        while os.getppid() == parent:
            time.sleep(poll_s)
        parent_gone.set()
        os.kill(os.getpid(), signal.SIGTERM)

    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, stop)
    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def interruption(error: BaseException) -> str:
    """Why a launch was interrupted, in words, from what stopped it."""
    if isinstance(error, Interrupted):
        return error.why
    if isinstance(error, KeyboardInterrupt):
        return "stopped by SIGINT (Ctrl-C)"
    return f"stopped by {type(error).__name__}: {error}"


# -- the supervisor ---------------------------------------------------------------------------------

def _supervise() -> None:
    """The first process of every launch; runs as `python -c <this function's source>` (with that of
    descendants and kill_all) so that it starts in milliseconds and needs nothing beyond the
    standard library.

    argv: PARENT_PID GRACE_S LEFTOVERS PRIVATE COMMAND... It runs COMMAND and, however the launch ends,
    leaves no process of it behind, nor the files its killed processes left where LEFTOVERS (glob
    patterns, one per line: the launcher's Launcher.leftovers) say, nor the launch's own directories
    PRIVATE (one per line: its TMPDIR): it outlives the launcher, so this holds when the launcher
    itself is killed outright. MPI launchers put their proxies and ranks in sessions of their
    own (Hydra) or let them outlive a killed mpiexec (PRRTE), so neither a process group nor
    mpiexec's own clean-up is enough: this process adopts every orphan of the launch (child
    subreaper) and kills all its descendants at the end. It also dies with its parent
    (parent-death signal), so a launcher killed with SIGKILL (an interrupted workflow) does
    not leave ranks spinning on the machine.
    """
    import ctypes
    import os
    import shutil
    import signal
    import subprocess
    import sys
    import time

    parent, grace_s, command = int(sys.argv[1]), float(sys.argv[2]), sys.argv[5:]
    leftovers = tuple(pattern for pattern in sys.argv[3].split("\n") if pattern)
    private = [path for path in sys.argv[4].split("\n") if path]
    before = leftover_files(leftovers)
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig, pr_set_child_subreaper = 1, 36
    libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0)
    libc.prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)

    class Stop(Exception):
        pass

    def stop(signum, frame):
        # Ignored from the first on: a stop often comes twice (the launch passes on the one it got, and
        # Slurm signals every process of a job), and a second Stop must not cut the clean-up short.
        for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(number, signal.SIG_IGN)
        raise Stop

    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, stop)

    def end_everything(first) -> None:
        # mpiexec first, politely: it knows its ranks and may clean up shared memory.
        if first is not None and first.poll() is None:
            first.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while first.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        give_up = time.monotonic() + 30  # a process stuck in the kernel (D state) cannot be killed
        while time.monotonic() < give_up:
            left = descendants(os.getpid())
            if not left:
                return
            kill_all(left, signal.SIGKILL)
            try:
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
            except ChildProcessError:
                pass
            time.sleep(0.05)

    first, code = None, 128 + int(signal.SIGTERM)
    try:
        if os.getppid() != parent:  # the launcher died before the parent-death signal was armed
            raise Stop
        first = subprocess.Popen(command)
        code = first.wait()
        code = 128 - code if code < 0 else code
    except Stop:
        pass
    try:   # the launch ended on its own: from here on nothing may cut the clean-up short
        for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(number, signal.SIG_IGN)
    except Stop:   # one that came just before (its handler ignores the rest)
        pass
    end_everything(first)
    remove_leftovers(leftovers, before)
    for path in private:
        shutil.rmtree(path, ignore_errors=True)
    sys.exit(code)


def supervised_command(argv: list[str], grace_s: float, leftovers: tuple[str, ...] = (),
                       private: tuple[str, ...] = ()) -> list[str]:
    """The command that runs `argv` under a supervisor (_supervise) that outlives none of it and
    removes what its killed processes left where `leftovers` say, and the directories `private`."""
    import inspect

    helpers = (descendants, kill_all, leftover_files, remove_leftovers, mapped_files, _supervise)
    source = "\n".join(["import glob", "import os", "import signal", "",
                        *(inspect.getsource(helper) for helper in helpers), "_supervise()", ""])
    return [sys.executable, "-I", "-S", "-c", source, str(os.getpid()), str(grace_s), "\n".join(leftovers),
            "\n".join(map(str, private)), *argv]


def _guard_workflow() -> None:
    """The first process of `commlens run`'s workflow, in a session of its own; runs as `python -c`
    with this function's source. argv: PARENT_PID COMMAND... (Snakemake's command line).

    `commlens run` ends its workflow as a terminal's Ctrl-C would: SIGINT to the whole process group,
    Snakemake and its running launch jobs alike (Snakemake alone, on SIGINT, waits for its jobs to end,
    and a hung launch only ends at its timeout). Killed outright (SIGKILL, the OOM killer), it can do
    nothing; this process then hears of it from the kernel (parent-death signal) and does the same.
    It never stops on SIGINT itself, so that it returns Snakemake's exit status to `commlens run`."""
    import ctypes
    import os
    import signal
    import subprocess
    import sys

    parent, command = int(sys.argv[1]), sys.argv[2:]
    pr_set_pdeathsig = 1

    def ctrl_c_to_the_group(signum=None, frame=None):
        try:
            os.killpg(0, signal.SIGINT)
        except OSError:
            pass

    # A handler, not SIG_IGN: an ignored SIGINT would be inherited through exec, and Snakemake would then
    # never stop (a shell starts background jobs that way); a handler is reset to the default in a child.
    signal.signal(signal.SIGINT, lambda signum, frame: None)
    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, ctrl_c_to_the_group)
    if sys.platform.startswith("linux"):      # prctl is Linux's
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
    workflow = subprocess.Popen(command)
    if os.getppid() != parent:       # `commlens run` died before the parent-death signal was armed
        ctrl_c_to_the_group()
    code = workflow.wait()
    sys.exit(128 - code if code < 0 else code)


def guarded_workflow(argv: list[str]) -> list[str]:
    """The command that runs the workflow `argv` under _guard_workflow, for `commlens run`."""
    import inspect

    source = "\n".join([inspect.getsource(_guard_workflow), "_guard_workflow()", ""])
    return [sys.executable, "-I", "-S", "-c", source, str(os.getpid()), *argv]


def end_launch(process: subprocess.Popen, grace_s: float = 5.0) -> None:
    """Ends a launch: its supervisor kills every process of it; the process group is the fallback."""
    try:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=grace_s + 10)
        return
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    process.wait()


# -- the console ------------------------------------------------------------------------------------

class ConsoleStream:
    """A launch's console (mpiexec's and the ranks' stdout and stderr) copied to its log line by line
    as it comes, so that `tail -f` on the log shows each size as it is measured; the last
    STDERR_TAIL_CHARS are kept for the launch record."""

    def __init__(self, stream, log=None):
        self._kept: collections.deque[str] = collections.deque()
        self._kept_chars = 0
        self._lock = threading.Lock()   # tail() may read while a line still comes in
        self._copier = threading.Thread(target=self._copy, args=(stream, log), daemon=True)
        self._copier.start()

    def _copy(self, stream, log) -> None:
        for line in stream:
            if log is not None:
                try:
                    log.write(line)
                    log.flush()
                except OSError:
                    log = None   # a full disk: the console is still drained, or the launch would block on it
            with self._lock:
                self._kept.append(line)
                self._kept_chars += len(line)
                while len(self._kept) > 1 and self._kept_chars - len(self._kept[0]) >= STDERR_TAIL_CHARS:
                    self._kept_chars -= len(self._kept.popleft())

    def tail(self, wait_s: float = 30.0) -> str:
        """The end of the console once the launch's processes are gone (they close it; `wait_s` bounds
        the wait should one have escaped)."""
        self._copier.join(wait_s)
        with self._lock:
            return "".join(self._kept)[-STDERR_TAIL_CHARS:]


def leftover_files(patterns: tuple[str, ...]) -> set[str]:
    """The files matching a launcher's leftovers (Launcher.leftovers) now."""
    return {path for pattern in patterns for path in glob.glob(pattern)}


def remove_leftovers(patterns: tuple[str, ...], before: set[str]) -> None:
    """What a launcher's killed processes left in a fixed place since `before` was taken. Launches never
    overlap on a machine (launch.locks), so what appeared in the meantime is this launch's; a file that a
    live process maps (the shared memory of an MPI job started outside commlens meanwhile) stays."""
    appeared = leftover_files(patterns) - before
    for path in appeared - (mapped_files() if appeared else set()):
        try:
            os.unlink(path)
        except OSError:
            pass


def mapped_files() -> set[str]:
    """The files that live processes have mapped into memory (from /proc/PID/maps)."""
    mapped = set()
    for maps in glob.glob("/proc/[0-9]*/maps"):
        try:
            with open(maps) as lines:
                for line in lines:
                    fields = line.split(maxsplit=5)   # address, perms, offset, device, inode, path
                    if len(fields) == 6 and fields[5].startswith("/"):
                        mapped.add(fields[5].rstrip("\n"))
        except OSError:
            continue
    return mapped
