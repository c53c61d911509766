"""`make validate` (compare): false calls and recall of commlens.analysis.compare, and of the
launches-until-decided rule (commlens.analysis.sequential), on synthetic campaigns run in rounds.

Each campaign: two library rows (baseline, candidate) x 5 kernels x 20 sizes (1 B .. 512 KiB) =
100 cells, run in rounds (round r runs launch r of every curve, in a random order per round), with
heavy-tailed samples (Student t, 3 degrees of freedom, 1% rare delays) and launch-to-launch shifts
of 3% common to a launch and 1% per point: the within-launch spread is a fraction of the
launch-to-launch one, as on real nodes. Drift, for every row alike: none; round 1 15% slower; or a
ramp that makes the last launch of the campaign 30% slower than the first.

- A/A: baseline and candidate are two draws of one truth; in a comparison with any `improved` or
  `regressed` cell every call is false, so the false discovery rate is the share of comparisons
  with a call. The paired test (by round) and the unpaired one on the same campaigns.
- Planted: the candidate is slower (even repetitions) or faster (odd ones) by a factor over
  1 KiB .. 16 KiB of every kernel (25 of the 100 cells), with the ramp drift. Recall: planted cells
  called in the right direction; FDR: the share of the calls that are wrong (unplanted cells or the
  wrong direction), averaged over the repetitions.
- Adaptive: rounds added one at a time from MIN_ROUNDS until sequential.after_round says stop, at
  most 5 and at most 8 rounds: recall, FDR and the mean rounds used, and the A/A false discovery
  rate under this optional stopping.

Rates are over repeated comparisons, so they carry sampling error: a rate of 5% over 60 comparisons
has a 95% interval of 1-14%. The A/A table runs 300 comparisons per row (interval about +-2.5 points
at 5%) and prints the interval beside each rate.
Run: .venv/bin/python benchmarks/compare_validation.py [--repeats N] [--planted-repeats N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from scipy import stats as scipy_stats

from commlens.analysis.sequential import after_round
from commlens.data import synthetic as syn

KERNELS = ("pingpong.send", "pingpong.ssend", "stream.uni", "multipair.stream", "collectives.bcast")
SIZES = syn.powers_of_two(1, 512 * 1024)
PLANTED = (1024, 16384)
IN_RANGE = (SIZES >= PLANTED[0]) & (SIZES <= PLANTED[1])
TRUTH = syn.GroundTruth(2e-6, 5e9, switches=(syn.Switch(16384, 4e-6, 8e9),))
NOISE = syn.Noise(relative=0.01, tail_df=3, outlier_fraction=0.01, outlier_scale=3,
                  launch_relative=0.03, launch_point_relative=0.01)
DRIFTS = {"none": syn.Drift(), "round 1 15% slower": syn.Drift(slow_round=1, slow_factor=1.15),
          "ramp to 30% slower": syn.Drift(ramp=0.3)}
EFFECTS = (0.05, 0.10, 0.30)
ROUNDS = (3, 5, 8)
MIN_ROUNDS, BUDGETS = 3, (5, 8)
CALLED = ("improved", "regressed")


def campaign(seed: int, rounds: int, factor: float = 1.0, drift: syn.Drift = DRIFTS["none"]):
    curves = {}
    for k, kernel in enumerate(KERNELS):
        for side, name in enumerate(("baseline", "candidate")):
            curve = syn.generate(SIZES, TRUTH, NOISE, n_samples=40, n_launches=rounds,
                                 seed=seed * 1000 + 10 * k + side)
            if name == "candidate" and factor != 1.0:
                curve = syn.with_change(curve, factor, *PLANTED)
            curves[name, "1N2P", kernel] = curve
    return syn.in_rounds(curves, drift, seed)


def scores(verdict: np.ndarray, slower: bool) -> tuple[float, float]:
    """(recall of the planted cells, false discovery proportion of the calls) of a kernel x size verdict."""
    right = (verdict == ("regressed" if slower else "improved")) & IN_RANGE
    called = np.isin(verdict, CALLED)
    return right.sum() / (len(KERNELS) * IN_RANGE.sum()), (called & ~right).sum() / max(called.sum(), 1)


def by_kernel(verdict) -> np.ndarray:
    return np.asarray(verdict.transpose("kernel", "size", ...).values).reshape(len(KERNELS), -1)


def rate(hits: int, n: int) -> str:
    """hits/n with its 95% interval (Clopper-Pearson)."""
    low = scipy_stats.beta.ppf(0.025, hits, n - hits + 1) if hits else 0.0
    high = scipy_stats.beta.ppf(0.975, hits + 1, n - hits) if hits < n else 1.0
    return f"{hits / n:5.1%} [{low:4.1%}, {high:5.1%}]"


def a_a(repeats: int) -> None:
    print(f"A/A with drift: {repeats} comparisons of two draws of one 100-cell campaign per row, min_effect 5%, "
          "FDR 5%: share of comparisons with any call (= false discovery rate), with its 95% interval")
    print(f"  {'drift':<20} {'rounds':>6} {'paired':>21} {'unpaired':>21}")
    for name, drift in DRIFTS.items():
        for rounds in (3, 5):
            alarms = {True: 0, False: 0}
            for seed in range(repeats):
                ds = campaign(seed, rounds, drift=drift)
                for paired in alarms:
                    verdict = ds.commlens.compare(baseline="baseline", candidate="candidate",
                                                   pair_by_round=paired)["verdict"]
                    alarms[paired] += bool(np.isin(verdict.values, CALLED).any())
            print(f"  {name:<20} {rounds:>6} {rate(alarms[True], repeats):>21} {rate(alarms[False], repeats):>21}")


def planted(repeats: int) -> None:
    print(f"Planted change over {PLANTED[0]} B .. {PLANTED[1]} B of each kernel (25 of 100 cells), slower and "
          f"faster in turn, ramp drift, paired test, {repeats} comparisons per row, min_effect 5%")
    print(f"  {'effect':>6} {'rounds':>6} {'recall':>7} {'FDR':>6}")
    for effect in EFFECTS:
        for rounds in ROUNDS:
            recall, fdp = [], []
            for seed in range(repeats):
                slower = seed % 2 == 0
                ds = campaign(10_000 + seed, rounds, 1 + effect if slower else 1 / (1 + effect), DRIFTS["ramp to 30% slower"])
                hit, false = scores(by_kernel(ds.commlens.compare(baseline="baseline", candidate="candidate")["verdict"]),
                                    slower)
                recall.append(hit)
                fdp.append(false)
            print(f"  {effect:>6.0%} {rounds:>6} {np.mean(recall):>7.1%} {np.mean(fdp):>6.1%}")


def adaptive(repeats: int, aa_repeats: int) -> None:
    print(f"Adaptive: rounds from {MIN_ROUNDS} until decided, at most 5 or 8 (alpha spending alpha t^2, "
          f"commlens.analysis.sequential), ramp drift, {repeats} campaigns per row, {aa_repeats} without a "
          f"change (its FDR: share of campaigns with any call, with its 95% interval)")
    print(f"  {'budget':>6} {'effect':>6} {'recall':>7} {'FDR':>20} {'mean rounds':>12} {'at max':>7}")
    for budget in BUDGETS:
        for effect in (0.0, *EFFECTS):
            recall, fdp, used = [], [], []
            for seed in range(repeats if effect else aa_repeats):
                slower = seed % 2 == 0
                factor = 1 + effect if slower else 1 / (1 + effect)
                full = campaign(20_000 + seed, budget, factor, DRIFTS["ramp to 30% slower"])
                for rounds in range(MIN_ROUNDS, budget + 1):
                    decision = after_round(full.isel(launch=slice(0, rounds)), "baseline", "candidate",
                                           min_rounds=MIN_ROUNDS, max_rounds=budget)
                    if not decision.more:
                        break
                verdict = by_kernel(decision.verdict)
                hit, false = scores(verdict, slower)
                recall.append(hit)
                fdp.append(false if effect else float(np.isin(verdict, CALLED).any()))
                used.append(decision.rounds)
            shown = f"{np.mean(recall):>7.1%}" if effect else f"{'-':>7}"
            false = f"{np.mean(fdp):>6.1%}" if effect else rate(int(np.sum(fdp)), len(fdp))
            print(f"  {budget:>6} {effect:>6.0%} {shown} {false:>20} {np.mean(used):>12.2f} "
                  f"{np.mean(np.array(used) == budget):>7.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=300, help="A/A comparisons per row")
    parser.add_argument("--planted-repeats", type=int, default=40, help="comparisons per planted or adaptive row")
    args = parser.parse_args()
    start = time.perf_counter()
    a_a(args.repeats)
    planted(args.planted_repeats)
    adaptive(args.planted_repeats, args.repeats)
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
