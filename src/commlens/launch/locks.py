"""The locks that keep launches apart.

- One per launch, beside its raw file (`launch0.jsonl.lock`): a launch is never run twice at once,
  even when a workflow was killed (`kill -9`) and a rerun starts it again while the killed run's
  launch is still ending. The second waits for the first, then runs.
- One per machine (machine_lock_path()): launches of different campaigns, or of different
  checkouts or users, on one host never overlap. A launch that finds the machine busy waits, says
  so, and records how long it waited (`waited_for_machine_s` in its launch record). Launches inside
  a Slurm allocation do not take it: the allocation is the launch's own.

Both are flock(2) locks on a file: the kernel drops a lock when the process holding it ends, however
it ends, so a killed holder never leaves a stale lock behind. A launch's supervisor holds them with
the launch (held_descriptors()): a launch whose launcher was killed outright keeps them until the
supervisor has ended its processes and removed what they left. The lock file says who holds it (for
the waiting one's message); a launch's lock file is removed by its holder when the launch ends.

The machine's lock sits in a folder every user may write, so its name may have been taken first by
anyone: it is opened without following a symbolic link and used only where it is a regular file with
one name, owned by this user or by root (a file root made in a shared folder, which no one else can
have put there). Anything else is refused with one line naming it (LockRefused), and nothing is
written to a lock file this user does not own.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import pwd
import socket
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

POLL_S = 0.2
_HELD: set[int] = set()    # the descriptors of the locks this process holds now (held_descriptors)


def machine_lock_path() -> Path:
    """A folder every user of this host shares and may write: /run/lock (Debian, Fedora, ...), else
    /var/lock, else the temporary folder. `COMMLENS_MACHINE_LOCK` names another file (a host whose
    users share no such folder)."""
    if os.environ.get("COMMLENS_MACHINE_LOCK"):
        return Path(os.environ["COMMLENS_MACHINE_LOCK"])
    for folder in ("/run/lock", "/var/lock"):
        if os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK):
            return Path(folder) / "commlens-machine.lock"
    return Path(tempfile.gettempdir()) / "commlens-machine.lock"


class LockError(RuntimeError):
    """A lock that could not be taken: the launch is not run, and not recorded (the next run redoes it)."""


class LockTimeout(LockError):
    """A lock still held by another process after the longest wait allowed; `holder` says who holds it."""

    def __init__(self, message: str, holder: str = "another process"):
        super().__init__(message)
        self.holder = holder


class LockRefused(LockError):
    """A lock file that is a symbolic link, not a regular file, a file with several names, or another
    user's: the one line names it, what it is, and how to go on."""


def holder_line(what: str) -> str:
    """Who holds a lock, as the waiting side reads it: what, process, host and since when."""
    return f"{what} (pid {os.getpid()} on {socket.gethostname()}, since {time.strftime('%Y-%m-%d %H:%M:%S')})"


@contextlib.contextmanager
def held(path, holder: str, *, wait_s: float | None = None, on_wait: Callable[[str], None] | None = None,
         remove: bool = False, hint: str = "remove it") -> Iterator[float]:
    """Holds the flock of `path` for the block; yields the seconds it waited for it. While another
    process holds it, `on_wait` is told once who (what it wrote in the file) and the lock is tried
    again every POLL_S (signals still reach this process), up to `wait_s` (None: without end), then
    LockTimeout. `remove`: the file goes when the block ends (a launch's; the machine's stays). A lock file
    that _open refuses raises LockRefused, its line ending with `hint` (what to do about it)."""
    path = Path(path)
    t0 = time.monotonic()
    told = False
    while True:
        fd, ours = _open(path, hint)
        try:
            if _try_lock(fd):
                if _same_file(fd, path):
                    break
                os.close(fd)          # removed by its last holder after we opened it: take the new one
                continue
            if not told and on_wait is not None:
                on_wait(_read(fd) or "another process")
                told = True
            if wait_s is not None and time.monotonic() - t0 > wait_s:
                holder_now = _read(fd) or "another process"
                raise LockTimeout(f"{path} is still held by {holder_now} after {time.monotonic() - t0:.0f} s",
                                  holder_now)
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
        time.sleep(POLL_S)
    waited = time.monotonic() - t0
    if ours:                          # root's machine lock, taken by another user, is only read
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, (holder + "\n").encode(), 0)
    _HELD.add(fd)
    try:
        yield waited
    finally:
        _HELD.discard(fd)
        if remove:
            with contextlib.suppress(OSError):
                path.unlink()         # while still held: a waiter that opened it takes a new one
        elif ours:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
        os.close(fd)                  # drops the lock


def held_descriptors() -> tuple[int, ...]:
    """The open files of the locks this process holds: a process started with them (subprocess's
    pass_fds) holds those locks too, for as long as either keeps them open."""
    return tuple(sorted(_HELD))


def machine(what: str, tell: Callable[[str], None] | None = None, *, holder: str | None = None,
            wait_s: float | None = None):
    """The machine's lock, held for `what` (a launch, an interactive launch, engines' clean-up): `held`
    on machine_lock_path(), `tell` given one line while another holds it. `holder`: what the lock file
    says (default: holder_line(what))."""
    path = machine_lock_path()
    on_wait = None if tell is None else (
        lambda other: tell(f"{what}: waiting for the machine: {other} is running there (lock {path})"))
    return held(path, holder or holder_line(what), wait_s=wait_s, on_wait=on_wait,
                hint="remove it, or set COMMLENS_MACHINE_LOCK to a file of your own")


def _open(path: Path, hint: str) -> tuple[int, bool]:
    """The lock file's descriptor, and whether this user owns it (and so may write who holds it).
    Made if missing, readable by every user (flock needs no more: other users' launches take it too);
    never through a symbolic link, and never a FIFO or device (O_NONBLOCK: opening one does not wait).
    Raises LockRefused for anything but a regular file with one name, owned by this user or root."""
    flags = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    created = False
    try:
        try:
            fd = os.open(path, os.O_RDWR | flags)
        except FileNotFoundError:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | flags, 0o644)
                created = True
            except FileExistsError:   # made meanwhile by another launch, or a dangling link: look again
                return _open(path, hint)
        except PermissionError:
            fd = os.open(path, os.O_RDONLY | flags)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise LockRefused(f"lock {path} is a symbolic link; a lock is never opened through one: refused, "
                              f"nothing was done to it ({hint})") from None
        raise
    info = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(info.st_mode):
        problem = "is not a regular file"
    elif info.st_nlink != 1:
        problem = f"is a file with {info.st_nlink} names (hard links)"
    elif info.st_uid not in (os.geteuid(), 0):
        problem = f"is owned by {_user(info.st_uid)}, neither this user nor root"
    if problem:
        os.close(fd)
        raise LockRefused(f"lock {path} {problem}: refused, nothing was done to it ({hint})")
    if created:
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o644)      # past the umask: readable by every user; this process made it
    writable = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDWR
    return fd, writable and info.st_uid == os.geteuid()


def _user(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _try_lock(fd: int) -> bool:
    """Whether the lock is ours now. A file system without flock (Lustre mounted without it, some NFS)
    gives no lock at all: the launch goes ahead as it would without one."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    except OSError as error:
        if error.errno in (errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
            return True
        raise


def _same_file(fd: int, path: Path) -> bool:
    try:
        mine, named = os.fstat(fd), os.lstat(path)
        return (mine.st_dev, mine.st_ino) == (named.st_dev, named.st_ino)
    except FileNotFoundError:
        return False


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 4096, 0).decode(errors="replace").strip()
    except OSError:
        return ""


def launch_lock_path(output) -> Path:
    """The lock of the launch whose raw file is `output`."""
    output = Path(output)
    return output.with_name(output.name + ".lock")

