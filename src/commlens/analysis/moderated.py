"""Launch-to-launch variance of every compared cell, pooled across the neighbouring sizes of its curve by
an empirical-Bayes prior (limma's moderated t, Smyth 2004), so that 3 to 5 launches give usable power.

The units of a curve (one library pair, placement and kernel over its sizes) are its launches: for the
paired test, the per-round log ratios; for the unpaired test, the launches of both rows, each less its
row's mean at that size. A unit's values share more than chance: a launch's process placement, binding
or frequency moves every size it measures alike. So a cell's noise is taken as

    unit value at size s = cell mean + a (one per unit, shared by its sizes) + e_s,

and the cell's estimate has variance (var a + var e_s) times its design factor (1/n paired,
1/n_b + 1/n_c unpaired). The two are estimated apart, because they are known to different precision:

- var e_s, from the residuals once each unit's shared shift is taken out, has about k (S - 1) / S
  degrees of freedom per cell (k residual degrees of freedom of the cell, S sizes in the curve), and
  these residuals are nearly independent across sizes. Each is moderated as limma does across genes:
  a scaled inverse chi-square prior (scale s0^2, d0 degrees of freedom) is fitted to them by the method
  of moments on log variances; the prior's scale follows the curve (a running mean over
  NEIGHBOURS sizes either side, as limma's `trend`), d0 is fitted over the whole comparison and never
  exceeds the degrees of freedom the neighbourhood itself holds. The posterior variance
  (d0 s0^2 + d s^2) / (d0 + d) then has d0 + d degrees of freedom.
- var a is shared by every size of a curve, so however many sizes a curve has, it is known with k
  degrees of freedom only: pooling it across sizes would count one launch's luck many times and call
  it an effect. It is moderated across curves instead (their units are other launches: the curves of
  one placement), without a trend, and robustly: the prior is the median and spread of their log
  variances, and a curve clearly noisier than the prior (clearly_noisier) keeps its own variance and
  degrees of freedom. A prior fitted to every curve alike shrank a kernel whose launches vary by 25%
  towards one whose vary by 1% and called its noise a change (false calls in 10-20% of comparisons
  where kernels differ in noise, against the 5% promised); one per kernel family left the 5 kernels
  of the validation's campaigns unmoderated, and found a 10% change at 5 rounds in 62% of its cells
  instead of 88%.

A cell's degrees of freedom combine the two by Welch-Satterthwaite.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import special, stats

from commlens.analysis.constants import MAD_TO_SD

# Sizes either side of a cell whose residual variances set its prior's scale.
NEIGHBOURS = 3
# At least this many variances (with degrees of freedom) before a prior is fitted to them.
MIN_FOR_PRIOR = 3
# The confidence of the upper bound of a curve's unit variance at which a cell's degrees of freedom are
# worked out (cell_variances).
UNIT_BOUND = 0.95
# The share of a group's curves of like noise that clearly_noisier sets apart by chance.
OUTLYING = 0.1
# The prior of a curve's unit variance counts at most this many times the curve's own degrees of freedom:
# other kernels' launches say less of this kernel's than its own do.
PRIOR_CAP = 1.0


def fit_prior(log_var: np.ndarray, dof: np.ndarray, local: bool = False,
              robust: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(scale s0^2, prior degrees of freedom d0) of a scaled inverse chi-square prior for variances whose
    logs are `log_var` (..., sizes) with `dof` degrees of freedom each (limma's fitFDist). local=True: the
    prior's log scale is the running mean over NEIGHBOURS sizes either side (limma's `trend`); else one
    scale for all. Either way d0 never exceeds what the values behind a scale are worth: the degrees of
    freedom of a variance whose log is as precise as their mean."""
    ok = np.isfinite(log_var) & (dof > 0)
    if ok.sum() < MIN_FOR_PRIOR:
        return np.full(log_var.shape, np.nan), np.zeros(log_var.shape)
    adjusted = np.where(ok, log_var - special.digamma(dof / 2) + np.log(dof / 2), np.nan)
    spread = np.where(ok, special.polygamma(1, np.where(ok, dof, 1.0) / 2), np.nan)    # var of each log variance
    if local:
        centre, used = running_mean(adjusted)
        spread_mean, _ = running_mean(spread)
        shrink = 1 - 1 / (2 * NEIGHBOURS + 1)      # a running mean takes about 1/w of each value's variation
    elif robust:
        # The median and the median absolute deviation (limma's robust fit, in spirit): one kernel far
        # noisier than the rest moves neither the prior's scale nor its spread, and clearly_noisier then
        # sets it apart instead of shrinking it.
        centre = np.full(log_var.shape, np.nanmedian(adjusted[ok]))
        used = np.full(log_var.shape, float(ok.sum()))
        spread_mean, shrink = np.full(log_var.shape, np.nanmean(spread[ok])), 1.0
        residual_sd = MAD_TO_SD * np.nanmedian(np.abs(adjusted[ok] - centre[ok]))
        excess = residual_sd ** 2 - np.nanmean(spread[ok])
        d0 = np.full(log_var.shape, np.inf if excess <= 0 else 2 * float(inverse_trigamma(np.array(excess))))
        return _scaled(centre, d0, spread_mean, used)
    else:
        centre, used = np.full(log_var.shape, np.nanmean(adjusted)), np.full(log_var.shape, float(ok.sum()))
        spread_mean, shrink = np.full(log_var.shape, np.nanmean(spread)), 1.0
    residual = (adjusted - centre)[ok]
    excess = np.mean(residual ** 2) / shrink - np.nanmean(spread[ok])
    d0 = np.full(log_var.shape, np.inf if excess <= 0 else 2 * float(inverse_trigamma(np.array(excess))))
    return _scaled(centre, d0, spread_mean, used)


def _scaled(centre: np.ndarray, d0: np.ndarray, spread_mean: np.ndarray, used: np.ndarray):
    """(scale, d0) of a prior whose adjusted log scale is `centre`, its d0 never above what the values behind
    the scale are worth (`used` of them, each log variance as spread as `spread_mean`)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        worth = 2 * inverse_trigamma(np.where(used > 0, spread_mean / used, np.nan))
    d0 = np.fmin(d0, np.nan_to_num(worth, nan=0.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        correction = np.where(np.isfinite(d0) & (d0 > 0), special.digamma(d0 / 2) - np.log(d0 / 2), 0.0)
    return np.exp(centre + correction), d0


def inverse_trigamma(value: np.ndarray) -> np.ndarray:
    """x with trigamma(x) = value, elementwise (limma's trigammaInverse: Newton's method from 0.5 + 1/value)."""
    value = np.asarray(value, float)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        x = 0.5 + 1 / value
        for _ in range(50):
            tri = special.polygamma(1, x)
            step = tri * (1 - tri / value) / special.polygamma(2, x)
            x = x + step
            if np.nanmax(np.abs(step / x), initial=0.0) < 1e-8:
                break
        return np.where(value > 1e7, 1 / np.sqrt(value), np.where(value < 1e-6, 1 / value, x))


def squeeze(var: np.ndarray, dof: np.ndarray, scale: np.ndarray, d0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Posterior variances and their degrees of freedom: (d0 s0^2 + d s^2) / (d0 + d), d0 + d; an
    infinite d0 gives the prior's scale itself, a zero d0 (no prior) the variance unchanged."""
    with np.errstate(invalid="ignore"):
        own = np.where(dof > 0, var, 0.0)
        posterior = np.where(np.isinf(d0), scale, (np.nan_to_num(d0 * scale) + dof * own) / (d0 + dof))
    posterior = np.where((d0 == 0) & (dof == 0), np.nan, posterior)
    return posterior, d0 + dof


def clearly_noisier(var: np.ndarray, dof: np.ndarray, scale: np.ndarray, d0: np.ndarray) -> np.ndarray:
    """Which variances lie above their prior's scale by more than chance allows (var / scale beyond the 95th
    percentile of F(dof, d0), as limma's robust fit sets apart genes whose variance the prior does not
    describe): curves of another noise than the rest of their group."""
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = var / scale
        bound = stats.f.ppf(1 - OUTLYING, np.maximum(dof, 1e-9), np.where(np.isfinite(d0) & (d0 > 0), d0, 1e9))
        return np.isfinite(ratio) & (dof > 0) & (d0 > 0) & (ratio > bound)


def running_mean(values: np.ndarray, half_width: int = NEIGHBOURS) -> tuple[np.ndarray, np.ndarray]:
    """Mean over the last axis within +-half_width places, NaN ignored, and how many values it used."""
    finite = np.isfinite(values)
    pad = [(0, 0)] * (values.ndim - 1) + [(half_width + 1, half_width)]
    total = np.cumsum(np.pad(np.where(finite, values, 0.0), pad), -1)
    counts = np.cumsum(np.pad(finite.astype(float), pad), -1)
    width = 2 * half_width + 1
    total, used = total[..., width:] - total[..., :-width], counts[..., width:] - counts[..., :-width]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(used > 0, total / used, np.nan), used


def cell_variances(units: np.ndarray, group: np.ndarray, moderate: bool = True,
                   noise_groups: np.ndarray | None = None) -> dict:
    """The launch-level variance of each cell of `units` (curves, sizes, units): NaN where a unit did not
    measure a cell; `group` (units,) numbers each unit's row (one group for paired units); `noise_groups`
    (curves,) numbers the curves of like noise, across which var a is moderated (None: all alike).
    Returns per cell `var` (of one unit: the variance of a + e_s), `dof`, and `k` (the cell's own residual
    degrees of freedom), as the module's docstring derives."""
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        present = np.isfinite(units)
        residual = np.zeros(units.shape)
        k = np.zeros(units.shape[:2])
        for g in np.unique(group):
            mine = group == g
            n = present[..., mine].sum(-1)
            mean = np.nanmean(units[..., mine], -1, keepdims=True)
            residual[..., mine] = np.where(present[..., mine], units[..., mine] - mean, 0.0)
            k += np.maximum(n - 1, 0)
        residual = np.where(present, residual, np.nan)
        sizes = (k > 0).sum(-1)                                          # per curve
        shift = np.nanmean(residual, axis=1, keepdims=True)              # each unit's shared shift
        shift = np.where(np.isfinite(shift) & (sizes > 1)[:, None, None], shift, 0.0)
        within = np.where(present, residual - shift, np.nan)
        factor = np.where(sizes > 1, (sizes - 1) / sizes, 1.0)[:, None]
        d_point = k * factor
        var_point = np.where(d_point > 0, np.nansum(within ** 2, -1) / d_point, np.nan)
        curve_k = np.max(k, axis=1)
        var_unit = np.where((curve_k > 0) & (sizes > 1), np.nansum(shift[:, 0, :] ** 2, -1) / curve_k, np.nan)

        if moderate:
            log_var = np.log(np.where(var_point > 0, var_point, np.nan))
            var_point, d_point = squeeze(var_point, d_point, *fit_prior(log_var, d_point, local=True))
            unit_log = np.log(np.where(var_unit > 0, var_unit, np.nan))
            curve_k = curve_k.astype(float)
            noise_groups = np.zeros(len(var_unit), int) if noise_groups is None else np.asarray(noise_groups)
            moderated, moderated_k = var_unit.copy(), curve_k.copy()
            noisier = np.zeros(var_unit.shape, bool)
            for label in np.unique(noise_groups):
                like = noise_groups == label
                scale, d0 = fit_prior(unit_log[like], curve_k[like], robust=True)
                d0 = np.fmin(d0, PRIOR_CAP * curve_k[like])
                moderated[like], moderated_k[like] = squeeze(var_unit[like], curve_k[like], scale, d0)
                noisier[like] = clearly_noisier(var_unit[like], curve_k[like], scale, d0)
            # A curve clearly noisier than its group's prior is not shrunk towards it: shrinking is what made
            # a noisy kernel's no-change comparisons call changes. It keeps its own variance and degrees of
            # freedom (its own t test); the others are moderated.
            var_unit = np.where(noisier, var_unit, moderated)
            curve_k = np.where(noisier, curve_k, moderated_k)
        # var_unit estimates var a + var e / S (a unit's shift carries its sizes' own noise), so a unit's
        # variance var a + var e is var_unit + (1 - 1/S) var_point: the two-way layout's (MS_units + (S - 1)
        # MS_residual) / S. It is never split into an estimate of var a on its own, which a small var_unit
        # would clip at zero and then count as known, with var_point's many degrees of freedom (half the
        # false calls of three-round comparisons came from curves whose two-degree-of-freedom var_unit
        # happened to read small); the degrees of freedom follow Welch-Satterthwaite for that sum.
        several = (sizes > 1)[:, None]
        point_part = np.where(several, 1 - 1 / np.maximum(sizes, 1)[:, None], 1.0) * var_point
        unit_part = np.where(several, np.nan_to_num(var_unit)[:, None], 0.0)
        total = unit_part + point_part
        curve_dof = np.broadcast_to(np.asarray(curve_k, float)[:, None], total.shape)
        # Welch-Satterthwaite with the weights estimated counts a unit part that read small by chance as
        # small for sure, and gives the sum the point part's many degrees of freedom: the dof are taken at
        # the unit part's upper bound (UNIT_BOUND) instead, as they would be were it that large.
        with np.errstate(invalid="ignore", divide="ignore"):
            upper = unit_part * curve_dof / stats.chi2.ppf(1 - UNIT_BOUND, np.maximum(curve_dof, 1e-9))
            upper = np.where(np.isfinite(upper), upper, unit_part)
            dof = (upper + point_part) ** 2 / (np.where(upper > 0, upper ** 2 / curve_dof, 0.0)
                                               + point_part ** 2 / d_point)
        dof = np.where(total > 0, dof, np.where(total == 0, np.inf, np.nan))
        return {"var": total, "dof": dof, "k": k}
