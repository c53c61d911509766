"""`make validate` (compare): false calls, recall and the coverage of the printed intervals of
commlens.analysis.compare, and of the launches-until-decided rule (commlens.analysis.sequential), on
synthetic campaigns shaped like real ones.

Each campaign: two library rows (baseline, candidate) x 5 kernels x 20 sizes (1 B .. 512 KiB) =
100 cells, run in rounds (round r runs launch r of every curve, in a random order per round), with the
noise of one of the shapes real machines show:

- equal: heavy-tailed samples (Student t, 3 degrees of freedom, 1% rare delays), launch-to-launch
  shifts of 3% common to a launch and 1% per point, alike for every kernel;
- by kernel: the same, with the launch shift 1%, 4%, 8%, 15% and 25% by kernel (and its per-point part a
  third of that: a kernel whose launches vary is noisy at every size);
- slow node: one launch in six runs 1.4 times slower at every size (a noisy neighbour, a slow node);
- two modes: each launch settles at one of two speeds 1.65 times apart at every size, the other one in
  a fifth of launches (Open MPI's launches between two virtual nodes on this host: 19 of 104 fast);
- autocorrelated: the samples of a point follow an AR(1) with lag-one correlation 0.9;
- heavy tails: t with 1.5 degrees of freedom and 5% delays of ten times the time;
- drift: the equal shape, with every launch of the second round 15% slower (another job for a while),
  which pairing by round takes out.

Per shape and number of rounds (2, 3, 5):

- no change: the candidate is a second draw of the baseline's truth; the share of campaigns with any
  call (improved, regressed, faster or slower) is the false discovery rate of the comparison (every
  call is false), printed with its 95% interval (Clopper-Pearson);
- 10% and 20%: the candidate slower (even repetitions) or faster (odd ones) by that factor over
  1 KiB .. 16 KiB of every kernel (25 of the 100 cells); recall is the share of those cells called in
  the right direction (regressed/slower, improved/faster);
- coverage: one less the false coverage rate, the mean over campaigns (the three designs together) of
  the share of a campaign's called cells whose printed interval misses the true ratio (1 outside the
  planted range; a campaign with no call misses none): what Benjamini and Yekutieli's intervals promise,
  at least 95%; and the share of every tested cell's interval that holds the truth;
- contradictions: cells whose verdict disagrees with their printed interval, by the rules the report
  states (regressed: the interval above 1 + min_effect; improved: below 1 / (1 + min_effect); slower
  or faster: above or below 1, not beyond the margin; unchanged: inside the margin around 1;
  inconclusive: holding 1 and reaching past the margin). It must be 0.

Then the launches-until-decided rule against a fixed design of the same maximum, and history's change
points over reruns that each shift every curve by 3% (before the rerun variance was estimated, every such
history of 2-5 reruns reported a change).
Run: .venv/bin/python benchmarks/compare_validation.py [--repeats N] [--planted-repeats N] [--quick]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats as scipy_stats

from commlens.analysis import changepoints
from commlens.analysis.sequential import after_round
from commlens.data import synthetic as syn

KERNELS = ("pingpong.send", "pingpong.ssend", "stream.uni", "multipair.stream", "collectives.bcast")
SIZES = syn.powers_of_two(1, 512 * 1024)
PLANTED = (1024, 16384)
IN_RANGE = (SIZES >= PLANTED[0]) & (SIZES <= PLANTED[1])
TRUTH = syn.GroundTruth(2e-6, 5e9, switches=(syn.Switch(16384, 4e-6, 8e9),))
NOISE = syn.Noise(relative=0.01, tail_df=3, outlier_fraction=0.01, outlier_scale=3,
                  launch_relative=0.03, launch_point_relative=0.01)
MIN_EFFECT = 0.05
CALLED = ("improved", "regressed", "faster", "slower")
SLOWER, FASTER = ("regressed", "slower"), ("improved", "faster")


@dataclass(frozen=True)
class Shape:
    """How a campaign's launches vary (see the module's docstring)."""

    noise: syn.Noise = NOISE
    launch_by_kernel: tuple[float, ...] | None = None
    modes: syn.Modes | None = None
    drift: syn.Drift = syn.Drift()


SHAPES = {
    "equal": Shape(),
    "by kernel": Shape(launch_by_kernel=(0.01, 0.04, 0.08, 0.15, 0.25)),
    "slow node": Shape(modes=syn.Modes(probability=1 / 6, factor=1.4)),
    "two modes": Shape(modes=syn.Modes(probability=0.2, factor=1.65)),
    "autocorrelated": Shape(noise=replace(NOISE, autocorrelation=0.9)),
    "heavy tails": Shape(noise=replace(NOISE, tail_df=1.5, outlier_fraction=0.05, outlier_scale=10)),
    "drift": Shape(drift=syn.Drift(slow_round=1, slow_factor=1.15)),
}
ROUNDS = (2, 3, 5)


def campaign(seed: int, rounds: int, shape: Shape = SHAPES["equal"], factor: float = 1.0):
    curves = {}
    for k, kernel in enumerate(KERNELS):
        noise = shape.noise if shape.launch_by_kernel is None else replace(
            shape.noise, launch_relative=shape.launch_by_kernel[k],
            launch_point_relative=shape.launch_by_kernel[k] * NOISE.launch_point_relative / NOISE.launch_relative)
        for side, name in enumerate(("baseline", "candidate")):
            curve = syn.generate(SIZES, TRUTH, noise, n_samples=40, n_launches=rounds,
                                 seed=seed * 1000 + 10 * k + side)
            if shape.modes is not None:
                curve, _ = syn.with_modes(curve, shape.modes, seed=seed * 1000 + 10 * k + side + 500)
            if name == "candidate" and factor != 1.0:
                curve = syn.with_change(curve, factor, *PLANTED)
            curves[name, "1N2P", kernel] = curve
    return syn.in_rounds(curves, shape.drift, seed)


def by_kernel(values) -> np.ndarray:
    return np.asarray(values.transpose("kernel", "size", ...).values).reshape(len(KERNELS), -1)


def contradictions(result) -> int:
    """Tested cells whose verdict disagrees with their printed interval (the rules in the module's docstring),
    written out here apart from compare's own code."""
    lo, hi = by_kernel(result["ratio_low"]), by_kernel(result["ratio_high"])
    verdict, basis = by_kernel(result["verdict"]), by_kernel(result["basis"])
    up, down = 1 + MIN_EFFECT, 1 / (1 + MIN_EFFECT)
    expected = np.full(verdict.shape, "inconclusive", dtype=object)
    expected[(lo >= down) & (hi <= up)] = "unchanged"
    expected[(lo > 1) & (lo <= up)] = "slower"
    expected[(hi < 1) & (hi >= down)] = "faster"
    expected[lo > up] = "regressed"
    expected[hi < down] = "improved"
    tested = basis == "launches"
    return int((tested & (verdict != expected)).sum())


def rate(hits: int, n: int) -> str:
    """hits/n with its 95% interval (Clopper-Pearson)."""
    low = scipy_stats.beta.ppf(0.025, hits, n - hits + 1) if hits else 0.0
    high = scipy_stats.beta.ppf(0.975, hits + 1, n - hits) if hits < n else 1.0
    return f"{hits / n:5.1%} [{low:4.1%}, {high:5.1%}]"


@dataclass
class Tally:
    """What a row of the table counts."""

    campaigns: int = 0
    with_call: int = 0
    contradictions: int = 0
    planted: int = 0
    recalled: int = 0
    called: int = 0
    false_coverage: float = 0.0     # summed over campaigns: the share of its called cells' intervals that miss
    tested: int = 0
    tested_cover: int = 0

    def add(self, result, factor: float) -> None:
        verdict = by_kernel(result["verdict"])
        lo, hi = by_kernel(result["ratio_low"]), by_kernel(result["ratio_high"])
        tested = by_kernel(result["basis"]) == "launches"
        truth = np.where(IN_RANGE[None, :], factor, 1.0)
        covers = (lo <= truth) & (truth <= hi)
        called = np.isin(verdict, CALLED)
        self.campaigns += 1
        self.contradictions += contradictions(result)
        self.called += int(called.sum())
        self.false_coverage += (called & ~covers).sum() / max(int(called.sum()), 1)
        self.tested += int(tested.sum())
        self.tested_cover += int((tested & covers).sum())
        if factor == 1.0:
            self.with_call += bool(called.any())
        else:
            right = np.isin(verdict, SLOWER if factor > 1 else FASTER) & IN_RANGE[None, :]
            self.planted += len(KERNELS) * int(IN_RANGE.sum())
            self.recalled += int(right.sum())


def compared(ds):
    return ds.commlens.compare(baseline="baseline", candidate="candidate", min_effect=MIN_EFFECT)


def fixed_designs(repeats: int, planted_repeats: int, shapes: dict) -> None:
    print(f"Fixed designs: {repeats} campaigns without a change and {planted_repeats} with each change per row; "
          f"min_effect {MIN_EFFECT:.0%}, false discovery rate 5%, paired by round")
    print(f"  {'shape':<15} {'rounds':>6} {'no change: any call':>23} {'recall 10%':>10} {'recall 20%':>10} "
          f"{'called cover':>12} {'tested cover':>12} {'contradict':>10}")
    for name, shape in shapes.items():
        for rounds in ROUNDS:
            tally = Tally()
            for seed in range(repeats):
                tally.add(compared(campaign(seed, rounds, shape)), 1.0)
            recall = {}
            for effect in (0.10, 0.20):
                hits = Tally()
                for seed in range(planted_repeats):
                    factor = 1 + effect if seed % 2 == 0 else 1 / (1 + effect)
                    hits.add(compared(campaign(10_000 + seed, rounds, shape, factor)), factor)
                recall[effect] = hits.recalled / hits.planted
                for field in ("campaigns", "contradictions", "called", "false_coverage", "tested", "tested_cover"):
                    setattr(tally, field, getattr(tally, field) + getattr(hits, field))
            called = f"{1 - tally.false_coverage / tally.campaigns:.1%}"
            print(f"  {name:<15} {rounds:>6} {rate(tally.with_call, repeats):>23} {recall[0.10]:>10.1%} "
                  f"{recall[0.20]:>10.1%} {called:>12} {tally.tested_cover / tally.tested:>12.1%} "
                  f"{tally.contradictions:>10}")


def adaptive(repeats: int, aa_repeats: int, budget: int = 8, min_rounds: int = 3) -> None:
    print(f"Launches until decided against a fixed design of {budget} rounds (shape: equal): rounds from "
          f"{min_rounds} until decided, at most {budget}; {repeats} campaigns per change, {aa_repeats} without")
    print(f"  {'effect':>6} {'fixed recall':>12} {'sequential recall':>17} {'mean rounds':>11} {'any call':>21}")
    for effect in (0.0, 0.05, 0.10, 0.20):
        recall_fixed, recall_seq, used, calls = [], [], [], 0
        n = repeats if effect else aa_repeats
        for seed in range(n):
            slower = seed % 2 == 0
            factor = 1 + effect if slower else 1 / (1 + effect)
            full = campaign(20_000 + seed, budget, factor=factor)
            fixed = by_kernel(compared(full)["verdict"])
            for rounds in range(min_rounds, budget + 1):
                decision = after_round(full.isel(launch=slice(0, rounds)), "baseline", "candidate",
                                       min_rounds=min_rounds, max_rounds=budget, min_effect=MIN_EFFECT)
                if not decision.more:
                    break
            sequential = by_kernel(decision.result["verdict"])   # each cell as its deciding (or last) look saw it
            used.append(decision.rounds)
            if effect:
                right = SLOWER if slower else FASTER
                planted = len(KERNELS) * IN_RANGE.sum()
                recall_fixed.append((np.isin(fixed, right) & IN_RANGE[None, :]).sum() / planted)
                recall_seq.append((np.isin(sequential, right) & IN_RANGE[None, :]).sum() / planted)
            else:
                calls += bool(np.isin(sequential, CALLED).any())
        shown = (f"{np.mean(recall_fixed):>12.1%} {np.mean(recall_seq):>17.1%}" if effect
                 else f"{'-':>12} {'-':>17}")
        print(f"  {effect:>6.0%} {shown} {np.mean(used):>11.2f} {rate(calls, n) if not effect else '-':>21}")


def histories(repeats: int) -> None:
    """History (commlens.analysis.changepoints): ten curves of 20 sizes, 3 launches a rerun with 1% launch
    noise, and each rerun shifting each curve by 3% (a reboot, a firmware update): the share of histories
    without a change that report one, and the share of a curve's cells in which a step at the last rerun
    is found."""
    print(f"History: {repeats} histories per row; 10 curves x 20 sizes, 3 launches (1% noise) a rerun, 3% "
          "between reruns")
    print(f"  {'reruns':>6} {'no change: any change':>23} {'step 1.2x found':>15} {'step 1.5x found':>15}")
    for reruns in (2, 3, 5, 8):
        called, found = 0, {1.2: [], 1.5: []}
        for seed in range(repeats):
            rng = np.random.default_rng(seed)
            curve = np.repeat(np.arange(10), 20)
            location = 0.03 * rng.standard_normal((10, reruns))[curve]
            launches = location[..., None] + 0.01 * rng.standard_normal((curve.size, reruns, 3))
            values, var = launches.mean(-1), launches.var(-1, ddof=1)
            count = np.full(values.shape, 3.0)
            fit = changepoints.segment(values, changepoints.noise_scale(values, var, count, curve))
            called += bool(fit.change.any())
            for factor in found:
                stepped = values.copy()
                stepped[curve == 0, -1] += np.log(factor)
                fit = changepoints.segment(stepped, changepoints.noise_scale(stepped, var, count, curve))
                found[factor].append(fit.change[curve == 0, -1].mean())
        print(f"  {reruns:>6} {rate(called, repeats):>23} {np.mean(found[1.2]):>15.0%} {np.mean(found[1.5]):>15.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=200, help="campaigns without a change per row")
    parser.add_argument("--planted-repeats", type=int, default=40, help="campaigns per change and row")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated shapes to run")
    parser.add_argument("--rounds", default="2,3,5", help="comma-separated rounds to run")
    parser.add_argument("--no-adaptive", action="store_true", help="skip launches until decided")
    parser.add_argument("--history-repeats", type=int, default=100, help="histories per number of reruns")
    args = parser.parse_args()
    global ROUNDS
    ROUNDS = tuple(int(r) for r in args.rounds.split(","))
    start = time.perf_counter()
    fixed_designs(args.repeats, args.planted_repeats, {name: SHAPES[name] for name in args.shapes.split(",")})
    if not args.no_adaptive:
        adaptive(args.planted_repeats, args.repeats)
    histories(args.history_repeats)
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
