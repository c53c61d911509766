"""`make validate` (compare): false calls and recall of commbench.analysis.compare on synthetic campaigns.

Each campaign: two library rows (baseline, candidate) x 5 kernels x 20 sizes (1 B .. 512 KiB) =
100 cells, with heavy-tailed samples (Student t, 3 degrees of freedom, 1% rare delays),
launch-to-launch shifts of 3% common to a launch and 1% per point: the within-launch spread is a
fraction of the launch-to-launch one, as on real nodes.

- A/A: baseline and candidate are two draws of one truth; a comparison with any `improved` or
  `regressed` cell is a false alarm. 100 comparisons per launch count.
- Planted: the candidate is slower (even repetitions) or faster (odd ones) by a factor over
  1 KiB .. 16 KiB of every kernel (25 of the 100 cells). Recall: planted cells called in the right
  direction; false discovery rate: the share of the calls that are wrong (unplanted cells or the
  wrong direction), averaged over the repetitions; range: the share of kernels whose changed
  ranges are exactly the planted one.
Run: .venv/bin/python benchmarks/compare_validation.py [--repeats N]
"""

from __future__ import annotations

import argparse

import numpy as np

from commbench.data import synthetic as syn
from commbench.analysis.ranges import changed_ranges

KERNELS = ("pingpong.send", "pingpong.ssend", "stream.uni", "multipair.stream", "collectives.bcast")
SIZES = syn.powers_of_two(1, 512 * 1024)
PLANTED = (1024, 16384)
TRUTH = syn.GroundTruth(2e-6, 5e9, switches=(syn.Switch(16384, 4e-6, 8e9),))
NOISE = syn.Noise(relative=0.01, tail_df=3, outlier_fraction=0.01, outlier_scale=3,
                  launch_relative=0.03, launch_point_relative=0.01)
EFFECTS = (0.03, 0.05, 0.10, 0.30, 1.0)
LAUNCHES = (1, 3, 5)


def campaign(seed: int, launches: int, factor: float = 1.0):
    curves = {}
    for k, kernel in enumerate(KERNELS):
        for side, name in enumerate(("baseline", "candidate")):
            curve = syn.generate(SIZES, TRUTH, NOISE, n_samples=40, n_launches=launches,
                                 seed=seed * 1000 + 10 * k + side)
            if name == "candidate" and factor != 1.0:
                curve = syn.with_change(curve, factor, *PLANTED)
            curves[name, "1N2P", kernel] = curve
    return syn.campaign_dataset(curves)


def a_a(repeats: int) -> None:
    print(f"A/A: {repeats} comparisons of two draws of one 100-cell campaign, min_effect 5%, FDR 5%")
    print(f"  {'launches':>8} {'false alarms':>13} {'false cells':>12} {'unchanged':>10} {'inconclusive':>13}")
    for launches in LAUNCHES:
        alarms = false_cells = unchanged = inconclusive = 0
        for seed in range(repeats):
            verdict = campaign(seed, launches).commbench.compare(baseline="baseline", candidate="candidate")["verdict"]
            called = int(np.isin(verdict.values, ("improved", "regressed")).sum())
            alarms += called > 0
            false_cells += called
            unchanged += int((verdict.values == "unchanged").sum())
            inconclusive += int((verdict.values == "inconclusive").sum())
        cells = repeats * 100
        print(f"  {launches:>8} {alarms:>9} /{repeats:<3} {false_cells:>7} /{cells:<4} {unchanged / cells:>10.1%} "
              f"{inconclusive / cells:>13.1%}")


def planted(repeats: int) -> None:
    print(f"Planted change over {PLANTED[0]} B .. {PLANTED[1]} B of each kernel (25 of 100 cells), slower and "
          f"faster in turn, {repeats} comparisons per row, min_effect 5%")
    print(f"  {'effect':>6} {'launches':>8} {'recall':>7} {'FDR':>6} {'range exact':>12}")
    in_range = (SIZES >= PLANTED[0]) & (SIZES <= PLANTED[1])
    for effect in EFFECTS:
        for launches in LAUNCHES:
            hits = wrong = calls = exact = 0
            fdp = []
            for seed in range(repeats):
                slower = seed % 2 == 0
                factor = 1 + effect if slower else 1 / (1 + effect)
                result = campaign(10_000 + seed, launches, factor).commbench.compare(baseline="baseline",
                                                                                     candidate="candidate")
                verdict = result["verdict"].transpose("kernel", "size", ...).values.reshape(len(KERNELS), -1)
                right = "regressed" if slower else "improved"
                called = np.isin(verdict, ("improved", "regressed"))
                correct = (verdict == right) & in_range
                hits += int(correct.sum())
                wrong_here = int((called & ~correct).sum())
                wrong += wrong_here
                calls += int(called.sum())
                fdp.append(wrong_here / max(int(called.sum()), 1))
                ranges = changed_ranges(result)
                exact += sum(1 for kernel in KERNELS if [(r.size_from, r.size_to) for r in
                                                         ranges[ranges["kernel"] == kernel].itertuples()] == [PLANTED])
            planted_cells = repeats * len(KERNELS) * int(in_range.sum())
            print(f"  {effect:>6.0%} {launches:>8} {hits / planted_cells:>7.1%} {np.mean(fdp):>6.1%} "
                  f"{exact / (repeats * len(KERNELS)):>12.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=100, help="A/A comparisons per launch count")
    parser.add_argument("--planted-repeats", type=int, default=20, help="comparisons per planted row")
    args = parser.parse_args()
    a_a(args.repeats)
    planted(args.planted_repeats)


if __name__ == "__main__":
    main()
