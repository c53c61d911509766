"""hwloc's XML topology of a host (`lstopo --of xml`), read with the standard library: which core, caches,
NUMA nodes and package each processing unit (PU, by the operating system's CPU number: what a rank's
`cpu_binding` lists) belongs to, and where a rank bound to some PUs ran.

Both of hwloc's XML layouts are read: hwloc 2's (NUMA nodes as memory children of the object they are local
to, caches typed L1Cache, L1iCache, L2Cache, ...) and hwloc 1's (NUMA nodes as parents, caches typed Cache
with a depth). Cores and caches are named by their logical index (hwloc's L#: their order in the machine,
unique where operating-system numbers repeat across packages); packages and NUMA nodes by their
operating-system number (P#), as numactl and lstopo name them.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field

from commlens.units import format_size

CACHE_KINDS = {"0": "", "1": "d", "2": "i"}     # hwloc's cache_type: unified, data, instruction


class TopologyError(ValueError):
    """XML that is not an hwloc topology."""


@dataclass(frozen=True)
class Cache:
    name: str          # L1d, L1i, L2, L3, ...
    index: int         # logical index among the caches of its name (hwloc's L#)
    size_bytes: int
    level: int

    @property
    def label(self) -> str:
        return f"{self.name}#{self.index}"

    def __str__(self) -> str:
        return f"{self.label} ({format_size(self.size_bytes)})" if self.size_bytes else self.label


@dataclass(frozen=True)
class ProcessingUnit:
    os_index: int
    core: int                       # logical index of its core (-1: the topology has no cores)
    package: int                    # operating-system number of its package (-1: none)
    numa_nodes: tuple[int, ...]     # operating-system numbers of the NUMA nodes local to it
    caches: tuple[Cache, ...]       # innermost first


@dataclass(frozen=True)
class Location:
    """Where a rank bound to `pus` ran: the cores, packages and NUMA nodes of those PUs, and the caches
    that hold every one of them (those it could not leave)."""

    pus: tuple[int, ...]
    cores: tuple[int, ...]
    packages: tuple[int, ...]
    numa_nodes: tuple[int, ...]
    caches: tuple[Cache, ...]
    unknown: tuple[int, ...] = ()   # PUs the binding names that the topology has not

    @property
    def bound(self) -> bool:
        """Bound to one core at most (its PUs, hyperthreads of one core)."""
        return len(self.cores) == 1


@dataclass
class Topology:
    pus: dict[int, ProcessingUnit]
    packages: tuple[int, ...]
    numa_nodes: tuple[int, ...]
    cores: int
    caches: dict[str, int] = field(default_factory=dict)   # cache name -> how many

    def locate(self, pus) -> Location:
        """Where a rank bound to the PUs `pus` (operating-system numbers) ran."""
        pus = tuple(sorted(set(int(pu) for pu in pus)))
        known = [self.pus[pu] for pu in pus if pu in self.pus]
        common = set(known[0].caches) if known else set()
        for unit in known[1:]:
            common &= set(unit.caches)
        return Location(pus=pus, cores=tuple(sorted({u.core for u in known if u.core >= 0})),
                        packages=tuple(sorted({u.package for u in known if u.package >= 0})),
                        numa_nodes=tuple(sorted({n for u in known for n in u.numa_nodes})),
                        caches=tuple(sorted(common, key=lambda c: (c.level, c.name, c.index))),
                        unknown=tuple(pu for pu in pus if pu not in self.pus))

    def describe(self) -> str:
        """"1 package, 1 NUMA node, 2 cores, 2 PUs; L3 32 MiB x1": the machine in one line."""
        def counted(n: int, noun: str) -> str:
            return f"{n} {noun}{'s' * (n != 1)}"
        return ", ".join([counted(len(self.packages), "package"), counted(len(self.numa_nodes), "NUMA node"),
                          counted(self.cores, "core"), counted(len(self.pus), "PU")])


def shared_caches(a: Location, b: Location) -> tuple[Cache, ...]:
    """The caches both ranks ran under (each of them holds every PU of both)."""
    shared = set(a.caches) & set(b.caches)
    return tuple(sorted(shared, key=lambda c: (c.level, c.name, c.index)))


def relation(a: Location, b: Location, same_host: bool = True) -> str:
    """Where two ranks ran relative to each other, in hwloc's terms: "same core", "same package, shared L3",
    "same package, no shared cache", "same package, across NUMA nodes", "across packages", or "not bound to
    one core each: ..." where either may have run anywhere in a set of cores; "different hosts"."""
    if not same_host:
        return "different hosts"
    if a.unknown or b.unknown or not a.pus or not b.pus:
        return "binding not in the host's topology"
    if set(a.cores) & set(b.cores) and a.bound and b.bound:
        return "same PU" if set(a.pus) & set(b.pus) else "same core"
    if not (a.bound and b.bound):
        return (f"not bound to one core each (cores {_span(a.cores)} and {_span(b.cores)}"
                + (": overlapping)" if set(a.cores) & set(b.cores) else ")"))
    if len(a.packages) == len(b.packages) == 1 and a.packages == b.packages:
        where = "same package"
        if a.numa_nodes and b.numa_nodes and a.numa_nodes != b.numa_nodes:
            where += ", across NUMA nodes"
        shared = [cache for cache in shared_caches(a, b) if not cache.name.endswith("i")]
        return f"{where}, shared {shared[-1].name}" if shared else f"{where}, no shared cache"
    return "across packages"


def _span(values) -> str:
    """0-3,8: numbers as ranges."""
    values = sorted(values)
    parts, start = [], None
    for i, value in enumerate(values):
        if start is None:
            start = value
        if i + 1 == len(values) or values[i + 1] != value + 1:
            parts.append(str(start) if start == value else f"{start}-{value}")
            start = None
    return ",".join(parts) or "none"


def parse_cpus(text: str) -> list[int]:
    """"0,2,4-7" (a cpu_binding, or Linux's list format) -> [0, 2, 4, 5, 6, 7]; [] for "" or "unknown"."""
    cpus: list[int] = []
    for part in str(text).replace(" ", "").split(","):
        if not part or not part[0].isdigit():
            continue
        low, _, high = part.partition("-")
        cpus.extend(range(int(low), int(high or low) + 1))
    return cpus


def bitmap(text: str | None) -> set[int]:
    """hwloc's bitmap ("0x00000003", "0xffffffff,0xffffffff": 32-bit words, most significant first) as the
    set of its bits."""
    if not text:
        return set()
    words = [word.strip().removeprefix("0x") or "0" for word in text.split(",")]
    value = int("".join(word.rjust(8, "0") for word in words), 16)
    return {bit for bit in range(value.bit_length()) if value >> bit & 1}


def read_topology(xml: str) -> Topology:
    """The topology an hwloc XML describes; TopologyError where it is no such XML."""
    try:
        root = ElementTree.fromstring(xml)
    except ElementTree.ParseError as error:
        raise TopologyError(f"not XML: {error}") from None
    if root.tag != "topology":
        raise TopologyError(f"not an hwloc topology: its root is <{root.tag}>")
    machine = root.find("object")
    if machine is None:
        raise TopologyError("an hwloc topology without objects")
    numa_of_nodeset: dict[int, int] = {}
    cache_counts: dict[str, int] = {}
    core_count = [0]
    pus: dict[int, ProcessingUnit] = {}
    packages, numa_nodes = set(), set()

    def cache_of(element) -> Cache:
        kind = element.get("type")
        level = int(element.get("depth") or (kind[1] if kind[1:2].isdigit() else 0))
        suffix = "i" if kind == "L1iCache" else CACHE_KINDS.get(element.get("cache_type", "0"), "")
        name = f"L{level}{suffix}"
        index = cache_counts.get(name, 0)
        cache_counts[name] = index + 1
        return Cache(name=name, index=index, size_bytes=int(element.get("cache_size", "0") or 0), level=level)

    def walk(element, package: int, core: int, caches: tuple, numa: tuple) -> None:
        kind = element.get("type", "")
        if kind == "Package":
            package = int(element.get("os_index", "-1"))
            packages.add(package)
        elif kind == "NUMANode":
            node = int(element.get("os_index", "-1"))
            numa_nodes.add(node)
            numa = (*numa, node)            # hwloc 1: the node is a parent of what is local to it
        elif kind == "Core":
            core = core_count[0]
            core_count[0] += 1
        elif kind == "Cache" or (kind.startswith("L") and kind.endswith("Cache")):
            caches = (cache_of(element), *caches)
        elif kind == "PU":
            os_index = int(element.get("os_index", "-1"))
            local = tuple(sorted(set(numa) | {numa_of_nodeset[bit] for bit in bitmap(element.get("nodeset"))
                                              if bit in numa_of_nodeset}))
            pus[os_index] = ProcessingUnit(os_index=os_index, core=core, package=package, numa_nodes=local,
                                           caches=caches)
        for child in element.findall("object"):
            walk(child, package, core, caches, numa)

    # hwloc 2's NUMA nodes are memory children; a PU's nodeset names them by operating-system number.
    for node in machine.iter("object"):
        if node.get("type") == "NUMANode":
            os_index = int(node.get("os_index", "-1"))
            for bit in bitmap(node.get("nodeset")):
                numa_of_nodeset[bit] = os_index
    walk(machine, -1, -1, (), ())
    if not pus:
        raise TopologyError("an hwloc topology without processing units (PU)")
    return Topology(pus=pus, packages=tuple(sorted(packages)), numa_nodes=tuple(sorted(numa_nodes)),
                    cores=core_count[0], caches=cache_counts)
