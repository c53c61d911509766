"""`make validate`: slow nodes and links named from all-pairs times with a planted fault, truth beside
what was found (synthetic, commbench.data.synthetic.pair_times: 8 nodes, 5 repetitions 20% apart, each measurement 5%;
no pair or node differs once and for all, so that the plant is the whole truth: tests/test_network_pairs.py
adds that). Five random plants of each kind.
Run: .venv/bin/python benchmarks/pair_faults.py
"""

from __future__ import annotations

import numpy as np

from commbench.analysis.network import find_slow_nodes_and_links
from commbench.data import synthetic as syn

NODES = [f"vnode{k}" for k in range(8)]
NOISE = syn.PairNoise(pair_relative=0, node_relative=0)


def main() -> int:
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
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
