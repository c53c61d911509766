"""A real multi-node Slurm cluster on this host, for the tests marked `slurm`.

The nodes are virtual nodes (commlens.launch.vnodes): network namespaces behind a bridge,
each with its own hostname, address and CPUs. One node has every CPU of the host
(on-node placements of as many ranks as it has cores) and two split them (two-node
placements, whose ranks must not share a core); the split nodes weigh less, so Slurm
gives them to a job first. The `local_slurm` fixture starts munged and slurmctld on
this host, whose address on the bridge is the controller's, and one slurmd on each
node, from Debian's slurm-wlm and munge with a configuration of their own (private
munge socket and key, free ports, no accounting, no cgroups), waits until every
node is idle, and stops them all and removes the nodes at the end of the session.
Nothing under /etc is touched: the configuration lives in a state directory (every
node sees this host's files, munge's socket among them) and SLURM_CONF points every client
(sbatch, squeue, scontrol, and the Snakemake executor plugin that calls them)
at it for the session. Inside jobs, where the executor's job step drops SLURM_*
variables (SLURM_CONF among them), srun finds the configuration as on a
configless cluster, at /run/slurm/conf/slurm.conf, where clients look when
nothing else names one: for the session that path links to the state directory.

The state directory has a fixed name, so a session that was killed before its
teardown leaves pid files the next one finds: those daemons are stopped (only
when their command line names this directory) before anything starts, and its
virtual nodes are swept when the new ones are made. A lock
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
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from commlens.launch import vnodes

PARTITION = "debug"
CLUSTER = "commlens"
# In /run, which only root may write (the cluster needs root): a fixed name, which test sessions share to
# find and stop each other's daemons, that no other user can take first with a link of their own.
STATE_DIR = Path("/run/commlens-slurm")
CONFIGLESS_LINK = Path("/run/slurm/conf")   # where Slurm clients look when SLURM_CONF is unset
COMMANDS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scontrol")
DAEMONS = ("slurmd-*", "slurmctld", "munged")   # stop order: the nodes, the controller, then authentication
START_TIMEOUT_S = 60
LOCK_TIMEOUT_S = 900


@dataclass
class LocalSlurm:
    """What a test needs to submit to the cluster and to check what it did."""

    partition: str
    nodes: dict[str, int]         # node name -> its CPUs
    conf: Path
    state_dir: Path
    env: dict[str, str] = field(repr=False)
    cluster: vnodes.VirtualCluster | None = field(default=None, repr=False)
    lock: object = field(default=None, repr=False)

    @property
    def whole_host_node(self) -> str:
        """The node with every CPU of the host: where on-node placements run."""
        return max(self.nodes, key=self.nodes.get)

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
    return vnodes.unavailable_reason()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def node_layout(cpus: list[int]) -> list[tuple[int, ...]]:
    """The nodes' CPUs: every CPU for the first, halves for the two others."""
    return [tuple(sorted(cpus)), *vnodes.split_cpus(2, cpus)]


def _node_lines(cluster: vnodes.VirtualCluster) -> str:
    """Each node as the controller knows it: its address on the bridge, its CPUs, and a weight that
    has jobs fill the split nodes first. Every node may use this host's memory. slurmd's own
    hardware count is not checked against it (config_overrides): the cpuset is the node."""
    memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20 * 9 // 10
    return "\n".join(f"NodeName={node.hostname} NodeAddr={node.address} CPUs={len(node.cpus)} "
                     f"RealMemory={memory_mb} Weight={2 if index == 0 else 1} State=UNKNOWN"
                     for index, node in enumerate(cluster.nodes))


def _write_conf(state: Path, cluster: vnodes.VirtualCluster, ctld_port: int) -> Path:
    conf = state / "slurm.conf"
    names = ",".join(cluster.hostnames)
    conf.write_text(f"""\
# Written by tests/slurm_cluster.py for one test session; nothing else uses it.
ClusterName={CLUSTER}
# The controller is this host, reached from the nodes at its address on their bridge.
SlurmctldHost={socket.gethostname().split(".")[0]}({cluster.host_address})
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld_port}
SlurmdPort={_free_port()}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={state / "munge" / "munge.socket"}
StateSaveLocation={state / "ctld"}
SlurmdSpoolDir={state / "spool" / "%n"}
SlurmctldPidFile={state / "run" / "slurmctld.pid"}
SlurmdPidFile={state / "run" / "slurmd-%n.pid"}
SlurmctldLogFile={state / "log" / "slurmctld.log"}
SlurmdLogFile={state / "log" / "slurmd-%n.log"}
SlurmctldDebug=info
SlurmdDebug=info
SlurmdParameters=config_overrides
# No cgroups in containers or small VMs: track a job's processes by their process group, as such a
# site can. Not by parentage (linuxproc), which loses a process whose parent has died: Slurm then
# signals a job's processes one at a time, in no set order, and when a job's Snakemake gets its SIGTERM
# just after its own job has ended, Snakemake's handler waits forever for the scheduler lock that the
# code it interrupted holds; re-parented once the batch shell is gone, that Snakemake is never killed.
# A process group is signalled at once and stays tracked, so KillWait's SIGKILL reaches whatever is
# left, as a job's cgroup does on a production cluster.
ProctrackType=proctrack/pgid
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
{_node_lines(cluster)}
PartitionName={PARTITION} Nodes={names} Default=YES MaxTime=INFINITE State=UP
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
        pids = []
        for pid_file in sorted((state / "run").glob(f"{daemon}.pid")):
            try:
                pid = int(pid_file.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            if psutil.pid_exists(pid) and str(state) in _cmdline(pid):
                os.kill(pid, signal.SIGTERM)
                pids.append(pid)
        deadline = time.monotonic() + grace_s
        while any(psutil.pid_exists(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in pids:
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


def _wait_idle(nodes: list[str], env: dict[str, str], state: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    last = ""
    while time.monotonic() < deadline:
        proc = subprocess.run(["sinfo", "-h", "-N", "-n", ",".join(nodes), "-o", "%t"], env=env, capture_output=True,
                              text=True)
        last = (proc.stdout + proc.stderr).strip()
        if proc.returncode == 0 and last.split() == ["idle"] * len(nodes):
            return
        time.sleep(0.5)
    raise RuntimeError(f"nodes {nodes} not idle after {START_TIMEOUT_S} s (sinfo: {last!r})\n{_log_tails(state)}")


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
    vnodes.sweep()
    cluster = vnodes.plan(3, cpus=node_layout(sorted(os.sched_getaffinity(0))), host_address=True)
    try:
        return _start_daemons(state, lock, cluster)
    except BaseException:
        vnodes.destroy(cluster.name)
        raise


def _start_daemons(state: Path, lock, cluster: vnodes.VirtualCluster) -> LocalSlurm:
    vnodes.create(cluster)
    for node in cluster.hostnames:
        (state / "spool" / node).mkdir(mode=0o700)
    conf = _write_conf(state, cluster, _free_port())
    # The nodes' CPU sets differ, so Open MPI's PRRTE must map each node by its own topology, not
    # the first one's: what a site with unlike nodes sets for everyone (jobs inherit it from sbatch).
    env = {**os.environ, "SLURM_CONF": str(conf), "PRTE_MCA_prte_hetero_nodes": "1"}

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
        for node in cluster.hostnames:   # each in its node, where its hostname is the node's name
            _start(cluster.command_on(node, ["slurmd", "-f", str(conf)]), env, state)
        _wait_idle(cluster.hostnames, env, state)
    except BaseException:
        _stop_daemons(state)
        raise
    return LocalSlurm(partition=PARTITION, nodes={node.hostname: len(node.cpus) for node in cluster.nodes},
                      conf=conf, state_dir=state, env=env, cluster=cluster, lock=lock)


def stop_cluster(cluster: LocalSlurm) -> None:
    # Jobs first, so no slurmstepd outlives its node daemon.
    subprocess.run(["scancel", "--full", f"--partition={cluster.partition}"], env=cluster.env,
                   capture_output=True)
    _stop_daemons(cluster.state_dir)
    if cluster.cluster is not None:
        vnodes.destroy(cluster.cluster.name)
    if cluster.lock is not None:
        cluster.lock.close()


_running: list[LocalSlurm] = []   # the session's cluster while it runs (stop_early)


def stop_early() -> None:
    """Stops the session's cluster before the session ends: tests/machine_share.py calls it once the last
    test that uses it has run, so that its daemons do not run beside the tests that follow."""
    while _running:
        stop_cluster(_running.pop())


@pytest.fixture(scope="session")
def local_slurm():
    """A running Slurm cluster of virtual nodes; SLURM_CONF points at it for the session."""
    reason = _unavailable_reason()
    if reason:
        pytest.skip(reason)
    cluster = start_cluster()
    _running.append(cluster)
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        yield cluster
    finally:
        if previous is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = previous
        if cluster in _running:
            _running.remove(cluster)
            stop_cluster(cluster)
