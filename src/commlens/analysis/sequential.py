"""Launches until decided: after each round of a campaign, which compared cells are decided, and whether
another round could still decide one. A campaign calls `after_round` when a round ends and runs the
next round while `Decision.more` is True.

Looking after every round and stopping when the answer suits would inflate the error rate of a fixed
design (each look is another chance for noise to pass the bar). The rule here is a group-sequential
design with alpha spending (Lan and DeMets): over at most `max_rounds` rounds the false discovery rate
1 - confidence is spent across the looks at rounds min_rounds, min_rounds + 1, ..., by Kim and DeMets'
power family alpha * t^3, t = rounds / max_rounds. Each look's level is worked out from the looks'
joint law, not bounded by their sum: a cell's statistic at n rounds is a partial sum of its rounds'
ratios, so the statistics at successive looks are correlated (sqrt(n / m) between n and m rounds), and
the levels at which the chance that any look crosses, when nothing changed, is the amount spent are
found by simulating that law once per design (look_levels, cached). The union bound tested the last of 8
rounds at 1.2%; the joint law allows 3.8%, which is what lets the sequential design find what a fixed
design of its maximum finds. The look at n rounds runs compare at the confidence 1 - (its level) and
calls what it calls; a cell called at one look stays called.

Why t^3: rounds are what costs, so a large change should end the campaign at an early look, and a
change near what the campaign is sized for should still be found at the last (its level 3.8% of 5%).
Pocock-type spending spends most of alpha early and tests the last at a fraction of it; O'Brien-Fleming
type keeps almost all for the last look, so early looks would decide next to nothing. Why not an
anytime-valid confidence sequence: it must hold at every number of rounds, which at 3 to 12 launches
makes it far wider than a spending plan over a known, small number of looks.

A cell is decided when a look calls it (improved or regressed beyond the margin, faster or slower by
less or by an amount left open) or shows it unchanged (its interval at that look's level inside the
margin): more rounds would only narrow what the look said. An undecided cell could still be decided when, were the
rounds still to come to go on as the rounds so far did (the current trend), the last look would call
it with probability at least `futility_power` (its conditional power). The campaign goes on while those
cells' conditional powers add up to at least one more call (`FUTILITY_DECISIONS`); cells below
`futility_power` count for nothing: a hundred unchanged cells each with a small chance kept every
campaign at its maximum.
Where a compared curve's launches ran at levels far apart at every size (commlens.analysis.modes), the
campaign goes on whatever the futility rule says: more rounds tell a second mode from a slow launch, and a
replicated slow mode is then left out of the comparison. This futility rule is non-binding: it can only
stop a campaign sooner, never add a call.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import xarray as xr
from scipy import stats as scipy_stats

from commlens.analysis.compare import within

UNDECIDED = "undecided"
# What a look decides for good: a change beyond the margin, one of a known direction (its size under the
# margin or left open), or none.
DECIDED = ("improved", "regressed", "faster", "slower", "unchanged")
FUTILITY_POWER = 0.5
# The campaign goes on while the undecided cells' conditional powers add up to this many decisions.
FUTILITY_DECISIONS = 1.0
# Kim and DeMets' power family alpha * t^rho; see the module's docstring for why 3.
SPENDING_POWER = 3
# Paths of the looks' joint law simulated per design (look_levels): the level of a look from 2e5 paths is
# within 2% of itself.
LAW_PATHS = 200_000


def spent(rounds: int, max_rounds: int, alpha: float) -> float:
    """The part of alpha spent by the look at `rounds` of at most `max_rounds` (alpha t^SPENDING_POWER)."""
    return alpha * (min(rounds, max_rounds) / max_rounds) ** SPENDING_POWER


@functools.lru_cache(maxsize=64)
def look_levels(min_rounds: int, max_rounds: int, alpha: float) -> dict[int, float]:
    """{rounds: the two-sided level its look tests at}: the levels at which, for one cell whose rounds'
    log ratios are independent and alike, the chance that any look up to n rounds crosses when nothing
    changed is spent(n), from the looks' joint law simulated once (see the module's docstring)."""
    rng = np.random.default_rng(0)
    sums = np.cumsum(rng.standard_normal((LAW_PATHS, max_rounds)), axis=1)
    crossed = np.zeros(LAW_PATHS, bool)
    levels = {}
    for rounds in range(min_rounds, max_rounds + 1):
        z = np.abs(sums[:, rounds - 1]) / np.sqrt(rounds)
        more = int(round(spent(rounds, max_rounds, alpha) * LAW_PATHS)) - int(crossed.sum())
        remaining = np.sort(z[~crossed])[::-1]
        bound = remaining[more] if 0 < more < remaining.size else np.inf
        crossed |= z > bound
        levels[rounds] = float(2 * scipy_stats.norm.sf(bound)) if np.isfinite(bound) else 0.0
    return levels


@dataclass
class Decision:
    """Where a comparison stands after `rounds` rounds."""

    rounds: int
    verdict: xr.DataArray      # one of DECIDED, or undecided, per cell
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
    verdict: xr.DataArray | None = None
    ratio: xr.DataArray | None = None
    decided_at: xr.DataArray | None = None
    result: xr.Dataset | None = None
    looks = {}
    for look in range(min_rounds, min(rounds, max_rounds) + 1):
        result = looks[look] = within(_first_rounds(ds, look), baseline, candidate, dim=dim,
                                      min_effect=min_effect, confidence=1 - max(levels[look], 1e-12))
        if verdict is None or ratio is None or decided_at is None:     # the first look
            verdict = xr.full_like(result["verdict"], UNDECIDED, dtype=object)
            ratio, decided_at = result["ratio"].copy(), xr.zeros_like(result["ratio"], dtype=int)
        kept = verdict != UNDECIDED
        new = ~kept & result["verdict"].isin(DECIDED)
        ratio = ratio.where(kept, result["ratio"])
        verdict = verdict.where(~new, result["verdict"])
        decided_at = decided_at.where(~new, look)
    if result is None:
        empty = xr.DataArray(np.array([], dtype=object))
        return Decision(rounds, empty, empty, empty, empty, True, f"{rounds} of at least {min_rounds} rounds")
    assert verdict is not None and ratio is not None and decided_at is not None    # set at the first look
    undecided = (verdict == UNDECIDED) & result["verdict"].isin(["inconclusive"])
    power = conditional_power(result, rounds, max_rounds, min_effect, levels[max_rounds]).where(undecided, 0.0)
    reach = undecided & (power >= futility_power)
    expected = float(power.where(reach, 0.0).sum())
    counts = {name: int((verdict == name).sum()) for name in DECIDED}
    summary = ", ".join(f"{n} {name}" for name, n in counts.items() if n) or "nothing decided"
    moded = (result["baseline_modes"] != "").any() or (result["candidate_modes"] != "").any() \
        if "baseline_modes" in result else False
    if rounds >= max_rounds:
        more, reason = False, f"the budget of {max_rounds} rounds is spent ({summary})"
    elif moded and (verdict == UNDECIDED).any():
        # Launches far apart at every size: a second mode, or a slow launch; more rounds tell which, and let
        # a comparison leave a replicated slow mode out (commlens.analysis.compare).
        more, reason = True, (f"launches ran at different levels at every size: another round to tell modes "
                              f"from noise ({summary})")
    elif expected < FUTILITY_DECISIONS:
        more, reason = False, (f"decided after {rounds} rounds: {summary}; the undecided cells that could "
                               f"still be called would add {expected:.2g} calls by round {max_rounds}")
    else:
        more, reason = True, (f"{int(reach.sum())} undecided cells could still be called, about {expected:.2g} "
                              f"by round {max_rounds} ({summary})")
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
                         f"({shares} rounds: levels from the looks' joint law); a cell keeps the verdict of the "
                         f"look that decided it")
    return merged


def _first_rounds(ds: xr.Dataset, rounds: int) -> xr.Dataset:
    """`ds` as it stood after `rounds` rounds: launches of later rounds count as not run."""
    later = ds["round"] >= rounds
    return ds.assign(sample_count=ds["sample_count"].where(~later, 0),
                     round=ds["round"].where(~later, -1))


def conditional_power(result: xr.Dataset, rounds: int, max_rounds: int, min_effect: float,
                      last_level: float) -> xr.DataArray:
    """Per cell: the chance that the last look calls it (its interval there wholly above or below 1), were
    the rounds to come to go on as the rounds so far did (see the module's docstring). The standard error
    is read off the marginal interval."""
    estimate = np.log(result["ratio"])
    critical = xr.apply_ufunc(scipy_stats.t.ppf, 0.5 + result.attrs["confidence"] / 2, result["dof"])
    se = np.log(result["ratio_high_marginal"] / result["ratio_low_marginal"]) / (2 * critical)
    final_mean = estimate          # the current trend: the rounds to come go on as these did
    final_sd = se * np.sqrt(rounds * (max_rounds - rounds)) / max_rounds
    # Called at the last look means selected by its Benjamini-Hochberg procedure: a p value below the level
    # times the share of cells selected (as many as now, one at least), not below the level itself.
    selected, tested = result.attrs.get("selected", 0), max(result.attrs.get("tested", 1), 1)
    level = last_level * max(selected, 1) / tested
    threshold = NormalDist().inv_cdf(1 - level / 2) * se * np.sqrt(rounds / max_rounds)
    with np.errstate(invalid="ignore", divide="ignore"):
        power = (xr.apply_ufunc(scipy_stats.norm.sf, (threshold - final_mean) / final_sd)
                 + xr.apply_ufunc(scipy_stats.norm.cdf, (-threshold - final_mean) / final_sd))
    return power.fillna(0.0)
