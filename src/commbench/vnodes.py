"""Virtual nodes: several hosts on one machine, each a network namespace with its own hostname,
address and CPUs, all plugged into a Linux bridge that plays the switch.

A virtual node is what a process started by its `node-exec` script sees: the node's network
namespace (an `eth0` on the private subnet, loopback), a UTS namespace with the node's hostname,
an IPC namespace and a mount namespace with a private /dev/shm, an /etc/hosts that names every
node, and a boot id of its own, and a cpuset cgroup holding the node's CPUs. The boot id and the
IPC namespace are how communication libraries tell hosts apart (UCX compares them before it
uses shared memory or cross-memory attach between processes), the hostname is how MPI tells
nodes apart, and the cpuset is what the launchers bind ranks within: with those, every library
takes its own path between nodes, as it would between real hosts.

`node-exec` takes its arguments as ssh does ([options] HOST COMMAND...), so it is the remote
shell of the MPI launchers (MPICH's Hydra `-launcher-exec`, Open MPI's `plm_ssh_agent`) and of
anything else that starts work on a host.

Each link (the node's veth pair) may carry a token-bucket rate and an MTU (the campaign's
`network:` block). Both directions of a link share one bucket (an ifb device in the node that
all of eth0's traffic passes), as they share the loopback's in the loopback emulation: a bucket
per direction would bank the idle reverse leg of a ping-pong and carry each small message at
twice the rate, and a bucket small enough not to bank (a packet, as a wire) cannot keep 1 Gbit/s
here (86 MB/s of 119.5 with two packets). A `switch:` rate shapes all traffic that enters the
bridge together (every node's uplink passes one ifb device), so that pairs of nodes contend for
it.

Every resource is named after the cluster (PREFIX and six hex digits): namespaces, links,
cgroups and the run directory under RUN_ROOT, whose `owner` file says which process made it.
`virtual_cluster()` removes them however its block ends (exception, SIGTERM, SIGHUP); a cluster
whose owner was killed outright is removed by the next `sweep()`, which every new cluster runs
first.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from . import netem

PREFIX = "cbvn"
RUN_ROOT = Path("/run/commbench-vnodes")
SUBNETS = "10.213"             # clusters take a /24 of 10.213.0.0/16
CLUSTER_NAME = re.compile(rf"^({PREFIX}[0-9a-f]{{6}})")
MAX_NODES = 250                # addresses .1 to .250; .254 is the host's on the bridge
COMMANDS = ("ip", "nsenter", "unshare", "mount")
KILL_WAIT_S = 5.0
LINK_SHAPER = "shaper"         # in each node: the ifb whose token bucket is the node's link
STAGING_PREFIX = ".new-"       # a run directory being made; one older than STAGING_STALE_S was abandoned
STAGING_STALE_S = 60.0


class VirtualNodesError(RuntimeError):
    """Virtual nodes cannot be made here, or a step of making them failed; the message says which."""


@dataclass(frozen=True)
class VirtualNode:
    hostname: str
    address: str
    cpus: tuple[int, ...]


@dataclass
class VirtualCluster:
    """Nodes behind one bridge. Names are derived from `name`, so that a sweep finds them all."""

    name: str
    nodes: list[VirtualNode]
    network: dict | None = None    # {"rate": "1gbit", "mtu": 1500} on every link
    switch: dict | None = None     # {"rate": "1gbit"}: all traffic through the bridge together
    host_address: str | None = None  # this host's address on the bridge, when it talks to the nodes
    cpuset_root: Path | None = field(default=None, repr=False)

    @property
    def directory(self) -> Path:
        return RUN_ROOT / self.name

    @property
    def exec_script(self) -> Path:
        """ssh-like: `node-exec [ssh options] HOST COMMAND...` runs COMMAND on the virtual node HOST."""
        return self.directory / "node-exec"

    @property
    def hostnames(self) -> list[str]:
        return [node.hostname for node in self.nodes]

    @property
    def bridge(self) -> str:
        return f"{self.name}br"

    @property
    def switch_device(self) -> str:
        return f"{self.name}sw"

    def netns(self, node: VirtualNode) -> str:
        return f"{self.name}-{node.hostname}"

    def host_link(self, index: int) -> str:
        """The bridge's end of node `index`'s veth pair (15 characters at most, as Linux wants)."""
        return f"{self.name}h{index}"

    def cgroup(self, node: VirtualNode) -> Path:
        return self.cpuset_root / self.name / node.hostname

    def command_on(self, hostname: str, argv: list[str]) -> list[str]:
        """argv that runs `argv` on the node `hostname`."""
        return [str(self.exec_script), hostname, shlex.join(argv)]

    def launcher_options(self, launcher: str, ppn: int) -> list[str]:
        """mpiexec options that put `ppn` ranks on each node (the host list, in node order) and
        start them there through the launcher's own remote shell: Hydra's launcher exec, ORTE's
        plm_rsh_agent, PRRTE's plm_ssh_agent. Nodes own different CPUs, so Open MPI is told that
        they differ (hetero_nodes): it then maps each node by its own CPUs, not the first one's."""
        hosts = ",".join(f"{name}:{ppn}" for name in self.hostnames)
        script = str(self.exec_script)
        if launcher == "hydra":
            return ["-launcher", "ssh", "-launcher-exec", script, "-hosts", hosts]
        if launcher == "orte":
            return ["--mca", "plm_rsh_agent", script, "--mca", "orte_hetero_nodes", "1", "--host", hosts]
        return ["--prtemca", "plm_ssh_agent", script, "--prtemca", "prte_hetero_nodes", "1", "--host", hosts]


# -- where the nodes' CPUs come from ------------------------------------------------------------

def cpuset_root() -> Path | None:
    """The cgroup directory where cpusets can be made: cgroup v1's cpuset hierarchy, or a cgroup v2
    root that offers the cpuset controller to its children; None where there is neither."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    for line in mounts:
        _, point, kind, options = line.split()[:4]
        if kind == "cgroup" and "cpuset" in options.split(","):
            return Path(point)
    for line in mounts:
        _, point, kind = line.split()[:3]
        if kind == "cgroup2":
            root = Path(point)
            try:
                if "cpuset" in (root / "cgroup.subtree_control").read_text().split():
                    return root
            except OSError:
                continue
    return None


def split_cpus(nodes: int, cpus: list[int] | None = None) -> list[tuple[int, ...]]:
    """Each node's CPUs: this process's CPUs in equal blocks, one node a block; with more nodes
    than CPUs, nodes share them round robin (the host is oversubscribed, as it would be anyway)."""
    cpus = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
    per_node = max(1, len(cpus) // nodes)
    if nodes > len(cpus):
        return [(cpus[i % len(cpus)],) for i in range(nodes)]
    return [tuple(cpus[i * per_node:(i + 1) * per_node]) for i in range(nodes)]


def _cpu_list(cpus) -> str:
    return ",".join(map(str, sorted(set(cpus))))


# -- owners and the sweep -------------------------------------------------------------------------

def _start_time(pid: int) -> str | None:
    """A process's start time in clock ticks since boot: with its pid, it names one process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def owner_of(name: str) -> int | None:
    """The pid of the process that made the cluster `name` while that process lives, else None."""
    try:
        owner = json.loads((RUN_ROOT / name / "owner").read_text())
    except (OSError, ValueError):
        return None
    return owner["pid"] if _start_time(owner["pid"]) == owner["start"] else None


def _run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise VirtualNodesError(f"`{shlex.join(argv)}` failed ({done.returncode}): {done.stderr.strip()}")
    return done


def existing_clusters() -> set[str]:
    """Names of the clusters that have anything left on this host: a run directory, a namespace,
    a link in this network namespace or a cgroup."""
    found = set()
    if RUN_ROOT.is_dir():
        found.update(entry.name for entry in RUN_ROOT.iterdir())
    found.update(line.split()[0] for line in _run(["ip", "netns", "list"], check=False).stdout.splitlines()
                 if line.strip())
    found.update(line.split(":")[1].strip().split("@")[0] for line in
                 _run(["ip", "-o", "link", "show"], check=False).stdout.splitlines() if line.count(":") >= 2)
    root = cpuset_root()
    if root is not None and root.is_dir():
        found.update(entry.name for entry in root.iterdir() if entry.is_dir())
    return {match.group(1) for name in found if (match := CLUSTER_NAME.match(name))}


def sweep() -> list[str]:
    """Removes every cluster whose owning process is gone (a launch killed with SIGKILL leaves its
    cluster behind); returns their names. Clusters of running processes are left alone."""
    stale = sorted(name for name in existing_clusters() if owner_of(name) is None)
    for name in stale:
        destroy(name)
    for staging in RUN_ROOT.glob(STAGING_PREFIX + "*") if RUN_ROOT.is_dir() else ():
        with contextlib.suppress(OSError):
            if time.time() - staging.stat().st_mtime > STAGING_STALE_S:
                shutil.rmtree(staging)
    return stale


# -- making and removing a cluster ----------------------------------------------------------------

def _free_subnet() -> str:
    """A 10.213.X /24 that no address of this network namespace is in (only a cluster that gives
    this host an address on its bridge needs one of its own)."""
    used = set(re.findall(rf"inet {re.escape(SUBNETS)}\.(\d+)\.", _run(["ip", "-4", "-o", "addr"]).stdout))
    for third in range(256):
        if str(third) not in used:
            return f"{SUBNETS}.{third}"
    raise VirtualNodesError(f"every /24 of {SUBNETS}.0.0/16 is in use on this host")


def plan(nodes: int, network: dict | None = None, switch: dict | None = None,
         cpus: list[tuple[int, ...]] | None = None, host_address: bool = False,
         hostname: str = "vnode{}") -> VirtualCluster:
    """A cluster's names, addresses and CPUs; nothing is made yet."""
    if not 1 <= nodes <= MAX_NODES:
        raise VirtualNodesError(f"{nodes} virtual nodes: between 1 and {MAX_NODES} can be made")
    if cpus is not None and len(cpus) != nodes:
        raise VirtualNodesError(f"CPUs for {len(cpus)} nodes given for {nodes} nodes")
    subnet = _free_subnet() if host_address else f"{SUBNETS}.0"
    cpus = cpus or split_cpus(nodes)
    return VirtualCluster(
        name=PREFIX + secrets.token_hex(3),
        nodes=[VirtualNode(hostname.format(i), f"{subnet}.{i + 1}", tuple(cpus[i])) for i in range(nodes)],
        network=network, switch=switch, host_address=f"{subnet}.254" if host_address else None,
        cpuset_root=cpuset_root())


def create(cluster: VirtualCluster) -> None:
    """Makes everything the cluster names. Its owner (this process) is recorded first, so that a
    sweep never takes a cluster being made for a stale one; on failure, what was made stays for
    destroy() (virtual_cluster() calls it)."""
    reason = unavailable_reason(probe=False)
    if reason:
        raise VirtualNodesError(reason)
    # The directory appears with its owner in it (made aside, then renamed): a sweep never sees it ownerless.
    RUN_ROOT.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=RUN_ROOT))
    (staging / "owner").write_text(json.dumps({"pid": os.getpid(), "start": _start_time(os.getpid())}))
    staging.rename(cluster.directory)
    hosts = ["127.0.0.1 localhost"] + [f"{node.address} {node.hostname}" for node in cluster.nodes]
    if cluster.host_address:   # the nodes reach the host that made them by its name
        hosts.append(f"{cluster.host_address} {socket.gethostname()}")
    (cluster.directory / "hosts").write_text("\n".join(hosts) + "\n")
    for node in cluster.nodes:
        (cluster.directory / f"{node.hostname}.boot_id").write_text(f"{uuid.uuid4()}\n")
    try:
        _make_cpusets(cluster)
    except OSError as error:
        raise VirtualNodesError(f"the nodes' cpusets under {cluster.cpuset_root} could not be made: {error}") from None
    _make_network(cluster)
    cluster.exec_script.write_text(node_exec_script(cluster))
    cluster.exec_script.chmod(0o755)


def _make_cpusets(cluster: VirtualCluster) -> None:
    parent = cluster.cpuset_root / cluster.name
    parent.mkdir()
    v1 = not (cluster.cpuset_root / "cgroup.controllers").exists()
    mems = (cluster.cpuset_root / "cpuset.mems").read_text().strip() if v1 else ""
    if v1:   # a v1 cpuset takes no task until its CPUs and memory nodes are set, the parent's first
        (parent / "cpuset.cpus").write_text(_cpu_list(c for node in cluster.nodes for c in node.cpus))
        (parent / "cpuset.mems").write_text(mems)
    else:
        (parent / "cgroup.subtree_control").write_text("+cpuset")
    for node in cluster.nodes:
        cgroup = cluster.cgroup(node)
        cgroup.mkdir()
        (cgroup / "cpuset.cpus").write_text(_cpu_list(node.cpus))
        if v1:
            (cgroup / "cpuset.mems").write_text(mems)


def _make_network(cluster: VirtualCluster) -> None:
    mtu = str((cluster.network or {}).get("mtu", 1500))
    # Bridged frames skip the host's packet filter: a FORWARD policy of DROP (Docker's) would
    # otherwise drop traffic between nodes.
    _run(["ip", "link", "add", cluster.bridge, "type", "bridge", "nf_call_iptables", "0",
          "nf_call_ip6tables", "0", "nf_call_arptables", "0"])
    _run(["ip", "link", "set", cluster.bridge, "mtu", mtu, "up"])
    if cluster.host_address:
        _run(["ip", "addr", "add", f"{cluster.host_address}/24", "dev", cluster.bridge])
    if cluster.switch:
        _run(["ip", "link", "add", cluster.switch_device, "type", "ifb"])
        _run(["ip", "link", "set", cluster.switch_device, "mtu", mtu, "up"])
        _run(["tc", "qdisc", "add", "dev", cluster.switch_device, "root",
              *netem.tbf_arguments(cluster.switch["rate"], int(mtu))])
    for index, node in enumerate(cluster.nodes):
        netns, link = cluster.netns(node), cluster.host_link(index)
        _run(["ip", "netns", "add", netns])
        _run(["ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", netns])
        _run(["ip", "link", "set", link, "master", cluster.bridge, "mtu", mtu, "up"])
        _run(["ip", "-n", netns, "link", "set", "lo", "up"])
        _run(["ip", "-n", netns, "link", "set", "eth0", "mtu", mtu, "up"])
        _run(["ip", "-n", netns, "addr", "add", f"{node.address}/24", "dev", "eth0"])
        if cluster.network:   # the link's one token bucket, in the node, for what it sends and receives
            _run(["ip", "-n", netns, "link", "add", LINK_SHAPER, "type", "ifb"])
            _run(["ip", "-n", netns, "link", "set", LINK_SHAPER, "mtu", mtu, "up"])
            _run(["tc", "-n", netns, "qdisc", "add", "dev", LINK_SHAPER, "root",
                  *netem.tbf_arguments(cluster.network["rate"], int(mtu))])
            _shape_through("eth0", ("egress", "ingress"), LINK_SHAPER, netns)
        if cluster.switch:    # what the node sends enters the switch's one token bucket
            _shape_through(link, ("ingress",), cluster.switch_device)


def _shape_through(device: str, hooks: tuple[str, ...], shaper: str, netns: str | None = None) -> None:
    """Every packet that passes `device` at `hooks` (egress, ingress) first waits in the queue of
    `shaper` (an ifb device, whose token bucket paces it), then goes on its way."""
    tc = ["tc", "-n", netns] if netns else ["tc"]
    _run([*tc, "qdisc", "add", "dev", device, "clsact"])
    for hook in hooks:
        _run([*tc, "filter", "add", "dev", device, hook, "protocol", "all", "u32", "match", "u32", "0", "0",
              "action", "mirred", "egress", "redirect", "dev", shaper])


def node_exec_script(cluster: VirtualCluster) -> str:
    """The cluster's remote shell, as ssh is called: [options] HOST COMMAND... The command words
    are joined by spaces and run by sh, as ssh's remote shell runs them."""
    cases = "\n".join(f"  {node.hostname}|{node.address}) node={node.hostname} ;;" for node in cluster.nodes)
    directory = shlex.quote(str(cluster.directory))
    # $0: the node; $1: the working directory to keep; $2: the command.
    inside = ("mount --bind \"$d/hosts\" /etc/hosts && "
              "mount --bind \"$d/$0.boot_id\" /proc/sys/kernel/random/boot_id && "
              "mount -t tmpfs -o mode=1777 shm /dev/shm && "
              "echo \"$0\" > /proc/sys/kernel/hostname && "
              "{ cd \"$1\" 2>/dev/null || cd /; } && exec sh -c \"$2\"")
    return f"""#!/bin/sh
# Runs a command on a virtual node of {cluster.name} (commbench.vnodes), as ssh would on a host.
while [ $# -gt 0 ]; do
  case "$1" in
    -[bcDEeFIiJLlmOopQRSWw]) shift 2 ;;   # ssh options that take a value
    -*) shift ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || {{ echo "usage: $0 [ssh options] HOST COMMAND..." >&2; exit 255; }}
host=$1; shift
case "$host" in
{cases}
  *) echo "{cluster.name}: no virtual node $host" >&2; exit 255 ;;
esac
echo $$ > {shlex.quote(str(cluster.cpuset_root / cluster.name))}/$node/cgroup.procs || exit 255
export d={directory}
exec nsenter --net=/run/netns/{cluster.name}-$node unshare --uts --ipc --mount --propagation slave -- \\
  sh -c {shlex.quote(inside)} "$node" "$PWD" "$*"
"""


def _kill_all(pids: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def processes_on(name: str) -> set[int]:
    """Processes still on the cluster's nodes: in their network namespaces or cgroups."""
    pids = set()
    for line in _run(["ip", "netns", "list"], check=False).stdout.splitlines():
        netns = line.split()[0] if line.strip() else ""
        if netns.startswith(name + "-"):
            pids.update(int(p) for p in _run(["ip", "netns", "pids", netns], check=False).stdout.split())
    root = cpuset_root()
    if root is not None and (root / name).is_dir():
        for procs in (root / name).glob("*/cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(p) for p in procs.read_text().split())
    pids.discard(os.getpid())
    return pids


def destroy(name: str) -> None:
    """Removes everything of the cluster `name` that is left, ending any process still on its nodes
    first (a namespace lives as long as a process in it). Never raises for what is already gone."""
    deadline = time.monotonic() + KILL_WAIT_S
    while (pids := processes_on(name)) and time.monotonic() < deadline:
        _kill_all(pids)
        time.sleep(0.05)
    for line in _run(["ip", "netns", "list"], check=False).stdout.splitlines():
        if line.strip() and line.split()[0].startswith(name + "-"):
            _run(["ip", "netns", "delete", line.split()[0]], check=False)
    for line in _run(["ip", "-o", "link", "show"], check=False).stdout.splitlines():
        link = line.split(":")[1].strip().split("@")[0] if line.count(":") >= 2 else ""
        if link.startswith(name):
            _run(["ip", "link", "delete", link], check=False)
    root = cpuset_root()
    if root is not None and (root / name).is_dir():
        for cgroup in (root / name).iterdir():
            if cgroup.is_dir():
                with contextlib.suppress(OSError):
                    cgroup.rmdir()
        with contextlib.suppress(OSError):
            (root / name).rmdir()
    shutil.rmtree(RUN_ROOT / name, ignore_errors=True)


def _handle(numbers, handler, only_default: bool = False) -> dict:
    """Installs `handler` for the signals `numbers` (those left at their default, with
    `only_default`) and returns the handlers it replaced. Only the main thread may do so; elsewhere
    nothing is installed."""
    replaced = {}
    if threading.current_thread() is threading.main_thread():
        for number in numbers:
            if not only_default or signal.getsignal(number) == signal.SIG_DFL:
                replaced[number] = signal.signal(number, handler)
    return replaced


def _restore(replaced: dict) -> None:
    for number, previous in replaced.items():
        signal.signal(number, previous)


def _exit(signum: int, frame=None):
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def virtual_cluster(nodes: int, network: dict | None = None, switch: dict | None = None, **options):
    """A cluster of `nodes` virtual nodes for the block, removed however the block ends. Stale
    clusters of killed owners are swept first. `options` go to plan().

    SIGTERM and SIGHUP end the block with SystemExit, as Ctrl-C ends it with KeyboardInterrupt, so
    that the clean-up runs (handlers someone else installed are kept); a signal that comes during
    the clean-up waits for its end."""
    replaced = _handle((signal.SIGTERM, signal.SIGHUP), _exit, only_default=True)
    try:
        sweep()
        cluster = plan(nodes, network, switch, **options)
        try:
            create(cluster)
            yield cluster
        finally:
            pending = []
            held = _handle((signal.SIGTERM, signal.SIGHUP, signal.SIGINT), lambda signum, frame: pending.append(signum))
            try:
                destroy(cluster.name)
            finally:
                _restore(held)
            for signum in pending[:1]:
                signal.raise_signal(signum)
    finally:
        _restore(replaced)


@functools.cache
def unavailable_reason(probe: bool = True) -> str | None:
    """None if this host can make virtual nodes, else why not (for records, messages and skips).
    With `probe`, a two-node cluster is made and removed once per process: the one sure test."""
    if os.geteuid() != 0:
        return "virtual nodes need root (network namespaces, a bridge and cgroups)"
    missing = [command for command in (*COMMANDS, "tc") if shutil.which(command) is None]
    if missing:
        return f"virtual nodes need {', '.join(missing)} (packages iproute2, util-linux, mount)"
    if cpuset_root() is None:
        return "virtual nodes need a cpuset cgroup (cgroup v1's cpuset hierarchy or cgroup v2 with cpuset enabled)"
    if not probe:
        return None
    try:
        with virtual_cluster(2, network={"rate": "1gbit", "mtu": 1500}, switch={"rate": "1gbit"}) as cluster:
            done = subprocess.run(cluster.command_on(cluster.hostnames[1], ["uname", "-n"]), capture_output=True,
                                  text=True, timeout=30)
            if done.stdout.strip() != cluster.hostnames[1]:
                return f"a virtual node could not run a command: {(done.stderr or done.stdout).strip()[:300]}"
    except (VirtualNodesError, OSError, subprocess.SubprocessError) as error:
        return f"virtual nodes cannot be made here: {str(error)[:300]}"
    return None
