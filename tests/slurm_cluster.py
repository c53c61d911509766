"""A real single-node Slurm cluster on this host, for the tests marked `slurm`.

The `local_slurm` fixture starts munged, slurmctld and slurmd from Debian's
slurm-wlm and munge with a configuration of their own (private munge socket and
key, free ports, no accounting, no cgroups), waits until the node is idle, and
stops all three at the end of the session. Nothing under /etc is touched: the
configuration lives in a state directory and SLURM_CONF points every client
(sbatch, squeue, scontrol, and the Snakemake executor plugin that calls them)
at it for the session. Inside jobs, where the executor's job step drops SLURM_*
variables (SLURM_CONF among them), srun finds the configuration as on a
configless cluster, at /run/slurm/conf/slurm.conf, where clients look when
nothing else names one: for the session that path links to the state directory.

The state directory has a fixed name, so a session that was killed before its
teardown leaves pid files the next one finds: those daemons are stopped (only
when their command line names this directory) before anything starts. A lock
held for the whole session makes a second session on the same host wait for
the first instead of stopping its cluster; the kernel drops the lock of a
session that dies.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

PARTITION = "debug"
CLUSTER = "commbench"
STATE_DIR = Path(tempfile.gettempdir()) / "commbench-slurm"
CONFIGLESS_LINK = Path("/run/slurm/conf")   # where Slurm clients look when SLURM_CONF is unset
COMMANDS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scontrol")
DAEMONS = ("slurmd", "slurmctld", "munged")   # stop order: the node, the controller, then authentication
START_TIMEOUT_S = 60
LOCK_TIMEOUT_S = 900


@dataclass
class LocalSlurm:
    """What a test needs to submit to the cluster and to check what it did."""

    partition: str
    node: str
    cpus: int
    conf: Path
    state_dir: Path
    env: dict[str, str] = field(repr=False)
    lock: object = field(default=None, repr=False)

    @property
    def slurmctld_log(self) -> Path:
        return self.state_dir / "log" / "slurmctld.log"

    @property
    def jobcomp_log(self) -> Path:
        """One line per finished job (jobcomp/filetxt): the record that survives without accounting."""
        return self.state_dir / "log" / "jobcomp.txt"

    def finished_jobs(self) -> list[dict[str, str]]:
        """Every job the controller saw end, as key=value fields of jobcomp/filetxt."""
        if not self.jobcomp_log.exists():
            return []
        jobs = []
        for line in self.jobcomp_log.read_text().splitlines():
            fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
            if fields:
                jobs.append(fields)
        return jobs


def _unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "not root: a private Slurm controller and node need root (slurmd runs jobs as their user)"
    for command in COMMANDS:
        if shutil.which(command) is None:
            return f"missing command {command} (Debian packages slurm-wlm and munge; `bash envs/install-system`)"
    if os.path.lexists(CONFIGLESS_LINK) and not _ours(CONFIGLESS_LINK, STATE_DIR):
        return f"{CONFIGLESS_LINK} belongs to another Slurm on this host"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def _node_line(node: str) -> tuple[str, int]:
    """The node as slurmd sees its hardware, so the controller never marks it invalid."""
    probe = subprocess.run(["slurmd", "-C"], capture_output=True, text=True)
    for line in probe.stdout.splitlines():
        if line.startswith("NodeName="):
            words = [w for w in line.split() if not w.startswith(("NodeName=", "UpTime="))]
            cpus = next(int(w.split("=")[1]) for w in words if w.startswith("CPUs="))
            return f"NodeName={node} NodeHostname={socket.gethostname()} " + " ".join(words), cpus
    cpus = os.cpu_count() or 1
    memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    return f"NodeName={node} NodeHostname={socket.gethostname()} CPUs={cpus} RealMemory={memory_mb * 9 // 10}", cpus


def _write_conf(state: Path, node: str, node_line: str, ctld_port: int) -> Path:
    conf = state / "slurm.conf"
    conf.write_text(f"""\
# Written by tests/slurm_cluster.py for one test session; nothing else uses it.
ClusterName={CLUSTER}
SlurmctldHost={node}
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld_port}
SlurmdPort={_free_port()}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={state / "munge" / "munge.socket"}
StateSaveLocation={state / "ctld"}
SlurmdSpoolDir={state / "spool"}
SlurmctldPidFile={state / "run" / "slurmctld.pid"}
SlurmdPidFile={state / "run" / "slurmd.pid"}
SlurmctldLogFile={state / "log" / "slurmctld.log"}
SlurmdLogFile={state / "log" / "slurmd.log"}
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups in containers or small VMs: track job processes by their parentage.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
SwitchType=switch/none
# No slurmdbd: the executor plugin must read job states from squeue, which keeps a
# finished job for MinJobAge seconds; jobcomp/filetxt keeps a line per finished job.
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc={state / "log" / "jobcomp.txt"}
MinJobAge=300
ReturnToService=2
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
{node_line} State=UNKNOWN
PartitionName={PARTITION} Nodes={node} Default=YES MaxTime=INFINITE State=UP
""")
    return conf


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _stop_daemons(state: Path, grace_s: float = 10.0) -> None:
    """Stops the daemons whose pid files are in `state` and whose command line names `state`."""
    for daemon in DAEMONS:
        pid_file = state / "run" / f"{daemon}.pid"
        try:
            pid = int(pid_file.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if not psutil.pid_exists(pid) or str(state) not in _cmdline(pid):
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while psutil.pid_exists(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if psutil.pid_exists(pid):
            os.kill(pid, signal.SIGKILL)
    if _ours(CONFIGLESS_LINK, state):
        CONFIGLESS_LINK.unlink()


def _ours(link: Path, state: Path) -> bool:
    return link.is_symlink() and str(state) in os.readlink(link)


def _start(command: list[str], env: dict[str, str], state: Path) -> None:
    proc = subprocess.run(command, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        logs = _log_tails(state)
        raise RuntimeError(f"{' '.join(command)} failed ({proc.returncode}): {proc.stdout}{proc.stderr}\n{logs}")


def _log_tails(state: Path) -> str:
    parts = []
    for log in sorted((state / "log").glob("*.log")):
        parts.append(f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-20:]))
    return "\n".join(parts)


def _wait_idle(node: str, env: dict[str, str], state: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    last = ""
    while time.monotonic() < deadline:
        proc = subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%t"], env=env, capture_output=True, text=True)
        last = (proc.stdout + proc.stderr).strip()
        if proc.returncode == 0 and last == "idle":
            return
        time.sleep(0.5)
    raise RuntimeError(f"node {node} not idle after {START_TIMEOUT_S} s (sinfo: {last!r})\n{_log_tails(state)}")


def _lock(state: Path):
    """An exclusive lock on this host's test cluster, waited for, held until closed."""
    handle = open(state.with_name(state.name + ".lock"), "w")
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            if time.monotonic() > deadline:
                handle.close()
                raise RuntimeError(f"another test session has held {handle.name} for {LOCK_TIMEOUT_S} s") from None
            time.sleep(1)


def start_cluster(state: Path = STATE_DIR) -> LocalSlurm:
    """Starts munged, slurmctld and slurmd for this host; stop it with stop_cluster()."""
    lock = _lock(state)
    try:
        return _start_cluster(state, lock)
    except BaseException:
        lock.close()
        raise


def _start_cluster(state: Path, lock) -> LocalSlurm:
    _stop_daemons(state)
    shutil.rmtree(state, ignore_errors=True)
    for sub in ("munge", "ctld", "spool", "run", "log"):
        (state / sub).mkdir(parents=True, mode=0o700)
    node = socket.gethostname().split(".")[0]
    node_line, cpus = _node_line(node)
    ctld_port = _free_port()
    conf = _write_conf(state, node, node_line, ctld_port)
    env = {**os.environ, "SLURM_CONF": str(conf)}

    # Where a configless node keeps its copy: jobs whose SLURM_CONF was dropped read it there.
    (state / "conf").mkdir(mode=0o755)
    (state / "conf" / "slurm.conf").symlink_to(conf)
    CONFIGLESS_LINK.parent.mkdir(parents=True, exist_ok=True)
    CONFIGLESS_LINK.symlink_to(state / "conf")

    key = state / "munge" / "munge.key"
    if shutil.which("mungekey"):
        subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True, capture_output=True)
    else:
        key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    # --force: munged refuses root and a socket outside /run/munge unless told to go ahead.
    _start(["munged", "--force", f"--socket={state / 'munge' / 'munge.socket'}", f"--key-file={key}",
            f"--pid-file={state / 'run' / 'munged.pid'}", f"--log-file={state / 'log' / 'munged.log'}",
            f"--seed-file={state / 'munge' / 'munged.seed'}"], env, state)
    try:
        _start(["slurmctld", "-f", str(conf)], env, state)
        _start(["slurmd", "-f", str(conf)], env, state)
        _wait_idle(node, env, state)
    except BaseException:
        _stop_daemons(state)
        raise
    return LocalSlurm(partition=PARTITION, node=node, cpus=cpus, conf=conf, state_dir=state, env=env, lock=lock)


def stop_cluster(cluster: LocalSlurm) -> None:
    # Jobs first, so no slurmstepd outlives its node daemon.
    subprocess.run(["scancel", "--full", f"--partition={cluster.partition}"], env=cluster.env,
                   capture_output=True)
    _stop_daemons(cluster.state_dir)
    if cluster.lock is not None:
        cluster.lock.close()


@pytest.fixture(scope="session")
def local_slurm():
    """A running single-node Slurm cluster; SLURM_CONF points at it for the session."""
    reason = _unavailable_reason()
    if reason:
        pytest.skip(reason)
    cluster = start_cluster()
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        yield cluster
    finally:
        if previous is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = previous
        stop_cluster(cluster)
