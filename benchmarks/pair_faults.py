"""`make validate`: slow nodes and links named, and groups of nodes that share a switch found, from
all-pairs times with a planted fault or two leaf switches, truth beside what was found.

- Synthetic (commlens.data.synthetic.pair_times: 8 nodes, 5 repetitions 20% apart, each measurement 5%;
  no pair or node differs once and for all, so that the plant is the whole truth: tests/test_network_pairs.py
  adds that). Five random plants of each kind; five clusters of two leaves of four nodes dealt at random,
  every pair across them 1.4 times as slow, and one link across 1.3 times as slow besides, which must be
  named beyond the groups found.
- Measured, on 8 virtual nodes (where this host can make them): allpairs.isolated at 8 KiB over links
  of 20 Mbit/s, so that a pair's window takes 7 ms on the wire and eight ranks and eight link processes
  on two cores wait for the wire, not for a core; 3 launches a plant. Five clean clusters, five with one
  node's link at 14 Mbit/s, five with the path between two nodes at 14 Mbit/s, the nodes drawn at random;
  three with two leaf switches of four nodes (vnode0-vnode3, vnode4-vnode7), their uplinks at 14 Mbit/s
  (at 64 KiB: where the kernel has no netem an uplink is a token bucket, which passes 8 KiB at once).
  Every cluster's groups are found too: one, but for the two-leaf ones, where nothing may be named beyond them.
  The libraries' environments and kernel builds are the workspace's (default: this checkout's build/).
Run: .venv/bin/python benchmarks/pair_faults.py [--workspace DIR] [--synthetic-only] [--kinds KIND ...]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from commlens.analysis.network import find_groups, find_slow_nodes_and_links
from commlens.data import synthetic as syn
from commlens.data.samples import quiet_nanmedian
from commlens.io.raw import read_raw
from commlens.launch import netem, vnodes
from commlens.launch.placement import Placement
from commlens.launch.run import run_launch
from commlens.launch.supervision import stop_when_told

REPO = Path(__file__).resolve().parent.parent
NODES = [f"vnode{k}" for k in range(8)]
NOISE = syn.PairNoise(pair_relative=0, node_relative=0)
LIBRARY = "mpich-5.0.2"
NETWORK = {"rate": "20mbit", "mtu": 1500}
SLOW_RATE = "14mbit"
LAUNCHES = 3
LEAVES = {"leaf_nodes": 4, "uplink": {"rate": SLOW_RATE}}
KINDS = ("clean", "slow node", "slow link", "two leaves")
KERNEL_ARGS = ["allpairs.isolated", "--window", "2", "--min-samples", "3", "--max-samples", "5",
               "--max-point-time", "2"]
SIZE = 8192
# Where the kernel has no netem the uplinks are token buckets, which pass what fits in their burst (two
# frames at 14 Mbit/s) at once: a pair's window must be well beyond it to read the uplink's rate (with a
# burst of ten frames, two of 8 KiB read one switch).
LEAF_SIZE = 65536


def synthetic() -> int:
    wrong = 0
    print("all-pairs faults, 8 nodes, 5 repetitions: planted -> named")
    for kind, factor in (("clean", 1.0), ("slow node", 1.3), ("slow link", 1.3), ("fast link", 0.75)):
        for seed in range(5):
            rng = np.random.default_rng(100 + seed)
            a, b = (int(k) for k in rng.choice(8, 2, replace=False))
            plants = {"slow node": {"slow_nodes": {a: factor}}}.get(kind) or \
                ({"slow_links": {(a, b): factor}} if "link" in kind else {})
            found = find_slow_nodes_and_links(syn.pair_times(8, 5, noise=NOISE, seed=100 + seed, **plants), NODES)
            truth = [NODES[k] for k in plants.get("slow_nodes", {})] + \
                [f"{NODES[min(pair)]} - {NODES[max(pair)]}" for pair in plants.get("slow_links", {})]
            named = [line.split(":")[0] for line in found.named()]
            wrong += sorted(named) != sorted(truth)
            print(f"  {kind:9} x{factor:<4} {', '.join(truth) or 'nothing':16} -> "
                  f"{'; '.join(found.named()) or 'nothing'}")
    print(f"  {wrong} of 20 named something else than was planted")
    print("groups of nodes that share a switch, 8 nodes, 5 repetitions: planted -> found")
    missed = 0
    for seed in range(5):
        leaves = np.random.default_rng(200 + seed).permutation([0, 0, 0, 0, 1, 1, 1, 1])
        found = find_groups(syn.pair_times(8, 5, noise=NOISE, groups=leaves, across=1.4, seed=200 + seed), NODES)
        truth = [[NODES[k] for k in range(8) if leaves[k] == leaf]
                 for leaf in sorted(set(leaves), key=list(leaves).index)]
        missed += found.groups != sorted(truth, key=lambda group: NODES.index(group[0]))
        # A link across the leaves 1.3 times as slow besides: named beyond the crossing, and nothing else.
        a, b = truth[0][0], truth[1][0]
        link = (NODES.index(a), NODES.index(b))
        beyond = find_slow_nodes_and_links(syn.pair_times(8, 5, noise=NOISE, groups=leaves, across=1.4,
                                                          slow_links={link: 1.3}, seed=200 + seed),
                                           NODES, groups=found.groups)
        named = [line.split(":")[0] for line in beyond.named()]
        missed += named != [f"{NODES[min(link)]} - {NODES[max(link)]}"]
        print(f"  two leaves x1.4 {' | '.join(' '.join(group) for group in truth)} -> {found.named()}; "
              f"{a} - {b} x1.3 besides -> {'; '.join(beyond.named()) or 'nothing'}")
    print(f"  {missed} of 10 found other groups than were planted or named other than the planted link")
    return wrong + missed


def measured_pair_times(workspace: Path, faults: list, scratch: Path, topology: dict | None = None,
                        size: int = SIZE) -> np.ndarray:
    """(8, 8, LAUNCHES) seconds per message between the virtual nodes (one rank each), each launch's
    median over its samples."""
    installation = json.loads((workspace / "build" / "envs" / LIBRARY / "library.json").read_text())
    build = json.loads((workspace / "build" / "kernels" / LIBRARY / "build.json").read_text())
    placement = Placement("8N1P", len(NODES), 1, NETWORK, emulate="namespaces", faults=faults, topology=topology)
    per_launch = []
    scratch.mkdir()
    for launch in range(LAUNCHES):
        output = scratch / f"launch{launch}.jsonl"
        with open(scratch / "console.log", "a") as log:
            run_launch(installation=installation, build=build, kernel=KERNEL_ARGS[0],
                       kernel_args=[*KERNEL_ARGS, "--sizes", str(size)],
                       placement=placement, library=LIBRARY, launch=launch, output=output, timeout_s=300, log=log)
        result = read_raw(output)
        if result.status != "ok":
            raise RuntimeError(f"{faults}: {result.status}: {result.launch.get('reason', '')}")
        if result.run["hosts"] != NODES:
            raise RuntimeError(f"ranks on {result.run['hosts']}, not one on each of {NODES}")
        per_launch.append(quiet_nanmedian(result.points[0].pair_times_s, axis=0))   # NaN: a node and itself
    return np.stack(per_launch, axis=-1)


def measured(workspace: Path, kinds=KINDS) -> int:
    reason = vnodes.unavailable_reason()
    if reason:
        print(f"all-pairs faults on virtual nodes: not run, {reason}")
        return 0
    print(f"all-pairs faults on 8 virtual nodes ({LIBRARY}, allpairs.isolated at 8 KiB, links {NETWORK['rate']} "
          f"shaped by {netem.shaper('namespaces')} (a planted path: by the wire processes), the fault {SLOW_RATE}; "
          f"{LAUNCHES} launches a plant): planted -> named; groups found")
    rng = np.random.default_rng(2026)
    wrong = 0
    with tempfile.TemporaryDirectory(prefix="commlens-pair-faults-") as scratch:
        for kind in kinds:
            for repetition in range(3 if kind == "two leaves" else 5):
                a, b = (int(k) for k in rng.choice(len(NODES), 2, replace=False))
                faults = {"slow node": [{"node": a, "rate": SLOW_RATE}],
                          "slow link": [{"link": [min(a, b), max(a, b)], "rate": SLOW_RATE}]}.get(kind, [])
                topology = LEAVES if kind == "two leaves" else None
                times = measured_pair_times(workspace, faults, Path(scratch) / f"{kind.replace(' ', '-')}{repetition}",
                                            topology, LEAF_SIZE if topology else SIZE)
                groups = find_groups(times, NODES)
                expected = [NODES[:4], NODES[4:]] if topology else [NODES]
                wrong += groups.groups != expected
                found = find_slow_nodes_and_links(times, NODES, groups=groups.for_links)
                if topology:     # nothing planted but the leaves: nothing named beyond them
                    wrong += bool(found.named())
                    print(f"  {kind:9} {' | '.join(' '.join(group) for group in expected)} -> {groups.named()}; "
                          f"beyond them {'; '.join(found.named()) or 'nothing'}", flush=True)
                    continue
                truth = [NODES[f["node"]] if "node" in f else f"{NODES[f['link'][0]]} - {NODES[f['link'][1]]}"
                         for f in faults]
                named = [line.split(":")[0] for line in found.named()]
                wrong += sorted(named) != truth
                print(f"  {kind:9} {', '.join(truth) or 'nothing':16} -> {'; '.join(found.named()) or 'nothing'}; "
                      f"{groups.named()}", flush=True)
    print(f"  {wrong} of {sum(3 if kind == 'two leaves' else 5 for kind in kinds)} plants: something else named or "
          "other groups found than were planted")
    return wrong


def main() -> int:
    # SIGTERM (or the end of what started this) stops the launch under way, which then removes what it made:
    # killed as it waited for the machine, a launch of this script left its scratch folder in /tmp.
    stop_when_told()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workspace", type=Path, default=REPO, help="where build/ holds the environments and kernels")
    parser.add_argument("--synthetic-only", action="store_true", help="no launches: the synthetic plants alone")
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=KINDS, help="which measured plants (default: all)")
    options = parser.parse_args()
    wrong = synthetic()
    if not options.synthetic_only:
        wrong += measured(options.workspace, options.kinds)
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
