"""The Methods section's placements: each placement's shape, how its nodes were made (one node, real
hosts, virtual nodes on one host, or one host's loopback), the transport, the links' rate and MTU, the
hosts, the environment commlens's launcher set and the CPUs each rank could run on, every one read
from what the dataset recorded (`emulation`, `transport`, `network_rate`, `mtu`, `link_delay`, `link_loss`,
`link_shaper`, `link_burst`, `link_priority`, `switch_rate`, `switch_shaper`, `faults`, `topology` on the
placement; `hosts`, `launch_env`, `cpu_binding` per launch); what it lacks is NOT_RECORDED."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np

from commlens.analysis.topology import placement_lines
from commlens.report.methods.facts import NOT_RECORDED, Facts

# What each way of emulating nodes on one host is (commlens.launch.plan), in the words a reader needs.
EMULATIONS = {
    "namespaces": ("their nodes were virtual nodes on one host, each a network namespace with its own hostname, "
                   "address and CPUs, linked through a bridge, so that each library took its own path between "
                   "hosts, as between real ones"),
    "loopback": ("their nodes shared one host, each library forced onto its network path over loopback by the "
                 "environment commlens's launcher set (listed with each placement)"),
}


def placements_section(facts: Facts):
    """(paragraphs, items): what the placements' emulations are, then one item per placement."""
    ds = facts.ds
    coords = {name: facts.coord(name, "placement") for name in
              ("nodes", "ppn", "transport", "emulated", "emulation", "network_rate", "mtu", "switch_rate",
               "link_delay", "link_loss", "link_shaper", "link_burst", "link_priority", "switch_shaper",
               "faults", "topology")}
    # Each pair's relation in hwloc's terms, a flag where two ranks shared a core (commlens.analysis.topology).
    coords["where_ranks_ran"] = placement_lines(ds)
    items = [f"{placement}: "
             f"{'; '.join(_placement(facts, placement, {k: v.get(placement) for k, v in coords.items()}))}."
             for placement in (str(p) for p in ds["placement"].values)]
    # A placement no launch of which gave data recorded nothing of how it ran.
    emulated = {p: coords["emulation"].get(p) or "" for p, e in coords["emulated"].items()
                if e and _ok_launches(facts, "status", p) != []}
    paragraphs = []
    for kind, words in EMULATIONS.items():
        named = [p for p, how in emulated.items() if how == kind]
        if named:
            paragraphs.append(f"Emulated placements ({', '.join(named)}): {words}.")
    unknown = [p for p, how in emulated.items() if how not in EMULATIONS]
    if unknown:
        paragraphs.append(f"Emulated placements ({', '.join(unknown)}): more than one node on one host; how the "
                          f"nodes were emulated: {NOT_RECORDED} (no launch of the placement recorded it).")
    paragraphs.append("Each placement, with what its launches recorded: the hosts, the environment variables "
                      "commlens's launcher set (a library row's own settings among them), the CPUs each rank "
                      "was allowed to run on (one CPU each where ranks were bound to cores) and where that put each "
                      "pair of ranks on its host's hardware, as hwloc describes it:")
    return paragraphs, items


def _placement(facts: Facts, placement: str, get: dict) -> list[str]:
    parts = [f"{get['nodes']} node(s) x {get['ppn']} ranks per node" if get["nodes"] is not None
             else f"shape {NOT_RECORDED}"]
    transport, emulation = get["transport"], get["emulation"] or ""
    if _ok_launches(facts, "status", placement) == []:
        # The placement's coordinates then say what was asked for, not how anything ran.
        return parts + [f"no launch gave data, so how it ran is {NOT_RECORDED}"]
    if get["emulated"] is None and transport is None:
        parts.append(f"transport: {NOT_RECORDED}")
    elif get["emulated"]:
        how = {"namespaces": "virtual nodes on one host", "loopback": "one host's loopback"}.get(emulation)
        parts.append(f"nodes emulated as {how}" if how else f"nodes emulated on one host, how: {NOT_RECORDED}")
        between = {"namespaces": "between the virtual nodes", "loopback": "over loopback"}.get(emulation, "")
        parts.append(f"transport: {_transport(transport)} {between}".rstrip())
    elif transport == "network":
        parts.append("on separate hosts; transport: the network between them")
    else:
        parts.append(f"on one node; transport: {_transport(transport)}")
    link = _link(get["network_rate"], get["mtu"], emulation, get)
    if link:
        parts.append(link)
    if _finite(get["switch_rate"]):
        # Datasets from before switch_shaper was recorded: one shaper, link_shaper, made links and switch.
        switch_shaper = get.get("switch_shaper") or (get["link_shaper"] if get["link_shaper"] in ("netem", "tbf")
                                                     else None)
        parts.append(f"every node's link into one emulated switch of {get['switch_rate'] / 1e6:g} Mbit/s, which all "
                     f"pairs of nodes share ({_shaper(switch_shaper)})")
    # Leaf switches are made of virtual nodes only: a placement that ran on real hosts had the site's.
    tiers = _tiers(get.get("topology"), get["nodes"], get.get("switch_shaper")) if emulation == "namespaces" else ""
    if tiers:
        parts.append(tiers)
    parts.append(f"hosts: {_distinct(facts, 'hosts', placement)}")
    parts.append(f"environment set: {_environment(facts, placement)}")
    parts.append(f"CPUs each rank could run on (rank by rank): {_distinct(facts, 'cpu_binding', placement, ' | ')}")
    parts.append(f"where the ranks ran (hwloc): {get.get('where_ranks_ran') or NOT_RECORDED}")
    return parts



def _tiers(recorded, nodes, shaper) -> str:
    """The leaf switches and their uplinks (the `topology` coordinate, JSON), as Methods says them."""
    topology = json.loads(recorded) if isinstance(recorded, str) and recorded else {}
    if not topology:
        return ""
    from commlens.launch.netem import rate_bits_per_s

    per_leaf = topology["leaf_nodes"]
    leaves = [f"vnode{first}-vnode{first + per_leaf - 1}" for first in range(0, int(nodes or 0), per_leaf)]
    how = UPLINK_SHAPERS.get(shaper, f"shaper: {NOT_RECORDED}")
    return (f"nodes on {len(leaves) or NOT_RECORDED} leaf switches of {per_leaf} ({', '.join(leaves)}), each joined "
            f"to one spine through an uplink of {rate_bits_per_s(topology['uplink']['rate']) / 1e6:g} Mbit/s each way "
            f"({how}), which the leaf's nodes share for what they send to and receive from other leaves")


# What each shaper makes of an uplink: one queue each way (commlens.launch.vnodes.lifecycle).
UPLINK_SHAPERS = {
    "netem": "shaped by netem each way, which serialises every packet at the rate",
    "tbf": ("shaped by a token bucket (tbf) each way, which keeps the rate in bulk but passes a burst (1 ms of "
            "the rate, ten frames at least) after a pause at once"),
}


def _transport(transport) -> str:
    return {"shm": "shared memory", "tcp": "TCP", "network": "the network"}.get(transport, transport or NOT_RECORDED)


def _finite(value) -> bool:
    return value is not None and np.isfinite(value) and value > 0


# What each shaper of commlens.launch.netem makes of a link, in the words a reader needs.
SHAPERS = {
    "netem": "netem, which serialises every packet at the rate, so each waits its wire bytes over the rate",
    "wire": ("a wire process per node, which serialises every frame at the rate in each direction, so each "
             "waits its wire bytes over the rate, the switch forwarding cut-through; waking it adds tens of "
             "microseconds to each message on a virtual machine"),
    "tbf": ("a token bucket (tbf) both directions share, which keeps the rate in bulk but passes a small "
            "message after a pause at once, faster than the rate"),
}


def _shaper(shaper) -> str:
    return f"shaped by {SHAPERS[shaper]}" if shaper in SHAPERS else f"shaper: {NOT_RECORDED}"


def _link(rate_bits, mtu, emulation: str, get: dict) -> str:
    """The emulated link's rate, MTU, shaper, delay and loss, where the placement has one ('' where it has none)."""
    if not _finite(rate_bits):
        return ""
    from commlens.launch.netem import expected_goodput_bytes_per_s

    goodput = expected_goodput_bytes_per_s(f"{rate_bits:.0f}bit", int(mtu)) / 1e6 if mtu else None
    where = {"namespaces": "each virtual node's link", "loopback": "the loopback of a private network namespace"}
    faults = [f"a delay of {get['link_delay'] * 1e6:g} us" if _finite(get.get("link_delay")) else "",
              f"a loss of {get['link_loss']:g}% of packets" if _finite(get.get("link_loss")) else ""]
    return (f"{where.get(emulation, 'the emulated link')} limited to {rate_bits / 1e6:g} Mbit/s with MTU "
            f"{f'{int(mtu)} B' if mtu else NOT_RECORDED}"
            + (f" (bulk TCP payload at most {goodput:.4g} MB/s after IP and TCP headers)" if goodput else "")
            + f", {_shaper(get.get('link_shaper'))}" + _burst(get.get("link_burst"))
            + _priority(get.get("link_priority"))
            + "".join(f", with {fault}" for fault in faults if fault) + _planted(get.get("faults")))


def _burst(seconds) -> str:
    """How much one frame of the wire carried, where it was recorded (datasets from before, or links
    not made by the wire, have none)."""
    if not _finite(seconds):
        return ""
    return f", each frame carrying at most {seconds * 1e6:g} us of the link's time (whole TCP segments, at least one)"


def _priority(recorded) -> str:
    """How the wire's processes ran, where it was recorded (datasets from before, and other shapers, have none)."""
    from commlens.launch.wire import REALTIME

    if not isinstance(recorded, str) or not recorded:
        return ""
    if recorded == REALTIME:
        return ", each link's process at a real-time priority, above the ranks"
    return f", the links' processes {recorded}, so that a rank's time slice could hold their frames back"


def _planted(recorded) -> str:
    """The faults planted on nodes' links and on paths between two nodes (the `faults` coordinate, JSON),
    as Methods says them."""
    from commlens.launch.netem import rate_bits_per_s

    faults = json.loads(recorded) if isinstance(recorded, str) and recorded else []
    said = []
    for fault in faults:
        what = ([f"{rate_bits_per_s(fault['rate']) / 1e6:g} Mbit/s"] if "rate" in fault else []) \
            + ([f"a delay of {fault['delay']}"] if "delay" in fault else []) \
            + ([f"a loss of {fault['loss']:g}% of packets"] if "loss" in fault else [])
        where = (f"the path between nodes {fault['link'][0]} and {fault['link'][1]} (what each sends the other)"
                 if "link" in fault else f"node {fault['node']}'s link")
        said.append(f"{where} {' and '.join(what)}")
    return f"; faults planted for validation: {', '.join(said)}" if said else ""


def _ok_launches(facts: Facts, name: str, placement: str):
    """(library, value) of every launch of the placement that gave data, for a per-launch record."""
    ds = facts.ds
    if name not in ds or "status" not in ds:
        return None
    status = ds["status"].sel(placement=placement).transpose("library", "kernel", "launch").values
    values = ds[name].sel(placement=placement).transpose("library", "kernel", "launch").values
    libraries = [str(v) for v in ds["library"].values]
    return [(libraries[index[0]], str(values[index])) for index in zip(*np.nonzero(status == "ok"))]


def _distinct(facts: Facts, name: str, placement: str, separator: str = "") -> str:
    """The distinct values a per-launch record took in a placement's launches that gave data."""
    launches = _ok_launches(facts, name, placement)
    values = Counter(value for _, value in launches or () if value)
    if not values:
        return NOT_RECORDED
    show = (lambda v: separator.join(v.split())) if separator else str
    if len(values) == 1:
        return show(next(iter(values)))
    return ", ".join(f"{show(value)} ({n} launches)" for value, n in values.most_common())


def _environment(facts: Facts, placement: str) -> str:
    """The variables commlens's launcher set, per library row where the rows differ: 'none' where it
    set none, NOT_RECORDED where the launches did not record it (older datasets)."""
    launches = _ok_launches(facts, "launch_env", placement)
    if not launches:
        return NOT_RECORDED
    by_library: dict[str, set[str]] = {}
    for library, recorded in launches:
        words = NOT_RECORDED if not recorded else (
            ", ".join(f"{k}={v}" for k, v in sorted(json.loads(recorded).items())) or "none")
        by_library.setdefault(library, set()).add(words)
    described = {library: " or ".join(sorted(words)) for library, words in by_library.items()}
    if len(set(described.values())) == 1:
        return next(iter(described.values()))
    return "; ".join(f"{library}: {words}" for library, words in described.items())
