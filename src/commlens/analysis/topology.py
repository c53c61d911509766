"""Where each rank ran, in hwloc's terms: each launch's `cpu_binding` (the PUs a rank could run on) read
against its host's topology (`host_topology`, commlens.io.hwloc): its cores, caches, NUMA nodes and
package, and what it shared with the other rank of its pair.

A rank's pair is the rank half the ranks away (rank r and r + n/2, OSU's pairing of multi-pair kernels;
ranks 0 and 1 of a ping-pong). Two ranks' relation is the closest hwloc object both ran under: the same
core, the same package (with the outermost cache both ran under), or across packages; ranks bound to
several cores each are said to be so, since either may have run anywhere in its set.
"""

from __future__ import annotations

import pandas as pd
import xarray as xr

from commlens.io.hwloc import Location, Topology, TopologyError, parse_cpus, read_topology, relation, shared_caches

COLUMNS = ("library", "placement", "binding", "rank", "host", "cpus", "cores", "numa_nodes", "packages", "caches",
           "peer", "shared_with_peer", "relation", "launches")


def has_topology(ds: xr.Dataset) -> bool:
    return "host_topology" in ds.data_vars


def topologies(ds: xr.Dataset) -> dict[str, Topology]:
    """{host: its topology} of every host the dataset recorded one for (those that do not parse left out)."""
    found: dict[str, Topology] = {}
    if not has_topology(ds):
        return found
    for host, xml in zip(ds["host"].values, ds["host_topology"].values):
        try:
            found[str(host)] = read_topology(str(xml))
        except TopologyError:
            continue
    return found


def hardware(ds: xr.Dataset) -> dict[str, str]:
    """{host: the host whose hardware it is}: itself, or for a virtual node the host that carries it."""
    if "host_hardware" not in ds.data_vars:
        return {str(h): str(h) for h in ds["host"].values} if "host" in ds.coords else {}
    return {str(h): str(m) for h, m in zip(ds["host"].values, ds["host_hardware"].values)}


def peer_of(rank: int, nprocs: int) -> int | None:
    """The other rank of `rank`'s pair: half the ranks away (None for one rank, or an odd count's last)."""
    if nprocs < 2:
        return None
    half = nprocs // 2
    peer = rank + half if rank < half else rank - half
    return peer if peer < nprocs and peer != rank else None


def _text(values) -> str:
    return ",".join(str(v) for v in values)


def rank_table(ds: xr.Dataset) -> pd.DataFrame:
    """Per (library, placement) and each binding its ok launches ran with (`binding`: every rank's PUs, as
    the launches' cpu_binding has it), one row per rank (COLUMNS): its host, the PUs it was bound to
    (`cpus`), their cores (logical indices), NUMA nodes and packages, the
    caches it ran under, its pair's rank, the caches both ran under (`shared_with_peer`), their `relation`
    ("same package, shared L3") and how many launches ran so. Empty where the dataset recorded no topology;
    a host without one has its binding and nothing more."""
    if not has_topology(ds) or "cpu_binding" not in ds.data_vars:
        return pd.DataFrame({name: pd.Series(dtype=object) for name in COLUMNS})
    machines, carriers = topologies(ds), hardware(ds)
    status = ds["status"].transpose("library", "placement", "kernel", "launch").values
    hosts = ds["hosts"].transpose("library", "placement", "kernel", "launch").values
    bindings = ds["cpu_binding"].transpose("library", "placement", "kernel", "launch").values
    rows = []
    for li, library in enumerate(ds["library"].values):
        for pi, placement in enumerate(ds["placement"].values):
            ok = status[li, pi] == "ok"
            seen = pd.Series([(str(h), str(b)) for h, b in zip(hosts[li, pi][ok], bindings[li, pi][ok])],
                             dtype=object).value_counts(sort=False)
            for (host_text, binding_text), launches in seen.items():
                rows += _ranks(str(library), str(placement), host_text.split(","), binding_text.split(" "),
                               machines, carriers, int(launches))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _ranks(library: str, placement: str, hosts: list[str], bindings: list[str], machines: dict[str, Topology],
           carriers: dict[str, str], launches: int) -> list[dict]:
    nprocs = len(hosts)
    where: list[Location | None] = []
    for host, binding in zip(hosts, bindings + [""] * (nprocs - len(bindings))):
        machine = machines.get(host)
        where.append(machine.locate(parse_cpus(binding)) if machine and parse_cpus(binding) else None)
    rows = []
    for rank, (host, location) in enumerate(zip(hosts, where)):
        peer = peer_of(rank, nprocs)
        other = where[peer] if peer is not None else None
        row = {"library": library, "placement": placement, "binding": " ".join(bindings), "rank": rank, "host": host,
               "cpus": bindings[rank] if rank < len(bindings) else "", "cores": "", "numa_nodes": "", "packages": "",
               "caches": "", "peer": peer if peer is not None else -1, "shared_with_peer": "", "relation": "",
               "launches": launches}
        if location is not None:
            row |= {"cores": _text(location.cores), "numa_nodes": _text(location.numa_nodes),
                    "packages": _text(location.packages), "caches": ", ".join(map(str, location.caches))}
        if peer is not None:
            # Virtual nodes of one host share its hardware: where their ranks ran is as on one host.
            same_host = carriers.get(hosts[peer], hosts[peer]) == carriers.get(host, host)
            if location is not None and other is not None and same_host:
                row["shared_with_peer"] = ", ".join(map(str, shared_caches(location, other)))
            if not same_host:
                row["relation"] = "different hosts"
            elif location is not None and other is not None:
                row["relation"] = relation(location, other, same_host=same_host)
                if same_host and hosts[peer] != host:
                    row["relation"] = f"virtual nodes of {carriers.get(host, host)}, {row['relation']}"
        rows.append(row)
    return rows


def shared_cores(ranks: pd.DataFrame, carriers: dict[str, str] | None = None) -> list[tuple[int, int, str]]:
    """(rank, rank, cores) of every two ranks of one binding's rows of rank_table (one library, placement and
    binding) on the same hardware (`carriers`: hardware()) whose cores overlap."""
    found = []
    carriers = carriers or {}
    cores = [(row.rank, carriers.get(row.host, row.host), set(row.cores.split(",")) - {""})
             for row in ranks.itertuples()]
    for i, (rank, host, mine) in enumerate(cores):
        for other, other_host, theirs in cores[i + 1:]:
            if host == other_host and mine & theirs:
                found.append((rank, other, ",".join(sorted(mine & theirs, key=int))))
    return found


def placement_lines(ds: xr.Dataset) -> dict[str, str]:
    """{placement: where its ranks ran, in a sentence}: the relation of each pair (ranks 0 and 1 of two),
    per library where the libraries' bindings differ, with the machine's make-up, and a flag where two ranks
    of a launch shared a core. Empty where the dataset recorded no topology."""
    table = rank_table(ds)
    if table.empty:
        return {}
    machines, carriers = topologies(ds), hardware(ds)
    lines = {}
    for placement, of_placement in table.groupby("placement", sort=False):
        said: dict[str, list[str]] = {}
        flags = []
        for (library, _), ranks in of_placement.groupby(["library", "binding"], sort=False):
            pairs = ranks[(ranks["peer"] > ranks["rank"])]
            words = "; ".join(_pair_words(pair) for pair in pairs.itertuples()) if len(pairs) else ""
            if words:
                said.setdefault(words, []).append(str(library))
            for first, second, cores in shared_cores(ranks, carriers):
                flags.append(f"{library}: ranks {first} and {second} shared core {cores}")
        if not said and not flags:
            continue
        parts = [f"{words}" + ("" if len(said) == 1 else f" ({', '.join(dict.fromkeys(libraries))})")
                 for words, libraries in said.items()]
        hosts = sorted(set(of_placement["host"]) & set(machines))
        machine = "; ".join(dict.fromkeys(machines[h].describe() for h in hosts))
        line = "; ".join(parts) + (f" (hwloc: {machine})" if machine else "")
        if flags:
            line += ". Flagged: " + "; ".join(dict.fromkeys(flags)) + " (their times include waiting for the core)"
        lines[str(placement)] = line
    return lines


def _pair_words(pair) -> str:
    """"ranks 0 and 1: same package, shared L3 (L3#0 (32 MiB))"."""
    relation_words = pair.relation or "binding unknown"
    if pair.relation == "different hosts":
        return f"ranks {pair.rank} and {pair.peer}: different hosts"
    return f"ranks {pair.rank} and {pair.peer}: {relation_words}"
