"""How long the analysis takes on a campaign-sized dataset: one million samples.

2 libraries x 2 placements x 5 kernels x 50 sizes x 5 launches x 200 samples, synthetic
(commlens.data.synthetic) with switches, packets, alignment and spikes mixed in, so the
detectors do real work. Times each of ds.commlens.fit("hockney" | "piecewise" |
"packet") and ds.commlens.anomalies(), and their total; the target is under 10 s on
2 cores. Run: .venv/bin/python benchmarks/analysis_bench.py
"""

from __future__ import annotations

import time

import numpy as np

import commlens.analysis  # noqa: F401  (registers ds.commlens)
from commlens.data import synthetic as syn

LIBRARIES = ("lib-a", "lib-b")
PLACEMENTS = ("1N2P", "2N1P")
KERNELS = ("pingpong.send", "pingpong.ssend", "pingpong.isend", "stream.uni", "exchange.sendrecv")
N_SIZES, N_LAUNCHES, N_SAMPLES = 50, 5, 200
TARGET_S = 10.0


def curve_truth(index: int, sizes: np.ndarray) -> syn.GroundTruth:
    """A different mix of effects for each curve, all on its own grid."""
    latency, bandwidth = 1e-6 * (1 + index % 7), 2e9 * (1 + index % 5)
    switches = (syn.Switch(int(sizes[N_SIZES // 2]), 4 * latency, bandwidth * 1.5),) if index % 2 else ()
    packets = syn.Packets(1448, 66) if index % 5 == 0 else None
    alignment = syn.Alignment(64, 0.2 * latency) if index % 5 == 1 else None
    spikes = (syn.Spike(int(sizes[10]), latency),) if index % 3 == 0 else ()
    return syn.GroundTruth(latency, bandwidth, switches, packets, alignment, spikes)


def campaign():
    curves = {}
    grids = [syn.log_uniform(1, 4 * 2**20, N_SIZES, seed=1), syn.linear(64, 64 * N_SIZES, 64)]
    for index, key in enumerate((lib, p, k) for lib in LIBRARIES for p in PLACEMENTS for k in KERNELS):
        sizes = grids[index % 2]
        curves[key] = syn.generate(sizes, curve_truth(index, sizes), syn.Noise(0.01, launch_relative=0.005),
                                   n_samples=N_SAMPLES, n_launches=N_LAUNCHES, seed=index)
    return syn.campaign_dataset(curves)


def main() -> None:
    ds = campaign()
    samples = ds.sizes["sample"]
    print(f"dataset: {dict(ds['time'].sizes)}, {samples:,} samples")
    timings = {}
    for name, task in [("fit hockney", lambda: ds.commlens.fit("hockney")),
                       ("fit piecewise", lambda: ds.commlens.fit("piecewise")),
                       ("fit packet", lambda: ds.commlens.fit("packet")),
                       ("anomalies", lambda: ds.commlens.anomalies())]:
        start = time.perf_counter()
        result = task()
        timings[name] = time.perf_counter() - start
        detail = f"{len(result)} findings" if name == "anomalies" else f"{len(result.data_vars)} variables"
        print(f"{name:14s} {timings[name]:6.2f} s  ({detail})")
    total = sum(timings.values())
    verdict = "within" if total < TARGET_S else "OVER"
    print(f"{'total':14s} {total:6.2f} s  ({verdict} the {TARGET_S:g} s target)")


if __name__ == "__main__":
    main()
