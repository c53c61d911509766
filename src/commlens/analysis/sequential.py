"""Launches until decided: after each round of a campaign, which compared cells are decided, and whether
another round could still decide one. A campaign calls `after_round` when a round ends and runs the
next round while `Decision.more` is True.

Looking after every round and stopping when the answer suits would inflate the error rate of a fixed
design (each look is another chance for noise to pass the bar). The rule here is a group-sequential
design with alpha spending (Lan and DeMets): over at most `max_rounds` rounds the false discovery rate
1 - confidence is spent across the looks at rounds min_rounds, min_rounds + 1, ..., by Kim and DeMets'
power family alpha * t^2, t = rounds / max_rounds. The look at n rounds runs compare at the confidence
1 - (its share of alpha) and calls what it calls; a cell called at one look stays called. The shares
add up to alpha, so by the union bound the chance that any look makes a false call when nothing
changed is at most alpha whatever the looks' dependence (exact boundaries would need the joint law of
moderated t statistics across looks, which has no closed form; the bound is conservative, and the
simulation in benchmarks/compare_validation.py measures by how much).

Why t^2: rounds are what costs, so a large change should end the campaign at an early look, and a
change near what the campaign is sized for should still be found at the last. Pocock-type spending
(alpha ln(1 + (e - 1) t)) spends 71% of alpha at look 3 of 5 and tests the last at 0.6% (of 5%): in the
simulation (10% change, 3% launch-to-launch noise, 3 to 5 rounds) it found 78% of the changed cells,
t^2 85%, with the same mean rounds (4.9) and no more false calls; O'Brien-Fleming-type spending keeps
almost all of alpha for the last look, so early looks would decide next to nothing. Why not an
anytime-valid confidence sequence: it must hold at every number of rounds, which at 3 to 12 launches
makes it far wider than a spending plan over a known, small number of looks.

A cell is decided when a look calls it improved or regressed, or shows it unchanged (its interval at
that look's confidence inside +-min_effect). An undecided cell could still be decided when, were the
rounds still to come to go on as the rounds so far did (the current trend), the last look would call
it with probability at least `futility_power` (its conditional power): cells that cannot get there in
the remaining budget stop asking for rounds. (Assuming instead that the rounds to come show a change
of at least min_effect kept most unchanged cells asking until the budget ended.) This futility rule is
non-binding: it can only stop a campaign sooner, never add a call.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import xarray as xr
from scipy import stats as scipy_stats

from commlens.analysis.compare import within

UNDECIDED = "undecided"
FUTILITY_POWER = 0.2
# Kim and DeMets' power family alpha * t^rho; see the module's docstring for why 2.
SPENDING_POWER = 2


def spent(rounds: int, max_rounds: int, alpha: float) -> float:
    """The part of alpha spent by the look at `rounds` of at most `max_rounds` (alpha t^SPENDING_POWER)."""
    return alpha * (min(rounds, max_rounds) / max_rounds) ** SPENDING_POWER


def look_levels(min_rounds: int, max_rounds: int, alpha: float) -> dict[int, float]:
    """{rounds: the false discovery rate its look tests at}; they add up to alpha."""
    levels, before = {}, 0.0
    for rounds in range(min_rounds, max_rounds + 1):
        levels[rounds] = spent(rounds, max_rounds, alpha) - before
        before = spent(rounds, max_rounds, alpha)
    return levels


@dataclass
class Decision:
    """Where a comparison stands after `rounds` rounds."""

    rounds: int
    verdict: xr.DataArray      # improved / regressed / unchanged (decided) or undecided, per cell
    decided_at: xr.DataArray   # the rounds at which each cell was decided (0: not yet)
    ratio: xr.DataArray        # at the deciding look, or the latest one
    could_reach: xr.DataArray  # undecided cells that another round could still decide
    more: bool                 # run another round
    reason: str
    # compare's result with each cell as the look that decided it saw it (the latest look for the
    # undecided, whose verdict is then that look's: inconclusive, or why it could not be tested).
    result: xr.Dataset | None = None


def after_round(ds: xr.Dataset, baseline: str, candidate: str, *, min_rounds: int = 3, max_rounds: int = 8,
                dim: str | None = None, min_effect: float = 0.05, confidence: float = 0.95,
                futility_power: float = FUTILITY_POWER) -> Decision:
    """The decision after the rounds `ds` holds (its `round` variable: the largest round that ran on
    either row, plus one) for candidate against baseline (two rows of `dim`, as compare's `within`)."""
    if "round" not in ds:
        raise ValueError("after_round: the dataset has no `round` variable (a campaign that ran in rounds)")
    if not 1 <= min_rounds <= max_rounds:
        raise ValueError(f"after_round: need 1 <= min_rounds <= max_rounds; got {min_rounds}, {max_rounds}")
    rounds = int(ds["round"].max()) + 1
    alpha = 1 - confidence
    levels = look_levels(min_rounds, max_rounds, alpha)
    verdict = ratio = decided_at = result = None
    looks = {}
    for look in range(min_rounds, min(rounds, max_rounds) + 1):
        result = looks[look] = within(_first_rounds(ds, look), baseline, candidate, dim=dim,
                                      min_effect=min_effect, confidence=1 - levels[look])
        if verdict is None:
            verdict = xr.full_like(result["verdict"], UNDECIDED, dtype=object)
            ratio, decided_at = result["ratio"].copy(), xr.zeros_like(result["ratio"], dtype=int)
        kept = verdict != UNDECIDED
        new = ~kept & result["verdict"].isin(["improved", "regressed", "unchanged"])
        ratio = ratio.where(kept, result["ratio"])
        verdict = verdict.where(~new, result["verdict"])
        decided_at = decided_at.where(~new, look)
    if result is None:
        empty = xr.DataArray(np.array([], dtype=object))
        return Decision(rounds, empty, empty, empty, empty, True, f"{rounds} of at least {min_rounds} rounds")
    undecided = (verdict == UNDECIDED) & result["verdict"].isin(["inconclusive"])
    reach = undecided & _could_reach(result, rounds, max_rounds, min_effect, levels[max_rounds], futility_power)
    counts = {name: int((verdict == name).sum()) for name in ("improved", "regressed", "unchanged")}
    summary = ", ".join(f"{n} {name}" for name, n in counts.items() if n) or "nothing decided"
    if rounds >= max_rounds:
        more, reason = False, f"the budget of {max_rounds} rounds is spent ({summary})"
    elif not reach.any():
        more, reason = False, f"decided after {rounds} rounds: {summary}; no undecided cell could still reach " \
                              f"{min_effect:.0%}"
    else:
        more, reason = True, f"{int(reach.sum())} undecided cells could still reach {min_effect:.0%} ({summary})"
    return Decision(rounds, verdict.astype(str), decided_at, ratio, reach, more, reason,
                    _as_decided(looks, verdict, decided_at, alpha, levels, max_rounds))


def _as_decided(looks: dict[int, xr.Dataset], verdict: xr.DataArray, decided_at: xr.DataArray,
                alpha: float, levels: dict[int, float], max_rounds: int) -> xr.Dataset:
    """One compare result: each cell from the look that decided it, else from the latest look."""
    last = max(looks)
    merged = looks[last].copy()
    chosen = decided_at.where(decided_at > 0, last)
    for look, result in looks.items():
        if look != last:
            for name in merged.data_vars:
                merged[name] = merged[name].where(chosen != look, result[name])
    merged["verdict"] = verdict.where(verdict != UNDECIDED, looks[last]["verdict"]).astype(str)
    merged["decided_at"] = decided_at.assign_attrs(units="1", long_name="rounds at the look that decided the "
                                                                        "cell (0: undecided)")
    shares = ", ".join(f"{levels[look]:.2g} after {look}" for look in sorted(looks))
    merged.attrs.update(
        confidence=1 - alpha,
        multiple_testing=f"launches until decided: Benjamini-Hochberg at each look, the false discovery rate "
                         f"{alpha:g} spent over the looks as {alpha:g} (rounds/{max_rounds})^{SPENDING_POWER} "
                         f"({shares} rounds); a cell keeps the verdict of the look that decided it")
    return merged


def _first_rounds(ds: xr.Dataset, rounds: int) -> xr.Dataset:
    """`ds` as it stood after `rounds` rounds: launches of later rounds count as not run."""
    later = ds["round"] >= rounds
    return ds.assign(sample_count=ds["sample_count"].where(~later, 0),
                     round=ds["round"].where(~later, -1))


def _could_reach(result: xr.Dataset, rounds: int, max_rounds: int, min_effect: float, last_level: float,
                 power: float) -> xr.DataArray:
    """Per cell: the conditional power of the last look, were the rounds to come to go on as the rounds
    so far did, is at least `power` (see the module's docstring)."""
    estimate = np.log(result["ratio"])
    critical = xr.apply_ufunc(scipy_stats.t.ppf, 0.5 + result.attrs["confidence"] / 2, result["dof"])
    se = np.log(result["ratio_high"] / result["ratio_low"]) / (2 * critical)
    final_mean = estimate          # the current trend: the rounds to come go on as these did
    final_sd = se * np.sqrt(rounds * (max_rounds - rounds)) / max_rounds
    threshold = np.maximum(np.log1p(min_effect),
                           NormalDist().inv_cdf(1 - last_level / 2) * se * np.sqrt(rounds / max_rounds))
    with np.errstate(invalid="ignore", divide="ignore"):
        reach = (xr.apply_ufunc(scipy_stats.norm.sf, (threshold - final_mean) / final_sd)
                 + xr.apply_ufunc(scipy_stats.norm.cdf, (-threshold - final_mean) / final_sd))
    return (reach >= power).fillna(False)
