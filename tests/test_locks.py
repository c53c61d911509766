"""The machine's lock in a folder every user may write, tried by another user who plants something at
its name first: nothing is done through it, and the launch is refused with one line naming it."""

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from commlens.launch import locks

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                reason="plants the lock as another user (nobody): needs root and setpriv")

VICTIM_TEXT = "root:x:0:0:root:/root:/bin/bash\n"


def as_nobody(*argv: str) -> subprocess.CompletedProcess:
    """A command run as the unprivileged user `nobody`, as a hostile local user would run it."""
    return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *argv],
                          capture_output=True, text=True)


@pytest.fixture
def shared_folder():
    """A folder like /run/lock: every user may make files in it (mode 1777)."""
    folder = Path(tempfile.mkdtemp(prefix="commlens-test-shared-"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder)


@pytest.fixture
def victim():
    """A file of root's that the lock must never touch (a stand-in for /etc/passwd)."""
    folder = Path(tempfile.mkdtemp(prefix="commlens-test-victim-"))
    folder.chmod(0o755)
    path = folder / "passwd"
    path.write_text(VICTIM_TEXT)
    path.chmod(0o644)
    yield path
    shutil.rmtree(folder)


def plant(kind: str, lock: Path, victim: Path) -> None:
    """What a hostile user leaves at the lock's name before root's next launch."""
    if kind == "symbolic link to root's file":
        assert as_nobody("ln", "-s", str(victim), str(lock)).returncode == 0
    elif kind == "dangling symbolic link":
        assert as_nobody("ln", "-s", str(victim.parent / "made-later"), str(lock)).returncode == 0
    elif kind == "another user's file":
        assert as_nobody("touch", str(lock)).returncode == 0
    elif kind == "FIFO":
        assert as_nobody("mkfifo", str(lock)).returncode == 0
    elif kind == "hard link to root's file":
        # Where fs.protected_hardlinks is off any user can make this; here root makes it for them.
        os.link(victim, lock)
    else:
        raise ValueError(kind)


@pytest.mark.parametrize("kind, problem", [
    ("symbolic link to root's file", "is a symbolic link"),
    ("dangling symbolic link", "is a symbolic link"),
    ("another user's file", "is owned by nobody (uid 65534), neither this user nor root"),
    ("FIFO", "is not a regular file"),
    ("hard link to root's file", "is a file with 2 names (hard links)"),
])
def test_a_lock_planted_by_another_user_is_refused_and_nothing_is_done_to_it(shared_folder, victim, monkeypatch,
                                                                             kind, problem):
    lock = shared_folder / "commlens-machine.lock"
    monkeypatch.setenv("COMMLENS_MACHINE_LOCK", str(lock))
    plant(kind, lock, victim)
    before = lock.lstat()
    with pytest.raises(locks.LockRefused) as info:
        with locks.machine("a launch (test)"):
            pytest.fail("the machine was taken through a planted lock")
    message = str(info.value)
    assert message.count("\n") == 0 and message.startswith(f"lock {lock} {problem}"), message
    assert "COMMLENS_MACHINE_LOCK" in message, message
    assert victim.read_text() == VICTIM_TEXT
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644 and victim.stat().st_uid == 0
    after = lock.lstat()
    assert (after.st_mode, after.st_uid, after.st_size, after.st_ino) == (before.st_mode, before.st_uid,
                                                                         before.st_size, before.st_ino)
    assert not (victim.parent / "made-later").exists()


def test_roots_lock_is_made_readable_not_writable_and_still_keeps_other_users_out(shared_folder, monkeypatch):
    """The lock root makes is 0644: another user cannot write it, yet flock(2) on a read-only descriptor
    still waits for root's launch, so launches of different users never overlap."""
    lock = shared_folder / "commlens-machine.lock"
    monkeypatch.setenv("COMMLENS_MACHINE_LOCK", str(lock))
    with locks.machine("a launch (test)"):
        assert stat.S_IMODE(lock.stat().st_mode) == 0o644 and lock.stat().st_uid == 0
        assert "a launch (test)" in lock.read_text()
        busy = as_nobody("flock", "--nonblock", str(lock), "true")
        assert busy.returncode == 1, busy
        assert as_nobody("sh", "-c", f"echo x > {lock}").returncode != 0
    free = as_nobody("flock", "--nonblock", str(lock), "true")
    assert free.returncode == 0, free
    assert lock.read_text() == ""      # who held it is cleared when it is released


@pytest.mark.mpi
def test_commlens_run_says_it_waits_for_the_machine_and_refuses_a_planted_lock(workspace, built, tmp_path,
                                                                              shared_folder, victim, monkeypatch):
    """On the console of `commlens run`: the line naming a planted lock (and the launch not recorded, so
    that the next run redoes it), then, once the lock is a plain file another process holds for a while,
    the line saying the launch waits for the machine."""
    import threading

    from conftest import small_campaign, write_campaign
    from test_cli import commlens_run

    lock = shared_folder / "commlens-machine.lock"
    monkeypatch.setenv("COMMLENS_MACHINE_LOCK", str(lock))
    env = {**os.environ, "COMMLENS_CACHE": str(tmp_path / "cache")}
    campaign = write_campaign(workspace / "config" / "campaigns", small_campaign("lockverb"), "lockverb.yaml")
    raw = workspace / "results" / "lockverb" / "raw"
    plant("symbolic link to root's file", lock, victim)
    refused = subprocess.run(commlens_run(workspace, campaign), capture_output=True, text=True, timeout=300, env=env)
    assert refused.returncode != 0
    assert (f"launch mpich-5.0.2/1N2P/pingpong.send/0 not recorded: lock {lock} is a symbolic link; "
            in refused.stderr), refused.stderr
    assert victim.read_text() == VICTIM_TEXT and not list(raw.rglob("*.jsonl"))

    lock.unlink()
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with locks.machine("another campaign's launch (test)"):
            taken.set()
            release.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert taken.wait(10)
        run = subprocess.Popen(commlens_run(workspace, campaign), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)
        waiting = "launch mpich-5.0.2/1N2P/pingpong.send/0: waiting for the machine: another campaign's launch (test)"
        assert run.stdout is not None
        for line in run.stdout:
            if line.startswith(waiting):
                break
        else:
            pytest.fail(f"no waiting line on the console: {run.communicate()}")
    finally:
        release.set()
        holder.join()
    out, err = run.communicate(timeout=300)
    assert run.returncode == 0 and "launches: 1 ok of 1" in out, out + err
