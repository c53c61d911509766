"""Before/after: what changed between two sets of curves, where, by how much, and is it real.

`compare(baseline, candidate)` works cell by cell over the dims the two share (library where both
have it, placement, kernel, size). The experimental unit is the launch: a launch's samples share
its placement of memory, its process binding and whatever else ran on the machine, so samples
within a launch agree more than launches do, and a test that treated samples as independent
would call launch-to-launch noise an effect.

Per cell:

- Each launch contributes one value, its `statistic` (the median of its samples by default).
  The cell's location is the geometric mean of its launches' values (with one launch, that
  launch's value); `ratio` = candidate location / baseline location; `effect` = ratio - 1
  (times: below 0 is faster). A paired cell's ratio is the geometric mean of its per-round ratios.
- Several launches: where both rows ran in rounds (the dataset's `round`) and at least two rounds
  measured the cell on both sides, a paired t test on the per-round log ratio, which drift between
  rounds does not reach; otherwise an unpaired t test on the logarithms of the launch values (one
  launch on a side: the other side's launches give the variance). `paired` says which. Either way
  the launch variance is moderated across the neighbouring sizes of the curve (an empirical-Bayes
  prior, as limma's moderated t; see commlens.analysis.moderated), which gives 3 to 5 launches
  usable power.
- One launch on each side: nothing measures the launch-to-launch variation, so the interval and
  p value come from the samples alone (the launches' distribution-free median intervals) and are
  only a lower bound on the uncertainty; the cell is `inconclusive` unless the effect dwarfs the
  within-launch spread: |log ratio| above `one_launch_factor` times the larger launch's relative
  interquartile range, and above log(1 + one_launch_floor). Where a side has no within-launch
  spread either (one value per size, as imported suite outputs have), there is nothing to test:
  the ratio is given, with no interval and no p value, and the verdict `no spread: no verdict`.
  `basis` says which case a cell is.
- Many cells are tested at once: p values of the launch-level cells are adjusted by Benjamini-Hochberg
  (`q_value`), which controls the false discovery rate at 1 - confidence. One-launch cells stay out of
  that family: their p values come from the samples alone and would lend it discoveries it has not made.
- The interval printed beside a verdict is the one that decided it: every launch-level cell's interval
  is at the false coverage-rate level of Benjamini and Yekutieli (2005), 1 - R (1 - confidence) / m with
  R cells selected by the Benjamini-Hochberg procedure out of m tested (R at least 1), so that at most
  1 - confidence of the intervals shown beside calls miss their true ratio, and an interval excludes 1
  exactly where the procedure calls a change. The marginal intervals at `confidence` are kept as data
  (`ratio_low_marginal`, `ratio_high_marginal`).
- `verdict`, read off that interval against the margin [1 / (1 + min_effect), 1 + min_effect] around 1
  (symmetric as ratios are: 1.05 times slower and 1.05 times faster): `regressed` / `improved` where
  the whole interval lies beyond the margin (slower / faster by at least min_effect); `slower` /
  `faster` where it lies above / below 1 but not beyond the margin (a change, of a size the data do not
  show to matter, or under it); `unchanged` where it lies inside the margin and holds 1; `inconclusive`
  where it holds 1 and reaches past the margin; `missing` where either side has no data. One-launch
  cells are `regressed` / `improved` only where the effect dwarfs the within-launch spread (above) and
  their within-launch interval lies beyond the margin; otherwise `inconclusive`.
"""

from __future__ import annotations

import difflib
import itertools
import warnings
from typing import cast

import numpy as np
import xarray as xr
from scipy import stats as scipy_stats

from commlens.analysis.constants import normal_quantile
from commlens.analysis.modes import find_modes
from commlens.analysis.paired import by_round, paired_test, unpaired_test
from commlens.data.samples import MEDIAN_Z

NO_SPREAD = "no spread: no verdict"
VERDICTS = ("improved", "regressed", "faster", "slower", "unchanged", "inconclusive", NO_SPREAD, "missing")
# Verdicts that say the rows differ; `faster` and `slower` by less than the margin, or by an amount unsure.
CALLS = ("improved", "regressed", "faster", "slower")
COMPARABLE_STATISTICS = ("median", "mean", "min", "iqm")
BASES = ("launches", "one launch", "no spread", "none")
# One launch per side: the effect must exceed this many within-launch interquartile ranges
# (relative to the median), and this floor, before a verdict is given. Measured on a shared 2-core
# node (quick campaign, 3 launches, 92 points): the launches' medians of one point differed by up
# to 38%, 19 times that point's interquartile range; small messages differ by 20-50% between
# launches on busy nodes.
ONE_LAUNCH_FACTOR = 25.0
ONE_LAUNCH_FLOOR = 0.5
# Provenance that makes two datasets' numbers incomparable when it differs (warned, not refused).
PROVENANCE = ("hosts", "cpu_model", "os", "kernel_source_hash", "compiler_flags")


def compare(baseline: xr.Dataset, candidate: xr.Dataset, *, min_effect: float = 0.05,
            confidence: float = 0.95, statistic: str = "median",
            one_launch_factor: float = ONE_LAUNCH_FACTOR,
            one_launch_floor: float = ONE_LAUNCH_FLOOR, pair_by_round: bool = True) -> xr.Dataset:
    """Candidate against baseline, per cell of the dims they share; see the module's docstring.

    Both are campaign datasets (or selections of them) with the per-launch statistics
    (`sample_count`, `median`, ...) over a `launch` dim; cells are matched by label. pair_by_round=False
    never pairs launches (for two datasets whose rounds did not run at the same time).
    """
    if statistic not in COMPARABLE_STATISTICS:
        raise ValueError(f"statistic must be one of {', '.join(COMPARABLE_STATISTICS)}; got {statistic!r}")
    if not 0 < confidence < 1 or min_effect < 0:
        raise ValueError(f"confidence must be in (0, 1) and min_effect >= 0; got {confidence}, {min_effect}")
    base, cand = (_launch_values(ds, statistic) for ds in (baseline, candidate))
    dims = [str(dim) for dim in base["value"].dims if dim != "launch"]
    if sorted(dims) != sorted(str(d) for d in cand["value"].dims if d != "launch"):
        raise ValueError(f"baseline and candidate have different dims: {dims} against "
                         f"{[d for d in cand['value'].dims if d != 'launch']}")
    base, cand = xr.align(base.rename(launch="launch_b"), cand.rename(launch="launch_c"), join="inner",
                          exclude=["launch_b", "launch_c"])
    if any(base.sizes[d] == 0 for d in dims):
        empty = [d for d in dims if base.sizes[d] == 0]
        raise ValueError(f"baseline and candidate share no {', '.join(empty)} labels")
    cells = [d for d in dims if d != "size"] + (["size"] if "size" in dims else [])   # curves, then size
    pair = pair_by_round and "round" in base and "round" in cand
    arrays = _test(base.transpose(*cells, "launch_b"), cand.transpose(*cells, "launch_c"),
                   confidence, one_launch_factor, one_launch_floor, pair)
    alpha = 1 - confidence
    launches = arrays["basis"] == "launches"
    q_value = benjamini_hochberg(np.where(launches, arrays["p_value"], np.nan))
    tested, selected = int(launches.sum()), int((q_value <= alpha).sum())
    level = coverage_level(selected, tested, confidence)
    with np.errstate(invalid="ignore", over="ignore"):
        # One-launch cells: the samples' own (normal) interval at `confidence`, labelled as within one launch.
        critical = np.where(launches, scipy_stats.t.ppf(0.5 + level / 2, arrays["dof"]), normal_quantile(confidence))
        half = critical * arrays["se"]
        ratio_low, ratio_high = np.exp(arrays["diff"] - half), np.exp(arrays["diff"] + half)
    shown = launches | (arrays["basis"] == "one launch")
    ratio_low, ratio_high = np.where(shown, ratio_low, np.nan), np.where(shown, ratio_high, np.nan)
    effect = arrays["ratio"] - 1
    verdict = verdicts_from_intervals(ratio_low, ratio_high, min_effect)
    one = arrays["basis"] == "one launch"
    one_called = one & arrays["dwarfs"] & np.isin(verdict, ("improved", "regressed"))
    verdict = np.where(one & ~one_called, "inconclusive", verdict)
    verdict[arrays["basis"] == "no spread"] = NO_SPREAD
    verdict[arrays["basis"] == "none"] = "missing"
    coords = {name: coord for name, coord in base.coords.items()
              if not ({"launch_b", "launch_c"} & set(coord.dims))}
    out = xr.Dataset({
        "ratio": (cells, arrays["ratio"], {"units": "1", "long_name": f"candidate / baseline {statistic} time "
                                                                      "(geometric mean over launches)"}),
        "ratio_low": (cells, ratio_low, {"units": "1", "long_name": "low end of the interval the verdict was read "
                                                                 "off (false coverage-rate level, see attrs; within "
                                                                 "one launch where basis is one launch)"}),
        "ratio_high": (cells, ratio_high, {"units": "1", "long_name": "high end of that interval"}),
        "ratio_low_marginal": (cells, arrays["ratio_low"], {"units": "1", "long_name": f"{confidence:.0%} marginal "
                                                                                      "interval, low (no "
                                                                                      "multiplicity adjustment)"}),
        "ratio_high_marginal": (cells, arrays["ratio_high"], {"units": "1", "long_name": f"{confidence:.0%} marginal "
                                                                                        "interval, high"}),
        "effect": (cells, effect, {"units": "1", "long_name": "ratio - 1 (below 0: candidate faster)"}),
        "p_value": (cells, arrays["p_value"], {"units": "1", "long_name": "two-sided p value, no multiplicity "
                                                                          "adjustment"}),
        "q_value": (cells, q_value, {"units": "1", "long_name": "Benjamini-Hochberg adjusted p value over "
                                                                "the comparison's launch-level cells"}),
        "verdict": (cells, verdict.astype(str), {"long_name": " | ".join(VERDICTS)}),
        "basis": (cells, arrays["basis"].astype(str), {"long_name": "launches: launch-level test; one launch: "
                                                                   "within-launch spread only; no spread: one value "
                                                                   "a side, not tested; none: no data"}),
        "paired": (cells, arrays["paired"], {"long_name": "tested paired by round (True) or unpaired"}),
        "dof": (cells, arrays["dof"], {"units": "1", "long_name": "degrees of freedom of the (moderated) t test"}),
        "baseline_modes": (base["modes"].dims, base["modes"].values.astype(str),
                           {"long_name": "baseline launches that ran in a slow mode, and how much slower (empty: "
                                         "one mode); where each mode held two launches, the smaller is left out"}),
        "candidate_modes": (cand["modes"].dims, cand["modes"].values.astype(str),
                            {"long_name": "the same for the candidate"}),
        "baseline_launches": (cells, arrays["n_b"], {"units": "1"}),
        "candidate_launches": (cells, arrays["n_c"], {"units": "1"}),
    }, coords=coords)
    out.attrs = {
        "statistic": statistic, "min_effect": min_effect, "confidence": confidence,
        "one_launch_factor": one_launch_factor, "one_launch_floor": one_launch_floor,
        "multiple_testing": f"Benjamini-Hochberg false discovery rate at {alpha:g} over {tested} launch-level "
                            f"cells ({selected} selected); intervals at the false coverage-rate level "
                            f"{level:.4g} (Benjamini-Yekutieli)",
        "interval_level": level, "selected": selected, "tested": tested,
        "method": _method(arrays["basis"], arrays["paired"], statistic, one_launch_factor, one_launch_floor),
    }
    return out


def coverage_level(selected: int, tested: int, confidence: float) -> float:
    """The level of the intervals of a comparison whose Benjamini-Hochberg procedure selected `selected` of
    `tested` cells at false discovery rate 1 - confidence: Benjamini and Yekutieli's false coverage-rate
    level 1 - R (1 - confidence) / m, with R at least 1 (a comparison that selects nothing still shows
    intervals no narrower than those of one that selects one cell)."""
    if tested == 0:
        return confidence
    return 1 - max(selected, 1) * (1 - confidence) / tested


def verdicts_from_intervals(low: np.ndarray, high: np.ndarray, min_effect: float) -> np.ndarray:
    """Each interval's verdict against the margin [1 / (1 + min_effect), 1 + min_effect] (the module's
    docstring); NaN intervals are `inconclusive`."""
    low, high = np.asarray(low, float), np.asarray(high, float)
    up, down = 1 + min_effect, 1 / (1 + min_effect)
    verdict = np.full(low.shape, "inconclusive", dtype=object)
    with np.errstate(invalid="ignore"):
        verdict[(low >= down) & (high <= up)] = "unchanged"
        verdict[(low > 1) & (low <= up)] = "slower"
        verdict[(high < 1) & (high >= down)] = "faster"
        verdict[low > up] = "regressed"
        verdict[high < down] = "improved"
    return verdict


def _method(basis: np.ndarray, paired: np.ndarray, statistic: str, one_launch_factor: float,
            one_launch_floor: float) -> str:
    """How the cells were tested, naming only the cases that occurred (see the module's docstring)."""
    parts = []
    launches = basis == "launches"
    if (launches & paired).any():
        parts.append(f"paired t test by round on the per-round log ratio of each launch's {statistic} "
                     f"({int((launches & paired).sum())} cells)")
    if (launches & ~paired).any():
        parts.append(f"unpaired t test on the log of each launch's {statistic} ({int((launches & ~paired).sum())} "
                     "cells)")
    if launches.any():
        parts[-1] += (" (the launch is the experimental unit), its launch variance in two parts: each size's own, "
                      "moderated along the curve, and the launch's shift shared by every size, moderated across "
                      "the placement's curves, robustly, a curve clearly noisier than the rest keeping its own "
                      "(empirical Bayes, as limma; degrees of freedom at the shared part's upper bound)")
    if (basis == "one launch").any():
        parts.append("cells with one launch a side: within-launch median intervals, a verdict only where the "
                     f"effect exceeds {one_launch_factor:g} within-launch relative IQRs and {one_launch_floor:.0%}")
    if (basis == "no spread").any():
        parts.append(f"cells with one value a side and no within-launch spread ({int((basis == 'no spread').sum())}, "
                     f"as imported suite outputs): the ratio only, '{NO_SPREAD}'")
    return "; ".join(parts) or "no cell was measured on both sides"


def describe_launches(result: xr.Dataset) -> str:
    """How many launches the compared cells had per side: 'baseline 3, candidate 3' (a range, '1-3',
    where cells differ; cells neither side measured left out)."""
    measured = ((result["baseline_launches"] > 0) & (result["candidate_launches"] > 0)).values
    if not measured.any():
        return "no cell measured on both sides"

    def counts(name):
        values = result[name].values[measured]
        low, high = int(values.min()), int(values.max())
        return str(low) if low == high else f"{low}-{high}"

    return f"baseline {counts('baseline_launches')}, candidate {counts('candidate_launches')}"


def _launch_values(ds: xr.Dataset, statistic: str) -> xr.Dataset:
    """Per launch: log of the statistic, the log-scale standard error of its median, and the
    relative interquartile range of its samples; NaN where the launch has no samples."""
    missing = [name for name in (statistic, "sample_count") if name not in ds]
    if missing:
        raise ValueError(f"not a campaign dataset with per-point statistics: no {', '.join(missing)}")
    measured = ds["sample_count"] > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        # numpy's stubs: a ufunc of a DataArray is one
        value = cast(xr.DataArray, np.log(ds[statistic].where(measured & (ds[statistic] > 0))))
        if "median_ci" in ds:
            ci = cast(xr.DataArray, np.log(ds["median_ci"].where(measured)))
            # The launch's median interval is order statistics n/2 -+ MEDIAN_Z sqrt(n)/2 (see
            # commlens.data.samples), so its half width over MEDIAN_Z stands for the median's standard error.
            se = (ci.sel(bound="high") - ci.sel(bound="low")) / (2 * MEDIAN_Z)
        else:
            se = xr.full_like(value, np.nan)
        if "quantiles" in ds:
            q = ds["quantiles"]
            spread = cast(xr.DataArray, np.log(q.sel(quantile=0.75) / q.sel(quantile=0.25))).where(measured)
        else:
            spread = xr.full_like(value, np.nan)
    value, modes = _modes(value)
    keep = ["value", "se", "spread", "modes"]
    out = xr.Dataset({"value": value, "se": se.drop_vars("bound", errors="ignore"),
                      "spread": spread.drop_vars("quantile", errors="ignore"), "modes": modes})
    if "round" in ds:
        # The round each launch ran in (-1: it did not run), as a float so that NaN marks "unknown".
        out["round"] = ds["round"].where(ds["round"] >= 0).astype(float).broadcast_like(value)
        keep.append("round")
    return out[keep].reset_coords(drop=True).assign_coords(
        {name: coord for name, coord in ds.coords.items() if "launch" not in coord.dims
         and set(coord.dims) <= set(value.dims)})


def _modes(value: xr.DataArray) -> tuple[xr.DataArray, xr.DataArray]:
    """Per curve of one side's launch values, which launches ran in a slow mode and by how much
    (commlens.analysis.modes), "" where they ran in one; and the values with the slow mode's launches left
    out where each mode held two launches or more: the comparison is then made in the fast mode, and says
    so. Always the fast one, whichever holds more launches: the rows must be compared in the same mode,
    and the fast one is the host's own, the slow one what something else made of it. A lone launch far
    from the others is said and kept (three launches cannot tell a mode from noise), counted as
    launch-to-launch variation."""
    curve_dims = [dim for dim in value.dims if dim not in ("size", "launch")]
    found = xr.DataArray(np.full([value.sizes[d] for d in curve_dims], "", dtype=object), dims=curve_dims,
                         coords={d: value[d] for d in curve_dims})
    if "size" not in value.dims or "launch" not in value.dims:
        return value, found
    ordered = value.transpose(*curve_dims, "size", "launch")
    cube = ordered.values.reshape(-1, value.sizes["size"], value.sizes["launch"]).copy()
    texts = found.values.reshape(-1)
    labels = value["launch"].values
    for curve in range(cube.shape[0]):
        modes = find_modes(cube[curve])
        if modes is None:
            continue
        texts[curve] = modes.describe(labels)
        if modes.replicated:
            measured = np.flatnonzero(np.isfinite(cube[curve]).any(axis=0))
            left_out = list(modes.slow)
            cube[curve][:, left_out] = np.nan
            texts[curve] += (f": left out, compared in the fast mode of the other "
                             f"{len(measured) - len(left_out)}")
    return ordered.copy(data=cube.reshape(ordered.shape)).transpose(*value.dims), found


def _test(base: xr.Dataset, cand: xr.Dataset, confidence: float, one_launch_factor: float,
          one_launch_floor: float, pair: bool) -> dict:
    """Every cell's test, vectorised over (curves, sizes): `base` and `cand` are ordered (curve dims...,
    [size], launch); see the module's docstring for the cases."""
    shape = base["value"].shape[:-1]
    curves = int(np.prod(shape[:-1])) if "size" in base.dims else int(np.prod(shape))

    def cube(ds, name):
        values = ds[name].values
        return values.reshape(curves, -1, values.shape[-1])

    xb, xc = cube(base, "value"), cube(cand, "value")
    groups = noise_groups(base, curves)
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        n_b, n_c = np.isfinite(xb).sum(-1), np.isfinite(xc).sum(-1)
        test = unpaired_test(xb, xc, noise_groups=groups)
        paired = np.zeros(n_b.shape, bool)
        if pair:
            ratios = by_round(xb, cube(base, "round"), xc, cube(cand, "round"))
            pairs = np.isfinite(ratios).sum(-1)
            paired = (pairs >= 2) & (pairs.max(-1, keepdims=True) >= 2)
            if paired.any():
                by_pairs = paired_test(ratios, noise_groups=groups)
                test = {key: np.where(paired, by_pairs[key], test[key]) for key in ("diff", "se2", "dof")}
        diff, se2, df = test["diff"], test["se2"], test["dof"]
        by_launches = (n_b >= 1) & (n_c >= 1) & ((n_b > 1) | (n_c > 1))

        # One launch each: the samples' median intervals, a lower bound on the uncertainty; without
        # them (one value a side, no spread) nothing can be tested.
        one = (n_b == 1) & (n_c == 1)
        se_b, se_c = np.nanmax(cube(base, "se"), -1), np.nanmax(cube(cand, "se"), -1)
        no_spread = one & ~((se_b > 0) & (se_c > 0))
        one &= ~no_spread
        se2 = np.where(one, se_b ** 2 + se_c ** 2, se2)
        df = np.where(one, np.inf, df)
        spread = np.fmax(np.nanmax(cube(base, "spread"), -1), np.nanmax(cube(cand, "spread"), -1))
        dwarfs = one & (np.abs(diff) > np.fmax(one_launch_factor * np.nan_to_num(spread, nan=np.inf),
                                               np.log1p(one_launch_floor)))

        se = np.sqrt(se2)
        t = np.where(se > 0, diff / se, np.where(diff == 0, 0.0, np.inf * np.sign(diff)))
        p_value = 2 * scipy_stats.t.sf(np.abs(t), df)
        half = scipy_stats.t.ppf(0.5 + confidence / 2, df) * se
        tested = by_launches | one
        basis = np.where(by_launches, "launches", np.where(one, "one launch", np.where(no_spread, "no spread",
                                                                                         "none")))
        nan = np.full(diff.shape, np.nan)
        arrays = {
            "diff": np.where(tested, diff, nan), "se": np.where(tested, se, nan),
            "ratio": np.where(tested | no_spread, np.exp(diff), nan),
            "ratio_low": np.where(tested, np.exp(diff - half), nan),
            "ratio_high": np.where(tested, np.exp(diff + half), nan),
            "p_value": np.where(tested, p_value, nan),
            "dof": np.where(tested, df, nan),
            "basis": basis, "dwarfs": dwarfs, "paired": paired & by_launches, "n_b": n_b, "n_c": n_c,
        }
        return {name: value.reshape(shape) for name, value in arrays.items()}


def noise_groups(cells: xr.Dataset, curves: int) -> np.ndarray:
    """Per curve of `cells` (ordered curve dims..., [size], launch), a number shared by the curves whose
    launch variances moderate each other's: those of one placement (and one row of any other curve dim),
    whatever their kernel. Kernels of unlike noise among them do not pull each other: the prior is fitted
    robustly and a curve clearly noisier than it keeps its own variance (commlens.analysis.moderated)."""
    dims = [dim for dim in cells["value"].dims[:-1] if dim != "size"]
    if not dims:
        return np.zeros(curves, int)
    labels = [[str(value) for value in cells[dim].values] for dim in dims]
    keys = [tuple(label for dim, label in zip(dims, combo) if dim != "kernel")
            for combo in itertools.product(*labels)]
    numbers = {key: i for i, key in enumerate(dict.fromkeys(keys))}
    return np.array([numbers[key] for key in keys], int)


def benjamini_hochberg(p_values: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p values (q values) over every finite entry; NaN stays NaN and
    is not counted among the tests."""
    p = np.asarray(p_values, float)
    q = np.full(p.shape, np.nan)
    finite = np.isfinite(p)
    if finite.any():
        q[finite] = scipy_stats.false_discovery_control(p[finite], method="bh")
    return q


# ----------------------------------------------------------------------------- within one dataset

def within(ds: xr.Dataset, baseline: str, candidate: str, dim: str | None = None, **options) -> xr.Dataset:
    """Two rows of one dataset: two libraries, placements or kernels (the dim is found from the
    labels unless given); the result is over the other dims."""
    candidates = [d for d in ("library", "placement", "kernel") if d in ds.dims
                  and baseline in ds[d].values and candidate in ds[d].values]
    if dim is None:
        if not candidates:
            rows = {d: [str(v) for v in ds[d].values] for d in ("library", "placement", "kernel") if d in ds.dims}
            raise ValueError(f"compare: {baseline!r} and {candidate!r} are not both rows of one dim; rows: {rows}")
        dim = candidates[0]
    elif dim not in candidates:
        raise ValueError(f"compare: {baseline!r} and {candidate!r} are not both {dim} rows; "
                         f"{dim} rows: {[str(v) for v in ds[dim].values]}")

    def row(label):
        picked = ds.sel({dim: label})
        return picked.drop_vars([name for name, coord in picked.coords.items() if coord.dims == ()])

    result = compare(row(baseline), row(candidate), **options)
    result.attrs.update(baseline=baseline, candidate=candidate, compared=dim)
    return result


# ----------------------------------------------------------------------------- across campaigns

def across(baseline: xr.Dataset, candidate: xr.Dataset, mapping: dict[str, str] | None = None,
           **options) -> xr.Dataset:
    """Two campaigns' datasets: cells matched by library, placement, kernel and size labels.
    `mapping` renames the baseline's library rows ({old: new}); where each side has a single
    library row and no mapping is given, the two rows are matched whatever their names."""
    mapping = dict(mapping or {})
    base_rows = [str(v) for v in baseline["library"].values]
    cand_rows = [str(v) for v in candidate["library"].values]
    _check_rows("baseline", list(mapping), base_rows)
    _check_rows("candidate", list(mapping.values()), cand_rows)
    if not mapping and len(base_rows) == 1 and len(cand_rows) == 1 and base_rows != cand_rows:
        mapping = {base_rows[0]: cand_rows[0]}
    # A baseline row that a mapped row is renamed to stands aside (mpich-4=mpich-5 in a baseline
    # that also has mpich-5 compares that mpich-4 with the candidate's mpich-5).
    kept = [row for row in base_rows if row in mapping or row not in mapping.values()]
    renamed = [mapping.get(row, row) for row in kept]
    if not set(renamed) & set(cand_rows):
        raise ValueError(f"the campaigns share no library row (baseline {base_rows}, candidate {cand_rows}); "
                         "match them with --map OLD=NEW")
    baseline = baseline.sel(library=kept).assign_coords(library=renamed)
    # Round r of one campaign and round r of another did not run together: nothing to pair.
    result = compare(baseline, candidate, **{"pair_by_round": False, **options})
    result.attrs.update(library_map=", ".join(f"{a}={b}" for a, b in mapping.items()) or "by name")
    return result


def _check_rows(side: str, named: list[str], rows: list[str]) -> None:
    """ValueError naming the library rows of `named` that `side` does not have, its rows and the
    nearest: a typo in --map would otherwise compare a row with itself or with nothing."""
    unknown = [name for name in named if name not in rows]
    if not unknown:
        return
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, rows, n=1)
        hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise ValueError(f"--map: the {side} has no library row {', '.join(hints)}; its rows: {', '.join(rows)}")


def provenance_differences(baseline: xr.Dataset, candidate: xr.Dataset) -> list[str]:
    """What of PROVENANCE differs between two datasets, one line each (empty: nothing)."""
    lines = []
    for name in PROVENANCE:
        a, b = baseline.attrs.get(name), candidate.attrs.get(name)
        if a is not None and b is not None and str(a) != str(b):
            lines.append(f"{name}: {str(a)[:80]!r} against {str(b)[:80]!r}")
    return lines


# ----------------------------------------------------------------------------- tables

def verdict_counts(result: xr.Dataset) -> dict[str, int]:
    values = result["verdict"].values.ravel().tolist()
    return {verdict: values.count(verdict) for verdict in VERDICTS}
