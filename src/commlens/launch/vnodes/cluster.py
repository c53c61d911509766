"""A cluster of virtual nodes as a model, before anything is made: its nodes' hostnames, addresses
and CPUs, and the names of everything it will own.

Every resource is named after the cluster (PREFIX and six hex digits): namespaces, links,
cgroups and the run directory under RUN_ROOT, so that a sweep finds them all.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "clvn"
RUN_ROOT = Path("/run/commlens-vnodes")
SUBNETS = "10.213"             # clusters take a /24 of 10.213.0.0/16
CLUSTER_NAME = re.compile(rf"^({PREFIX}[0-9a-f]{{6}})")
MAX_NODES = 250                # addresses .1 to .250; .254 is the host's on the bridge


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
    # [{"node": 3, "rate": "10mbit"}, {"link": [1, 4], "delay": "1ms"}]: a node's link, or the path between
    # two nodes, other than network's
    faults: list | None = None
    # {"leaf_nodes": 4, "uplink": {"rate": "20mbit"}}: nodes on leaf switches (bridges of their own), each
    # joined to the cluster's bridge (the spine) through an uplink shaped each way at its rate
    topology: dict | None = None
    cpuset_root: Path | None = field(default=None, repr=False)
    # hostname -> how its link's process ran, once started (commlens.launch.vnodes.lifecycle._raise_priority)
    link_priority: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def directory(self) -> Path:
        return RUN_ROOT / self.name

    def temporary_directory(self, node: VirtualNode) -> Path:
        """The node's own TMPDIR, as a host has its own /tmp: MPI runtimes keep their session files
        there under names made of the host's name and a pid, and every cluster's nodes share names."""
        return self.directory / "tmp" / node.hostname

    @property
    def exec_script(self) -> Path:
        """ssh-like: `node-exec [ssh options] HOST COMMAND...` runs COMMAND on the virtual node HOST."""
        return self.directory / "node-exec"

    def link_of(self, index: int) -> dict | None:
        """The network of node `index`'s link: the cluster's, with what a planted fault changes."""
        if self.network is None:
            return None
        planted = [fault for fault in self.faults or [] if fault.get("node") == index]
        return {**self.network, **{key: value for fault in planted for key, value in _settings(fault).items()}}

    def paths_of(self, index: int) -> list[tuple[str, dict]]:
        """The planted faults on paths from node `index` (`link: [a, b]`): (the other node's address, what
        the frames node `index` sends it get in place of its link's: its link with the fault's rate, delay, loss)."""
        link = self.link_of(index)
        if link is None:    # no network: no links, and no paths
            return []
        return [(self.nodes[fault["link"][1] if fault["link"][0] == index else fault["link"][0]].address,
                 {**link, **_settings(fault)})
                for fault in self.faults or [] if index in fault.get("link", ())]

    @property
    def hostnames(self) -> list[str]:
        return [node.hostname for node in self.nodes]

    @property
    def bridge(self) -> str:
        return f"{self.name}br"

    @property
    def leaves(self) -> int:
        return len(self.nodes) // self.topology["leaf_nodes"] if self.topology else 0

    def leaf_bridge(self, leaf: int) -> str:
        return f"{self.name}l{leaf}"

    def uplink_ends(self, leaf: int) -> tuple[str, str]:
        """The uplink of leaf `leaf`: its end on the leaf's bridge, and its end on the spine."""
        return f"{self.name}u{leaf}", f"{self.name}d{leaf}"

    def bridge_of(self, index: int) -> str:
        """The bridge node `index`'s link joins: its leaf's, or the cluster's one."""
        return self.leaf_bridge(index // self.topology["leaf_nodes"]) if self.topology else self.bridge

    @property
    def switch_device(self) -> str:
        return f"{self.name}sw"

    def netns(self, node: VirtualNode) -> str:
        return f"{self.name}-{node.hostname}"

    def host_link(self, index: int) -> str:
        """The bridge's end of node `index`'s veth pair (15 characters at most, as Linux wants)."""
        return f"{self.name}h{index}"

    def cgroup(self, node: VirtualNode) -> Path:
        assert self.cpuset_root is not None     # lifecycle.create makes nodes only where cpusets are
        return self.cpuset_root / self.name / node.hostname

    def command_on(self, hostname: str, argv: list[str]) -> list[str]:
        """argv that runs `argv` on the node `hostname`."""
        return [str(self.exec_script), hostname, shlex.join(argv)]

    def host_list(self, ppn: int) -> str:
        """The nodes as an mpiexec host list with `ppn` slots each, in node order ("vnode0:2,vnode1:2"):
        with commlens.launch.families' remote-start options, mpiexec starts the ranks there through
        node-exec, its remote shell."""
        return ",".join(f"{name}:{ppn}" for name in self.hostnames)


# -- where the nodes' CPUs come from ------------------------------------------------------------

def cgroup_v1_hierarchy(controller: str) -> Path | None:
    """Where cgroup v1 mounts the hierarchy of `controller` (cpuset, cpu); None where it does not."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    for line in mounts:
        _, point, kind, options = line.split()[:4]
        if kind == "cgroup" and controller in options.split(","):
            return Path(point)
    return None


def cpuset_root() -> Path | None:
    """The cgroup directory where cpusets can be made: cgroup v1's cpuset hierarchy, or a cgroup v2
    root that offers the cpuset controller to its children; None where there is neither."""
    if (v1 := cgroup_v1_hierarchy("cpuset")) is not None:
        return v1
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
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


def run_command(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise VirtualNodesError(f"`{shlex.join(argv)}` failed ({done.returncode}): {done.stderr.strip()}")
    return done


def _free_subnet() -> str:
    """A 10.213.X /24 that no address of this network namespace is in (only a cluster that gives
    this host an address on its bridge needs one of its own)."""
    used = set(re.findall(rf"inet {re.escape(SUBNETS)}\.(\d+)\.", run_command(["ip", "-4", "-o", "addr"]).stdout))
    for third in range(256):
        if str(third) not in used:
            return f"{SUBNETS}.{third}"
    raise VirtualNodesError(f"every /24 of {SUBNETS}.0.0/16 is in use on this host")


def plan(nodes: int, network: dict | None = None, switch: dict | None = None,
         cpus: list[tuple[int, ...]] | None = None, host_address: bool = False,
         hostname: str = "vnode{}", faults: list | None = None, topology: dict | None = None) -> VirtualCluster:
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
        network=network, switch=switch, host_address=f"{subnet}.254" if host_address else None, faults=faults,
        topology=topology, cpuset_root=cpuset_root())


def _settings(fault: dict) -> dict:
    """What a planted fault sets (rate, delay, loss), without where it is (`node` or `link`)."""
    return {key: value for key, value in fault.items() if key not in ("node", "link")}
