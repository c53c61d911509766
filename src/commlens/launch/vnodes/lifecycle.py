"""Making and removing clusters of virtual nodes.

Each link (the node's veth pair into the bridge) may carry a rate, an MTU, and a delay and loss (the
campaign's `network:` block), made by commlens.launch.netem's shaper. With netem (where the kernel
has it), both directions of a link share one netem queue (an ifb device in the node that all of eth0's
traffic passes). Without it, the node's eth0 is a TAP device held by a wire process
(commlens.launch.wire) that serialises each direction at the rate; the veth into the bridge is the
wire's `uplink`, in a namespace of its own (`<node's>-link`) where no stack has an address: in the
node's, the node's own stack would take what arrives on it for the node's address (Linux's weak host
model), past the wire. A `switch:` rate shapes all traffic that enters the bridge together (every
node's uplink passes one ifb device), so that pairs of nodes contend for it. A `topology:` puts the
nodes' links on leaf switches (bridges of their own), each joined to the cluster's bridge, the spine,
through a veth pair whose ends each send at the leaf uplink's rate (the switch's shaper).

The run directory's `owner` file says which process made a cluster. `virtual_cluster()`
removes everything however its block ends (exception, SIGTERM, SIGHUP); a cluster whose owner
was killed outright is removed by the next `sweep()`, which every new cluster runs first.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

from commlens.launch import netem, wire
from commlens.launch.supervision import kill_all
from commlens.launch.vnodes.cluster import (CLUSTER_NAME, RUN_ROOT, VirtualCluster, VirtualNodesError, run_command,
                                             cgroup_v1_hierarchy, cpuset_root, plan)
from commlens.launch.vnodes.node_exec import node_exec_script, processes_on

COMMANDS = ("ip", "nsenter", "unshare", "mount")
KILL_WAIT_S = 5.0
LINK_SHAPER = "shaper"         # in each node: the ifb whose queueing discipline is the node's link
UPLINK = "uplink"              # with a wire: the veth into the bridge, in the link's namespace
LINK_NETNS = "-link"           # the link's namespace: the node's, with this added
STAGING_PREFIX = ".new-"       # a run directory being made; one older than STAGING_STALE_S was abandoned
STAGING_STALE_S = 60.0


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


def existing_clusters() -> set[str]:
    """Names of the clusters that have anything left on this host: a run directory, a namespace,
    a link in this network namespace or a cgroup."""
    found: set[str] = set()
    if RUN_ROOT.is_dir():
        found.update(entry.name for entry in RUN_ROOT.iterdir())
    found.update(line.split()[0] for line in run_command(["ip", "netns", "list"], check=False).stdout.splitlines()
                 if line.strip())
    found.update(line.split(":")[1].strip().split("@")[0] for line in
                 run_command(["ip", "-o", "link", "show"], check=False).stdout.splitlines() if line.count(":") >= 2)
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
        cluster.temporary_directory(node).mkdir(parents=True)
    try:
        _make_cpusets(cluster)
    except OSError as error:
        raise VirtualNodesError(f"the nodes' cpusets under {cluster.cpuset_root} could not be made: {error}") from None
    _make_network(cluster)
    cluster.exec_script.write_text(node_exec_script(cluster))
    cluster.exec_script.chmod(0o755)


def _make_cpusets(cluster: VirtualCluster) -> None:
    root = cluster.cpuset_root
    assert root is not None     # create() refused a host without cpusets (unavailable_reason)
    parent = root / cluster.name
    parent.mkdir()
    v1 = not (root / "cgroup.controllers").exists()
    mems = (root / "cpuset.mems").read_text().strip() if v1 else ""
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


def _cpu_list(cpus) -> str:
    return ",".join(map(str, sorted(set(cpus))))


def _make_network(cluster: VirtualCluster) -> None:
    mtu = str((cluster.network or {}).get("mtu", 1500))
    shaper = netem.shaper("namespaces", cluster.faults) if cluster.network else None
    queueing = shaper in netem.QUEUEING_SHAPERS
    switch_qdisc = netem.switch_arguments(cluster.switch, int(mtu)) if cluster.switch else None
    _add_bridge(cluster.bridge, mtu)
    if cluster.host_address:
        run_command(["ip", "addr", "add", f"{cluster.host_address}/24", "dev", cluster.bridge])
    if switch_qdisc is not None:     # the cluster has a switch
        run_command(["ip", "link", "add", cluster.switch_device, "type", "ifb"])
        run_command(["ip", "link", "set", cluster.switch_device, "mtu", mtu, "up"])
        run_command(["tc", "qdisc", "add", "dev", cluster.switch_device, "root", *switch_qdisc])
    for leaf in range(cluster.leaves):
        _add_leaf(cluster, leaf, mtu)
    for index, node in enumerate(cluster.nodes):
        netns, link = cluster.netns(node), cluster.host_link(index)
        network = cluster.link_of(index)    # None where the cluster has no network, and then no shaper
        run_command(["ip", "netns", "add", netns])
        if shaper == "wire":
            run_command(["ip", "netns", "add", netns + LINK_NETNS])
            run_command(["ip", "link", "add", link, "type", "veth", "peer", "name", UPLINK, "netns",
                         netns + LINK_NETNS])
            run_command(["ip", "-n", netns + LINK_NETNS, "link", "set", UPLINK, "mtu", mtu, "up"])
            _start_wire(cluster, node, index)    # makes eth0 in the link's namespace, then moved to the node
            run_command(["ip", "-n", netns + LINK_NETNS, "link", "set", "eth0", "netns", netns])
        else:
            run_command(["ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", netns])
        run_command(["ip", "link", "set", link, "master", cluster.bridge_of(index), "mtu", mtu, "up"])
        run_command(["ip", "-n", netns, "link", "set", "lo", "up"])
        run_command(["ip", "-n", netns, "link", "set", "eth0", "mtu", mtu, "up"])
        if shaper == "wire" and network is not None:   # its bursts no longer than the wire may pass whole
            segments = wire.burst_segments(netem.rate_bits_per_s(network["rate"]), int(mtu))
            run_command(["ip", "-n", netns, "link", "set", "eth0", "gso_max_segs", str(segments)])
        run_command(["ip", "-n", netns, "addr", "add", f"{node.address}/24", "dev", "eth0"])
        link_qdisc = (netem.link_arguments(network, shaper)
                      if queueing and network is not None and shaper is not None else None)
        if link_qdisc:   # the link's one shaper, in the node, for what it sends and receives
            run_command(["ip", "-n", netns, "link", "add", LINK_SHAPER, "type", "ifb"])
            run_command(["ip", "-n", netns, "link", "set", LINK_SHAPER, "mtu", mtu, "up"])
            run_command(["tc", "-n", netns, "qdisc", "add", "dev", LINK_SHAPER, "root", *link_qdisc])
            _shape_through("eth0", ("egress", "ingress"), LINK_SHAPER, netns)
        if switch_qdisc:    # what the node sends enters the switch's one shaper
            _shape_through(link, ("ingress",), cluster.switch_device)


def _add_bridge(name: str, mtu: str) -> None:
    # Bridged frames skip the host's packet filter: a FORWARD policy of DROP (Docker's) would
    # otherwise drop traffic between nodes.
    run_command(["ip", "link", "add", name, "type", "bridge", "nf_call_iptables", "0", "nf_call_ip6tables", "0",
          "nf_call_arptables", "0"])
    run_command(["ip", "link", "set", name, "mtu", mtu, "up"])


def _add_leaf(cluster: VirtualCluster, leaf: int, mtu: str) -> None:
    """A leaf switch (a bridge of its own) and its uplink to the spine (the cluster's bridge): a veth pair
    whose two ends each send at the uplink's rate, the leaf's traffic out and the spine's in."""
    topology = cluster.topology
    assert topology is not None     # leaves come with a topology
    _add_bridge(cluster.leaf_bridge(leaf), mtu)
    on_leaf, on_spine = cluster.uplink_ends(leaf)
    run_command(["ip", "link", "add", on_leaf, "type", "veth", "peer", "name", on_spine])
    for end, bridge in ((on_leaf, cluster.leaf_bridge(leaf)), (on_spine, cluster.bridge)):
        run_command(["ip", "link", "set", end, "master", bridge, "mtu", mtu, "up"])
        run_command(["tc", "qdisc", "add", "dev", end, "root", *netem.switch_arguments(topology["uplink"], int(mtu))])


def _start_wire(cluster: VirtualCluster, node, index: int) -> None:
    """The node's link process: its eth0 (a TAP device) to its uplink, at the network's rate, delay and loss,
    on the node's CPUs (as a network card's interrupts are handled on its host's; left free to move, it
    changed cores during a sweep and each core's wake-up cost differed: 9 us steps between sizes)."""
    network = cluster.link_of(index)
    assert network is not None      # a wire process is started only for a network
    try:
        process = wire.start(cluster.netns(node) + LINK_NETNS, "eth0", UPLINK,
                             cluster.directory / f"{node.hostname}.wire.log", *_carriage(network), seed=index + 1,
                             paths=[(address, *_carriage(path)) for address, path in cluster.paths_of(index)])
        os.sched_setaffinity(process.pid, node.cpus)
        cluster.link_priority[node.hostname] = _raise_priority(process.pid)
    except wire.WireError as error:
        raise VirtualNodesError(str(error)) from None


def _raise_priority(pid: int) -> str:
    """Gives link process `pid` its real-time priority; returns wire.REALTIME, or "normal: " and why not.

    Where the kernel budgets real-time time per cgroup, a cgroup v1 cpu group made by a job runner or a
    container has none by default (cpu.rt_runtime_us 0) and refuses the priority. The process then leaves
    that group for the cpu hierarchy's root, as the nodes' cpusets are made at their hierarchy's root: it
    lives only as long as its cluster, and is still counted in every other hierarchy where it was."""
    try:
        os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(wire.PRIORITY))
        return wire.REALTIME
    except PermissionError as refused:
        why = refused.strerror
    group = _cpu_group(pid)
    if group is None:
        return f"normal: the kernel refused a real-time priority ({why})"
    root, path = group
    budget = root / path.lstrip("/") / "cpu.rt_runtime_us"
    if not budget.exists() or budget.read_text().strip() != "0":
        return f"normal: the kernel refused a real-time priority ({why})"
    try:
        (root / "cgroup.procs").write_text(str(pid))
        os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(wire.PRIORITY))
        return wire.REALTIME
    except OSError as error:
        return (f"normal: its cpu cgroup {path} has no real-time budget (cpu.rt_runtime_us 0), and moving it to "
                f"{root} failed ({error.strerror})")


def _cpu_group(pid: int) -> tuple[Path, str] | None:
    """(the cgroup v1 cpu hierarchy's mount, `pid`'s group in it) where `pid` is in a group below its root."""
    root = cgroup_v1_hierarchy("cpu")
    if root is None:
        return None
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(",") and path != "/":
            return root, path
    return None


def _carriage(network: dict) -> tuple[float, float, float]:
    """(rate in bit/s, delay in s, loss in percent) of a link or path, as a wire process takes them."""
    return (netem.rate_bits_per_s(network["rate"]),
            netem.delay_seconds(network["delay"]) if network.get("delay") else 0.0, float(network.get("loss") or 0))


def _shape_through(device: str, hooks: tuple[str, ...], shaper: str, netns: str | None = None) -> None:
    """Every packet that passes `device` at `hooks` (egress, ingress) first waits in the queue of
    `shaper` (an ifb device, whose queueing discipline paces it), then goes on its way."""
    tc = ["tc", "-n", netns] if netns else ["tc"]
    run_command([*tc, "qdisc", "add", "dev", device, "clsact"])
    for hook in hooks:
        run_command([*tc, "filter", "add", "dev", device, hook, "protocol", "all", "u32", "match", "u32", "0", "0",
              "action", "mirred", "egress", "redirect", "dev", shaper])


def destroy(name: str) -> None:
    """Removes everything of the cluster `name` that is left, ending any process still on its nodes
    first (a namespace lives as long as a process in it). Never raises for what is already gone."""
    deadline = time.monotonic() + KILL_WAIT_S
    while (pids := processes_on(name)) and time.monotonic() < deadline:
        kill_all(pids)
        time.sleep(0.05)
    for line in run_command(["ip", "netns", "list"], check=False).stdout.splitlines():
        if line.strip() and line.split()[0].startswith(name + "-"):
            run_command(["ip", "netns", "delete", line.split()[0]], check=False)
    for line in run_command(["ip", "-o", "link", "show"], check=False).stdout.splitlines():
        link = line.split(":")[1].strip().split("@")[0] if line.count(":") >= 2 else ""
        if link.startswith(name):
            run_command(["ip", "link", "delete", link], check=False)
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
