"""What the library and the machine were, as dataset variables: each row's control variables (MPI_T cvars)
over (library, cvar), a launch axis only for the cvars whose value differed between the row's launches,
their descriptions once per row; and each host's hwloc topology over `host`. commlens.data.collect gathers
them from the launches (Configurations, Machines) and adds what these return; the `ds.commlens` accessor
reads them back (configuration(), topology()).

A cvar's `cvar_status` says what its value is: `read` (every launch of the row read `cvar_value`),
`varies` (the launches differ: `cvar_launch_value` has each launch's), `unreadable: why` (the library has it
but would not give its value), `absent` (the row's launches had no such variable: another family's, or
another release's). The row's `mpi_t_status` says whether it recorded any: `ok`, the library's reason where
it has no MPI_T, or `not recorded` (launches from before commlens recorded them).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from commlens.io.cvars import CvarDescriptions, build_descriptions, launch_values
from commlens.launch.topology import decompressed

NOT_RECORDED = "not recorded"
READ, VARIES, ABSENT = "read", "varies", "absent"
UNREADABLE = "unreadable"

CVAR_AXIS_NAME = "control variable of an MPI library (MPI_T cvar), by its MPI_T name"
VARYING_AXIS_NAME = "control variable whose value differed between launches of a row"


@dataclass
class Configurations:
    """Each ok launch's control variables, interned: launches of a row mostly read the same values, so a
    campaign keeps each distinct set once, and per run cell which it was (-1: none recorded)."""

    run_shape: tuple
    sets: list[tuple[str, dict, dict]] = field(default_factory=list)   # (status, values, unreadable)
    _known: dict = field(default_factory=dict)
    of_cell: np.ndarray = field(init=False)

    def __post_init__(self):
        self.of_cell = np.full(self.run_shape, -1, dtype=np.int64)

    def add(self, cell: tuple, mpi_t: dict | None) -> None:
        status, values, unreadable = launch_values(mpi_t)
        if mpi_t is None:
            return
        key = (status, tuple(sorted(values.items())), tuple(sorted(unreadable.items())))
        if key not in self._known:
            self._known[key] = len(self.sets)
            self.sets.append((status, values, unreadable))
        self.of_cell[cell] = self._known[key]


@dataclass
class Machines:
    """Each host's topology (hwloc XML), from the first launch that recorded it, and what took it."""

    xml: dict[str, str] = field(default_factory=dict)
    source: dict[str, str] = field(default_factory=dict)
    hardware: dict[str, str] = field(default_factory=dict)   # host -> the host whose hardware it is

    def add(self, hosts: list[str], topology: dict | None) -> None:
        if not topology or topology.get("status") != "ok":
            return
        machines = topology.get("machines", [])
        for host in dict.fromkeys(hosts):
            if host in self.xml:
                continue
            named = [m for m in machines if host in m.get("hosts", [])]
            # A rank's name the launcher did not know (MPI_Get_processor_name is not always the host's name):
            # where the launch ran on one machine, that machine is the rank's.
            machine = named[0] if named else machines[0] if len(machines) == 1 else None
            if machine is None:
                continue
            try:
                self.xml[host] = decompressed(machine["xml_gz_base64"])
            except (OSError, ValueError):
                continue
            self.hardware[host] = str(machine.get("physical_host") or host)
            shared = [name for name in machine.get("hosts", []) if name != machine.get("physical_host")]
            self.source[host] = (f"{machine.get('lstopo', '') or 'lstopo'} on {machine.get('physical_host', host)}"
                                 + (f", the hardware of the virtual nodes {', '.join(shared)}" if machine.get("shared")
                                    else ""))


def cvar_variables(libraries: list[str], mpis: list[str], configurations: Configurations, builds: dict,
                   run_dims: tuple) -> tuple[dict, dict]:
    """(coords, data_vars) of the rows' control variables; nothing where no launch recorded any."""
    if not (configurations.of_cell >= 0).any():
        return {}, {}
    sets = configurations.sets
    described: dict[str, CvarDescriptions] = {}
    rows = []
    for index, mpi in enumerate(mpis):
        cells = configurations.of_cell[index]
        used = Counter(int(i) for i in cells[cells >= 0].ravel())
        rows.append(_row_values([sets[i] for i in used]))
        if mpi not in described:
            described[mpi] = build_descriptions(builds.get(mpi, {}))
    names = sorted({name for row in rows for name in row.state})
    varying = sorted({name for row in rows for name, state in row.state.items() if state == VARIES})
    shape = (len(libraries), len(names))
    value, state = np.full(shape, "", dtype=object), np.full(shape, ABSENT, dtype=object)
    datatype, scope = np.full(shape, "", dtype=object), np.full(shape, "", dtype=object)
    description, default = np.full(shape, "", dtype=object), np.full(shape, "", dtype=object)
    for i, (row, mpi) in enumerate(zip(rows, mpis)):
        known = described[mpi].cvars
        for j, name in enumerate(names):
            value[i, j] = row.value.get(name, "")
            state[i, j] = row.state.get(name, ABSENT)
            if name in known and name in row.state:
                entry = known[name]
                datatype[i, j], scope[i, j], description[i, j] = entry.datatype, entry.scope, entry.description
                default[i, j] = entry.default if entry.default is not None else ""
    status = [row.status for row in rows]
    reasons = [described[mpi].reason if described[mpi].status != "ok" else "" for mpi in mpis]
    per_launch = np.full((*configurations.run_shape, len(varying)), "", dtype=object)
    for k, name in enumerate(varying):
        texts = np.array([""] + [s[1].get(name, "") for s in sets], dtype=object)
        per_launch[..., k] = texts[configurations.of_cell + 1]
    coords = {"cvar": ("cvar", names, {"long_name": CVAR_AXIS_NAME}),
              "mpi_t_status": ("library", status,
                               {"long_name": "whether the row's launches recorded the library's control variables "
                                             "(MPI_T): ok, why not (the library's reason), or not recorded"}),
              "cvar_description_missing": ("library", reasons,
                                    {"long_name": "why the row's cvars have no descriptions (empty: the build "
                                                  "described them, build/kernels/<mpi>/cvars.json)"})}
    data_vars = {
        "cvar_value": (("library", "cvar"), value.astype(str),
                       {"long_name": "the control variable's value as every launch of the row read it (MPI_T, "
                                     "after MPI_Init, rank 0; text: numbers in decimal, enumerations by name); "
                                     "empty unless cvar_status is read"}),
        "cvar_status": (("library", "cvar"), state.astype(str),
                        {"long_name": "read (cvar_value), varies (cvar_launch_value), unreadable: why, or absent "
                                      "(the row's library has no such variable)"}),
        "cvar_default": (("library", "cvar"), default.astype(str),
                         {"long_name": "the value the library read with nothing set by the environment (the "
                                       "build's own run); empty: not described"}),
        "cvar_datatype": (("library", "cvar"), datatype.astype(str),
                          {"long_name": "the cvar's MPI datatype (int, unsigned long, double, char, bool, ...)"}),
        "cvar_scope": (("library", "cvar"), scope.astype(str),
                       {"long_name": "the cvar's MPI_T scope: constant, readonly, local, group, group_eq, all, "
                                     "all_eq (whether it may change, and whether processes may differ)"}),
        "cvar_description": (("library", "cvar"), description,
                             {"long_name": "the cvar's description, as the library gives it (MPI_T)"}),
    }
    if varying:
        coords["cvar_varying"] = ("cvar_varying", varying, {"long_name": VARYING_AXIS_NAME})
        data_vars["cvar_launch_value"] = ((*run_dims, "cvar_varying"), per_launch.astype(str),
                                          {"long_name": "each launch's value of a cvar whose launches differ "
                                                        "(empty: the launch recorded none)"})
    return coords, data_vars


@dataclass
class _Row:
    status: str
    value: dict[str, str]
    state: dict[str, str]


def _row_values(sets: list[tuple[str, dict, dict]]) -> _Row:
    """One row's cvars over the sets of values its launches read."""
    ok = [s for s in sets if s[0] == "ok"]
    statuses = sorted({s[0] for s in sets})
    status = "ok" if statuses == ["ok"] else "; ".join(statuses) if statuses else NOT_RECORDED
    names = sorted({name for _, values, unreadable in ok for name in (*values, *unreadable)})
    value, state = {}, {}
    for name in names:
        read = {values[name] for _, values, _ in ok if name in values}
        why = {unreadable[name] for _, _, unreadable in ok if name in unreadable}
        present = sum(name in values or name in unreadable for _, values, unreadable in ok)
        if len(read) == 1 and not why and present == len(ok):
            value[name], state[name] = read.pop(), READ
        elif not read and len(why) == 1 and present == len(ok):
            state[name] = f"{UNREADABLE}: {why.pop()}"
        else:
            state[name] = VARIES
    return _Row(status=status, value=value, state=state)


def topology_variables(machines: Machines) -> tuple[dict, dict]:
    """(coords, data_vars) of each host's topology; nothing where no launch recorded one."""
    if not machines.xml:
        return {}, {}
    hosts = sorted(machines.xml)
    return ({"host": ("host", hosts, {"long_name": "a host the ranks ran on, as MPI_Get_processor_name names it"})},
            {"host_topology": ("host", np.array([machines.xml[h] for h in hosts], dtype=object),
                               {"long_name": "the host's hardware topology as hwloc's XML (lstopo --of xml): "
                                             "packages, NUMA nodes, caches, cores, PUs; ranks' cpu_binding names "
                                             "its PUs"}),
             "host_hardware": ("host", np.array([machines.hardware[h] for h in hosts], dtype=object).astype(str),
                               {"long_name": "the host whose hardware the host is (itself; for a virtual node, the "
                                             "host that carries it)"}),
             "host_topology_source": ("host", np.array([machines.source[h] for h in hosts], dtype=object).astype(str),
                                      {"long_name": "what took the host's topology, and where (virtual nodes "
                                                    "share their host's)"})})
