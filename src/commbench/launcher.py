"""One launch: mpiexec of commbench-kernels for a (library, placement, kernel), with a time limit.

The placement decides the transport. On one host, `nodes: 1` runs over shared
memory, and `nodes > 1` is emulated by forcing each library onto its TCP path
over loopback, so the dataset can say `transport="tcp", emulated=True`. In a
Slurm allocation with as many hosts as the placement has nodes, the ranks run on
those hosts over the real network (`transport="network", emulated=False`).

The launch always ends in one complete raw file, written atomically: a
"launch" record (what ran, how, and whether it succeeded) followed, on
success, by the kernel's own run / point / end records. A failed, killed or
incomplete launch keeps only its launch record: partial output is never merged.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from . import netem
from .libraries import in_environment

RAW_SCHEMA = 1
STDERR_TAIL_CHARS = 4000
KILL_GRACE_S = 3.0   # how long mpiexec may take to end its ranks before they are killed

# Environment each family needs to take the network path between ranks on one host.
EMULATED_NETWORK_ENV = {
    "mpich": {"MPIR_CVAR_NOLOCAL": "1", "MPIR_CVAR_CH4_NETMOD": "ofi",
              "FI_PROVIDER": "tcp", "FI_TCP_IFACE": "lo"},
    "openmpi": {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,tcp",
                "OMPI_MCA_btl_tcp_if_include": "lo"},
}


@dataclass
class Placement:
    name: str
    nodes: int
    ppn: int
    network: dict | None = None   # {"rate": "1gbit", "mtu": 1500}: an emulated interconnect
    hosts: int = 1                # hosts the launch may use: 1 here, the allocation's under Slurm

    @property
    def nprocs(self) -> int:
        return self.nodes * self.ppn

    @property
    def emulated(self) -> bool:
        """True when ranks meant for different nodes share one host."""
        return self.nodes > 1 and self.hosts < self.nodes

    @property
    def transport(self) -> str:
        return "tcp" if self.emulated else "shm" if self.nodes == 1 else "network"


@dataclass
class LaunchPlan:
    """The exact command and environment of one launch, recorded with its result."""

    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    binding: str = "core"


def plan_launch(family: str, placement: Placement, binary: str, kernel_args: list[str],
                output: str, library_env: dict[str, str] | None = None,
                cores: int | None = None) -> LaunchPlan:
    """mpiexec command line and environment for this family and placement on the local host."""
    cores = cores or os.cpu_count() or 1
    nprocs = placement.nprocs
    oversubscribed = nprocs > cores
    binding = "none" if oversubscribed else "core"
    env: dict[str, str] = {}
    if placement.emulated:
        env.update(EMULATED_NETWORK_ENV[family])
    if family == "openmpi":
        if os.geteuid() == 0:
            # Open MPI refuses root unless both are set; containers and CI commonly run as root.
            env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
        launcher = ["mpiexec", "-n", str(nprocs), "--bind-to", binding]
        if oversubscribed:
            launcher.append("--oversubscribe")
    else:
        launcher = ["mpiexec", "-n", str(nprocs), "-bind-to", binding]
    # The campaign's own settings (MCA parameters, CVARs) win over the defaults above.
    env.update(library_env or {})
    # Kernels that pair ranks across nodes need to know where the node boundaries are.
    command = launcher + [binary, *kernel_args, "--nodes", str(placement.nodes), "-o", output]
    return LaunchPlan(command=command, env=env, binding=binding)


def slurm_allocation(environ=os.environ) -> dict[str, str]:
    """Inside a Slurm job, the allocation as the variables that MPI launchers read for their
    hosts and slots (MPICH's Hydra and Open MPI's PRRTE). A Snakemake job step keeps only
    the job id of them, so they are restored from `scontrol show job`. Empty outside Slurm,
    or when the allocation's node list is there already."""
    job = environ.get("SLURM_JOB_ID")
    if not job or environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST"):
        return {}
    try:
        shown = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True,
                               timeout=30, env=environ)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    fields = dict(word.split("=", 1) for word in shown.stdout.split() if "=" in word)
    try:
        nodelist, nodes = fields["NodeList"], int(fields["NumNodes"].split("-")[0])
        tasks, cpus = int(fields["NumTasks"]), int(fields["NumCPUs"])
    except (KeyError, ValueError):
        return {}

    def per_node(total: int) -> str:   # Slurm's compressed form: 2(x3) is 2 on each of 3 nodes
        return str(total // nodes) + (f"(x{nodes})" if nodes > 1 else "")

    return {"SLURM_JOB_NODELIST": nodelist, "SLURM_NODELIST": nodelist,
            "SLURM_JOB_NUM_NODES": str(nodes), "SLURM_NNODES": str(nodes),
            "SLURM_NTASKS": str(tasks), "SLURM_NPROCS": str(tasks),
            "SLURM_TASKS_PER_NODE": per_node(tasks), "SLURM_JOB_CPUS_PER_NODE": per_node(cpus)}


def allocated_hosts(environ) -> int:
    """How many hosts this launch may spread over: a Slurm allocation's nodes, else this one."""
    try:
        return int(environ.get("SLURM_JOB_NUM_NODES") or environ.get("SLURM_NNODES") or 1)
    except ValueError:
        return 1


def _supervise() -> None:
    """The first process of every launch; runs as `python -c <this function's source>` so that it
    starts in milliseconds and needs nothing beyond the standard library.

    argv: PARENT_PID GRACE_S COMMAND... It runs COMMAND and, however the launch ends, leaves
    no process of it behind. MPI launchers put their proxies and ranks in sessions of their
    own (Hydra) or let them outlive a killed mpiexec (PRRTE), so neither a process group nor
    mpiexec's own clean-up is enough: this process adopts every orphan of the launch (child
    subreaper) and kills all its descendants at the end. It also dies with its parent
    (parent-death signal), so a launcher killed with SIGKILL (an interrupted workflow) does
    not leave ranks spinning on the machine.
    """
    import ctypes
    import os
    import signal
    import subprocess
    import sys
    import time

    parent, grace_s, command = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig, pr_set_child_subreaper = 1, 36
    libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0)
    libc.prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)

    class Stop(Exception):
        pass

    def stop(signum, frame):
        raise Stop

    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, stop)

    def descendants() -> list[int]:
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as stat:
                        ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError, IndexError):
                    continue
                children.setdefault(ppid, []).append(int(entry))
        found, todo = [], [os.getpid()]
        while todo:
            for pid in children.get(todo.pop(), []):
                found.append(pid)
                todo.append(pid)
        return found

    def end_everything(first) -> None:
        for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(number, signal.SIG_IGN)
        # mpiexec first, politely: it knows its ranks and may clean up shared memory.
        if first is not None and first.poll() is None:
            first.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while first.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        give_up = time.monotonic() + 30  # a process stuck in the kernel (D state) cannot be killed
        while time.monotonic() < give_up:
            left = descendants()
            if not left:
                return
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
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
    end_everything(first)
    sys.exit(code)


def _supervised(argv: list[str], grace_s: float) -> list[str]:
    import inspect

    source = inspect.getsource(_supervise) + "\n_supervise()\n"
    return [sys.executable, "-I", "-S", "-c", source, str(os.getpid()), str(grace_s), *argv]


def _kill_tree(process: subprocess.Popen, grace_s: float = 5.0) -> None:
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


def read_complete_output(path: Path) -> tuple[list[str], str | None]:
    """The kernel's lines, and why they cannot be used (None when they end in an ok end record)."""
    if not path.exists():
        return [], "the kernel wrote no output"
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    if not lines:
        return [], "the kernel's output is empty"
    try:
        last = json.loads(lines[-1])
    except json.JSONDecodeError:
        return lines, "the kernel's output ends in an incomplete line"
    if last.get("record") != "end" or last.get("status") != "ok":
        return lines, "the kernel's output has no ok end record"
    return lines, None


def write_raw_file(output: Path, record: dict, lines: list[str], partial: Path) -> None:
    """The launch's raw file, whole or not at all: its launch record then the kernel's lines (none
    for a launch that gave no data), written beside it and renamed; the partial output goes."""
    tmp = output.with_name(output.name + ".tmp")
    tmp.write_text("\n".join([json.dumps(record), *lines]) + "\n")
    os.replace(tmp, output)
    partial.unlink(missing_ok=True)


def run_launch(*, env_dir, binary, kernel: str, kernel_args: list[str], placement: Placement,
               family: str, library: str, mpi: str, launch: int, output, timeout_s: float,
               library_env: dict[str, str] | None = None, log=None, scratch=None,
               settings: dict | None = None) -> dict:
    """Runs one launch and writes `output`; returns its launch record. Never raises for a failed run.

    The launch gets a private directory under `scratch` for any files it makes (io kernels);
    it is removed when the launch ends, however it ends. `settings` (the campaign's view of
    the launch) is kept in the launch record, so that a later campaign can tell whether
    rerunning it would replace these results with differently configured ones."""
    Path(scratch or tempfile.gettempdir()).mkdir(parents=True, exist_ok=True)
    private = tempfile.mkdtemp(prefix=f"commbench-{library}-{placement.name}-{kernel}-{launch}-",
                               dir=scratch or None)
    try:
        return _run_launch(env_dir, binary, kernel, [*kernel_args, "--scratch", private], placement, family,
                           library, mpi, launch, output, timeout_s, library_env, log, settings)
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _run_launch(env_dir, binary, kernel, kernel_args, placement, family, library, mpi, launch, output,
                timeout_s, library_env, log, settings=None) -> dict:
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(output.name + ".partial")
    partial.unlink(missing_ok=True)
    allocation = slurm_allocation(os.environ)
    placement = replace(placement, hosts=allocated_hosts({**os.environ, **allocation}))
    plan = plan_launch(family, placement, str(Path(binary).resolve()), kernel_args,
                       str(partial.resolve()), library_env)
    env = {**os.environ, **allocation, **plan.env}
    argv = in_environment(env_dir, shlex.join(plan.command))
    if placement.network and not placement.emulated:
        # The emulated link is a network namespace on one host; real hosts have their own links.
        argv = ["sh", "-c", f"echo 'placement {placement.name}: an emulated network (network:) runs on "
                f"one host only; this allocation has {placement.hosts} hosts' >&2; exit 2"]
    elif placement.network:
        argv = netem.wrap(shlex.join(argv), placement.network)
    started = datetime.now(timezone.utc)
    t0 = time.monotonic()
    process = subprocess.Popen(_supervised(argv, KILL_GRACE_S), env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               errors="replace", start_new_session=True)
    try:
        console, _ = process.communicate(timeout=timeout_s)
        status = "ok" if process.returncode == 0 else "failed"
    except subprocess.TimeoutExpired:
        _kill_tree(process, KILL_GRACE_S)
        console, _ = process.communicate()
        status = "timeout"
    except BaseException:
        # Interrupted (Ctrl-C, the workflow stopping us): the launch must not outlive us.
        _kill_tree(process, KILL_GRACE_S)
        raise
    duration = time.monotonic() - t0
    if log is not None:
        log.write(console)
    lines, problem = read_complete_output(partial)
    if status == "ok" and problem:
        status = "failed"
    record = {
        "record": "launch", "schema": RAW_SCHEMA, "status": status,
        "library": library, "mpi": mpi, "family": family,
        "placement": placement.name, "nodes": placement.nodes, "ppn": placement.ppn,
        "nprocs": placement.nprocs, "transport": placement.transport, "emulated": placement.emulated,
        "network": placement.network,
        "kernel": kernel, "launch": launch,
        "command": plan.command, "env": plan.env, "binding": plan.binding,
        "exit_code": process.returncode, "started": started.isoformat(timespec="seconds"),
        "duration_s": round(duration, 3), "timeout_s": timeout_s,
    }
    if settings is not None:
        record["settings"] = settings
    if status != "ok":
        record["reason"] = problem if status == "failed" and process.returncode == 0 else (
            f"killed after the {timeout_s:g} s timeout" if status == "timeout"
            else f"exit code {process.returncode}")
        if placement.network and (reason := netem.unavailable_reason()):
            record["reason"] += f"; {reason}"
        record["console_tail"] = console[-STDERR_TAIL_CHARS:]
    write_raw_file(output, record, lines if status == "ok" else [], partial)
    return record
