"""One launch: mpiexec of commbench-kernels for a (library, placement, kernel), with a time limit.

The placement decides the transport. On one host, `nodes: 1` runs over shared
memory, and `nodes > 1` is emulated (`transport="tcp", emulated=True`), in one of
two ways, the placement's `emulate:`. `namespaces` (the default where this host
can make them) runs each node's ranks on a virtual node of its own
(commbench.vnodes): mpiexec starts on the first node and reaches the others
through its own remote shell, as on a cluster, so each library takes its normal
path between hosts, TCP over the virtual links. `loopback` (where virtual nodes
cannot be made) forces each library onto its TCP path over loopback. In a Slurm
allocation with as many hosts as the placement has nodes, the ranks run on those
hosts over the real network (`transport="network", emulated=False`).

How mpiexec is called depends on the library's launcher, read from its
`mpiexec --version` when its environment was made: MPICH's Hydra, Open MPI 4's
ORTE or Open MPI 5's PRRTE. The emulation uses only control variables the
library lists (MPICH 3.4 has MPIR_CVAR_NOLOCAL but no MPIR_CVAR_CH4_NETMOD), and
a campaign row's own settings must be among them: a CVAR or MCA parameter the
library does not know would be ignored without a word, so such a launch is
refused (`unsupported`) with the reason instead of measuring the defaults.

The launch always ends in one complete raw file, written atomically: a
"launch" record (what ran, how, and whether it succeeded) followed, on
success, by the kernel's own run / point / end records. A failed, killed or
incomplete launch keeps only its launch record: partial output is never merged.
A launch that cannot run at all (its library's environment or build failed, or
the kernel or placement is unsupported there) is recorded the same way, with
that status and why.
"""

from __future__ import annotations

import collections
import contextlib
import difflib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from . import netem, vnodes
from .libraries import in_environment, read_controls

RAW_SCHEMA = 1
STDERR_TAIL_CHARS = 4000
KILL_GRACE_S = 3.0   # how long mpiexec may take to end its ranks before they are killed

# Statuses of a launch that never ran, with what decided it.
NOT_RUN = ("env_failed", "build_failed", "unsupported")
# Control variables a campaign row may set, by the prefix each family reads them under.
CONTROL_PREFIX = {"mpich": "MPIR_CVAR_", "openmpi": "OMPI_MCA_"}


class Unsupported(Exception):
    """This library cannot do the launch as asked; the message says why."""


def describe(library: dict) -> str:
    """"MPICH 3.4.3" or "Open MPI 4.1.8", for messages."""
    family = {"mpich": "MPICH", "openmpi": "Open MPI"}.get(library.get("family"), str(library.get("family")))
    return f"{family} {library.get('version', '')}".strip()


def emulated_network_env(library: dict) -> dict[str, str]:
    """What makes ranks on one host take this library's network path (TCP over loopback), built
    from the control variables the library has; Unsupported where it has no way to."""
    family, controls = library["family"], read_controls(library)

    def require(name: str, why: str) -> None:
        if controls is not None and name not in controls:
            raise Unsupported(f"{describe(library)} has no {name} ({why}), so ranks on one host cannot be made "
                              f"to use its network path; run this placement on real nodes")

    if family == "openmpi":
        require("OMPI_MCA_btl_tcp_if_include", "the TCP BTL")
        return {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,tcp", "OMPI_MCA_btl_tcp_if_include": "lo"}
    require("MPIR_CVAR_NOLOCAL", "treating every rank as remote")
    env = {"MPIR_CVAR_NOLOCAL": "1"}
    device = library.get("device", "")
    if device.startswith("ch3"):          # ch3's netmods (nemesis tcp, sock) are TCP already
        return env
    if device and "ofi" not in device:
        if "ucx" in device:               # Debian's MPICH: UCX's tcp transport on loopback between ranks
            return {**env, "UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "lo"}
        raise Unsupported(f"{describe(library)} uses device {device}; the one-host emulation knows ch4:ofi, "
                          f"ch4:ucx and ch3, not this device")
    env.update({"FI_PROVIDER": "tcp", "FI_TCP_IFACE": "lo"})
    # MPICH 4.0 added the netmod switch; 3.4's builds with several netmods take ofi, the first.
    if controls is None or "MPIR_CVAR_CH4_NETMOD" in controls:
        env["MPIR_CVAR_CH4_NETMOD"] = "ofi"
    return env


def unknown_controls(library: dict, settings: dict[str, str]) -> list[str]:
    """Settings of a campaign row that look like this library's control variables but are not
    among those it lists, each with the closest names it does know."""
    controls, prefix = read_controls(library), CONTROL_PREFIX.get(library["family"])
    if controls is None or prefix is None:
        return []
    problems = []
    for name in sorted(settings):
        if name.startswith(prefix) and name not in controls:
            close = difflib.get_close_matches(name, sorted(controls), n=2, cutoff=0.75)
            problems.append(name + (f" (similar: {', '.join(close)})" if close else ""))
    return problems


@dataclass
class Placement:
    name: str
    nodes: int
    ppn: int
    network: dict | None = None   # {"rate": "1gbit", "mtu": 1500}: an emulated interconnect
    hosts: int = 1                # hosts the launch may use: 1 here, the allocation's under Slurm
    emulate: str | None = None    # namespaces | loopback; None: namespaces where they can be made
    switch: dict | None = None    # {"rate": "1gbit"}: the virtual nodes' shared switch

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


def emulation_of(placement: Placement) -> str:
    """How the placement's nodes are emulated on this host: "" where they are not (one node, or
    enough real hosts), else its `emulate:`, by default namespaces where this host can make
    virtual nodes and loopback where it cannot. Unsupported where virtual nodes are needed (asked
    for, or a switch) and cannot be made."""
    if not placement.emulated:
        return ""
    if placement.emulate == "loopback":
        return "loopback"
    reason = vnodes.unavailable_reason()
    if reason is None:
        return "namespaces"
    if placement.emulate == "namespaces" or placement.switch:
        wanted = "emulate: namespaces" if placement.emulate == "namespaces" else "a switch:"
        raise Unsupported(f"placement {placement.name} has {wanted}, which needs virtual nodes: {reason}")
    return "loopback"


@dataclass
class LaunchPlan:
    """The exact command and environment of one launch, recorded with its result."""

    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    binding: str = "core"


def plan_launch(library: dict, placement: Placement, binary: str, kernel_args: list[str],
                output: str, library_env: dict[str, str] | None = None,
                cores: int | None = None, cluster: vnodes.VirtualCluster | None = None) -> LaunchPlan:
    """mpiexec command line and environment for this library (its library.json record: family,
    launcher, control variables) and placement on the local host, or on the virtual nodes of
    `cluster` (then run on its first node). Raises Unsupported when the library cannot emulate
    the placement or does not know a setting of the campaign row."""
    family = library["family"]
    cores = cores or os.cpu_count() or 1
    nprocs = placement.nprocs
    oversubscribed = nprocs > cores
    binding = "none" if oversubscribed else "core"
    unknown = unknown_controls(library, library_env or {})
    if unknown:
        source = "mpivars" if family == "mpich" else "ompi_info --all"
        raise Unsupported(f"{describe(library)} does not know {'; '.join(unknown)} (its control variables, as "
                          f"{source} lists them); the setting would be ignored and the row measure the defaults")
    env: dict[str, str] = {}
    if placement.emulated and cluster is None:
        env.update(emulated_network_env(library))
    launcher = ["mpiexec", "-n", str(nprocs)]
    if cluster is not None:
        launcher += cluster.launcher_options(library.get("launcher") or ("hydra" if family == "mpich" else "prrte"),
                                             placement.ppn)
    if family == "openmpi":
        if os.geteuid() == 0:
            # Open MPI refuses root unless both are set (ORTE and PRRTE alike); containers and CI run as root.
            env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
        launcher += ["--bind-to", binding]
        if oversubscribed:
            # ORTE (Open MPI 4) has a switch; PRRTE (5.x) takes it as a mapping modifier.
            prrte = library.get("launcher", "prrte") == "prrte"
            launcher += ["--map-by", ":OVERSUBSCRIBE"] if prrte else ["--oversubscribe"]
    else:
        launcher += ["-bind-to", binding]
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
                log.write(line)
                log.flush()
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


def run_launch(*, installation: dict, build: dict, kernel: str, kernel_args: list[str], placement: Placement,
               library: str, launch: int, output, timeout_s: float,
               library_env: dict[str, str] | None = None, log=None, scratch=None,
               settings: dict | None = None) -> dict:
    """Runs one launch and writes `output`; returns its launch record. Never raises for a failed run.

    `installation` and `build` are the library's library.json and build.json records. A launch
    they rule out (a failed environment or build, a kernel the build left out) is recorded with
    that status and reason, without starting anything. The launch gets a private directory under
    `scratch` for any files it makes (io kernels); it is removed when the launch ends, however it
    ends. `settings` (the campaign's view of the launch) is kept in the launch record, so that a
    later campaign can tell whether rerunning it would replace these results with differently
    configured ones."""
    meta = {"library": library, "mpi": installation.get("name"), "family": installation.get("family"),
            "library_version": installation.get("version"), "launcher": installation.get("launcher"),
            "placement": placement.name, "nodes": placement.nodes, "ppn": placement.ppn,
            "nprocs": placement.nprocs, "kernel": kernel, "launch": launch}
    if settings is not None:
        meta["settings"] = settings
    not_run = _not_runnable(installation, build, kernel_args[0])
    if not_run:
        return record_not_run(Path(output), meta, *not_run)
    Path(scratch or tempfile.gettempdir()).mkdir(parents=True, exist_ok=True)
    private = tempfile.mkdtemp(prefix=f"commbench-{library}-{placement.name}-{kernel}-{launch}-",
                               dir=scratch or None)
    try:
        with contextlib.ExitStack() as cleanup:   # removes the launch's virtual nodes, if it has them
            return _run_launch(installation, build["binary"], [*kernel_args, "--scratch", private], placement,
                               meta, output, timeout_s, library_env, log, cleanup)
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _not_runnable(installation: dict, build: dict, kernel: str) -> tuple[str, str] | None:
    """(status, reason) when this library cannot run the kernel at all, else None."""
    if installation.get("status", "ok") != "ok":
        return installation["status"], installation.get("reason", "")
    if build.get("status", "ok") != "ok":
        return build["status"], build.get("reason", "")
    if kernel in build.get("unsupported", {}):
        return "unsupported", build["unsupported"][kernel]
    return None


def record_not_run(output: Path, meta: dict, status: str, reason: str) -> dict:
    """The raw file of a launch that was never started: its launch record alone, saying why (failed:
    its virtual nodes could not be made)."""
    assert status in (*NOT_RUN, "failed"), status
    output.parent.mkdir(parents=True, exist_ok=True)
    record = {"record": "launch", "schema": RAW_SCHEMA, "status": status, **meta, "reason": reason,
              "started": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    write_raw_file(output, record, [], output.with_name(output.name + ".partial"))
    return record


def _run_launch(installation, binary, kernel_args, placement, meta, output, timeout_s, library_env, log,
                cleanup: contextlib.ExitStack) -> dict:
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(output.name + ".partial")
    partial.unlink(missing_ok=True)
    allocation = slurm_allocation(os.environ)
    placement = replace(placement, hosts=allocated_hosts({**os.environ, **allocation}))
    meta = {**meta, "transport": placement.transport, "emulated": placement.emulated, "network": placement.network,
            "switch": placement.switch}
    cluster = None
    try:
        meta["emulation"] = emulation_of(placement)
        if meta["emulation"] == "namespaces":
            cluster = cleanup.enter_context(vnodes.virtual_cluster(placement.nodes, placement.network, placement.switch))
        plan = plan_launch(installation, placement, str(Path(binary).resolve()), kernel_args,
                           str(partial.resolve()), library_env, cluster=cluster)
    except Unsupported as refusal:
        return record_not_run(output, meta, "unsupported", str(refusal))
    except vnodes.VirtualNodesError as error:
        return record_not_run(output, meta, "failed", f"its virtual nodes could not be made: {error}")
    env = {**os.environ, **allocation, **plan.env}
    argv = in_environment(installation["env_dir"], shlex.join(plan.command))
    if (placement.network or placement.switch) and not placement.emulated:
        # The emulated link is a network namespace on one host; real hosts have their own links.
        argv = ["sh", "-c", f"echo 'placement {placement.name}: an emulated network (network:, switch:) runs on "
                f"one host only; this allocation has {placement.hosts} hosts' >&2; exit 2"]
    elif cluster is not None:
        # mpiexec starts on the first node, as on a cluster's first host; the links carry `network`.
        argv = cluster.command_on(cluster.hostnames[0], argv)
    elif placement.network:
        argv = netem.wrap(shlex.join(argv), placement.network)
    started = datetime.now(timezone.utc)
    t0 = time.monotonic()
    process = subprocess.Popen(_supervised(argv, KILL_GRACE_S), env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               errors="replace", start_new_session=True)
    streamed = ConsoleStream(process.stdout, log)
    try:
        process.wait(timeout=timeout_s)
        status = "ok" if process.returncode == 0 else "failed"
    except subprocess.TimeoutExpired:
        _kill_tree(process, KILL_GRACE_S)
        status = "timeout"
    except BaseException:
        # Interrupted (Ctrl-C, the workflow stopping us): the launch must not outlive us.
        _kill_tree(process, KILL_GRACE_S)
        raise
    duration = time.monotonic() - t0
    console = streamed.tail()
    lines, problem = read_complete_output(partial)
    if status == "ok" and problem:
        status = "failed"
    record = {
        "record": "launch", "schema": RAW_SCHEMA, "status": status, **meta,
        "command": plan.command, "env": plan.env, "binding": plan.binding,
        "exit_code": process.returncode, "started": started.isoformat(timespec="seconds"),
        "duration_s": round(duration, 3), "timeout_s": timeout_s,
    }
    if status != "ok":
        record["reason"] = problem if status == "failed" and process.returncode == 0 else (
            f"killed after the {timeout_s:g} s timeout" if status == "timeout"
            else f"exit code {process.returncode}")
        if placement.network and cluster is None and (reason := netem.unavailable_reason()):
            record["reason"] += f"; {reason}"
        record["console_tail"] = console[-STDERR_TAIL_CHARS:]
    write_raw_file(output, record, lines if status == "ok" else [], partial)
    return record
