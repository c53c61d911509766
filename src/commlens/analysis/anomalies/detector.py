"""The anomaly detector of one curve, `detect`, and the findings table it returns: the structural
model first, then alignment classes and spikes in what it leaves (see commlens.analysis.anomalies)."""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pandas as pd

from commlens.analysis.anomalies.alignment import alignment_classes
from commlens.analysis.anomalies.noise import launch_levelled
from commlens.analysis.anomalies.spikes import spike_rows
from commlens.analysis.anomalies.structure import StructuralModel, fit_structural_model, steps_at
from commlens.analysis.models import Curve, reduce_curve, robust_sd
from commlens.analysis.modes import Modes, find_modes

COLUMNS = ("kind", "size", "size_low", "size_high", "magnitude", "relative", "score", "period", "period_low",
           "period_high", "header", "modulus", "residue", "launches", "of_launches", "note", "bandwidth_before_Bps",
           "bandwidth_after_Bps")
# Below this many sizes a curve has too little shape to call anything unusual.
MIN_SIZES = 6
# What a finding must be worth beside its score: its magnitude against the curve's time at its size. A bend
# in one regime's copy cost (0.02-0.03 us of 1 us at Open MPI's 6-7 KiB here) passes a test against the
# noise of sizes that barely vary, yet changes nothing a reader would act on.
PRACTICAL = {"protocol_switch": 0.10, "regime_change": 0.25, "packet_steps": 0.02, "alignment": 0.02,
             "spike": 0.10}
# A breakpoint whose jump is under the switch's practical size is a regime change where the bandwidth either
# side differs by this factor at least (a new slope from there on), and nothing otherwise.
REGIME_FACTOR = 1 + PRACTICAL["regime_change"]
# One launch has nothing to agree with: its findings need a score this many times the threshold, but for
# those that repeat at a period (PERIODIC), whose boundaries confirm each other.
ONE_LAUNCH_STRICTER = 1.5
PERIODIC = ("packet_steps", "alignment")
# Launches of a row agree on a finding when at least this share of them show it (2 of 2, 2 of 3, 6 of 8).
AGREEING = 2 / 3
# A finding of the launches pooled is kept where AGREEING of them show it on their own at this share of the
# threshold: the evidence is the pooled curve's, the launches only confirm where it is.
SUPPORT = 0.35


def empty_table() -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=object if name in ("kind", "note") else float) for name in COLUMNS})


def _table(rows: list[dict]) -> pd.DataFrame:
    if not rows:
        return empty_table()
    return pd.DataFrame([{name: row.get(name, "" if name == "note" else np.nan) for name in COLUMNS} for row in rows],
                        columns=list(COLUMNS))


def _levelled(curve: Curve, fit: StructuralModel, classes) -> Curve:
    """The curve with each class brought to the level of the other sizes, by a constant or in
    proportion to the time (an alignment penalty can be either), whichever leaves the class's
    sizes closer together. Each size is levelled from its own time, not from the model: where
    the model is off (a class size that starts a segment), it would carry the error over."""
    y = curve.median_s.copy()
    for _, members in classes:
        residual, relative = y - fit.model_s, y / fit.model_s - 1
        constant = np.median(residual[members]) - np.median(residual[~members])
        ratio = 1 + np.median(relative[members]) - np.median(relative[~members])
        candidates = [np.where(members, y - constant, y), np.where(members, y / ratio, y)]
        spreads = [robust_sd(((levelled - fit.model_s) / fit.sigma_s)[members]) for levelled in candidates]
        y = candidates[int(np.argmin(spreads))]
    return replace(curve, median_s=y)


def detect(sizes, times, threshold: float = 6.0, max_segments: int = 5,
           min_segment_sizes: int = 3, counts=None, positions=None) -> pd.DataFrame:
    """Findings of one curve, one row each; an empty table (with the columns) when there are none.

    Columns: kind (packet_steps, protocol_switch, alignment, spike); size (bytes
    where it starts: the first size past the first packet boundary or the switch,
    the first size of the class, the spike's size) with size_low and size_high
    bracketing a switch or first step; magnitude (seconds: step height, jump at the
    switch, time of the class less that of the other sizes (below 0: the class is
    faster, as aligned sizes usually are), or the spike's extra time); score
    (significance, in noise standard deviations); period with period_low and
    period_high (packet payloads that fit the grid equally well); modulus and residue
    (alignment: the sizes with size % modulus == residue); launches (spikes: launches
    that show it, NaN without a launch axis); bandwidth_before_Bps and
    bandwidth_after_Bps (switches); relative (what the finding is worth, PRACTICAL: magnitude against the
    model's time at its size, for packet steps against the wire time of one packet's payload, for a
    regime change the bandwidth's change); of_launches and note (detect_launches: how many launches
    there were, and what their agreement says). Columns that do not apply to a kind are NaN.
    With a launch axis, each launch is first brought to the common level (launch_levelled): the
    findings are about the curve's shape, which launches of one row share. `positions` (n_sizes,
    n_launches), where in its launch each point was measured, level each launch along that order too:
    a host that changed speed part-way through a launch.
    """
    curve = reduce_curve(sizes, launch_levelled(times, positions), counts)
    if curve.sizes.size < MIN_SIZES:
        return empty_table()
    options = (threshold, max_segments, min_segment_sizes)
    fit = fit_structural_model(curve, *options)
    classes = alignment_classes(curve.sizes, *_standardised(curve, fit), threshold)
    if classes:
        # A class of sizes off the others pulls the structural fit where few other sizes hold
        # it (the end of a segment, the smallest sizes of a page-sized class): a switch or a
        # spike appears that is the class's doing. The structure is fitted again without it.
        fit = fit_structural_model(_levelled(curve, fit, classes), *options)
        classes = alignment_classes(curve.sizes, *_standardised(curve, fit), threshold)
    z, residual = _standardised(curve, fit)
    explained = np.zeros(curve.sizes.size, bool)
    for _, members in classes:
        explained |= members
    rows = fit.rows + [row for row, _ in classes]
    rows += spike_rows(curve, z, residual, fit.model_s, explained, threshold)
    return _table(practical(rows, curve.sizes, fit.model_s))


def practical(rows: list[dict], sizes: np.ndarray, model_s: np.ndarray) -> list[dict]:
    """The rows whose magnitude matters (PRACTICAL, against the model's time at their size, in `relative`);
    a breakpoint too small a jump to be a switch but with a new bandwidth after it becomes a regime change."""
    kept = []
    per_byte = (model_s[-1] - model_s[0]) / max(float(sizes[-1] - sizes[0]), 1.0)
    for row in rows:
        at = model_s[min(np.searchsorted(sizes, row["size"]), sizes.size - 1)]
        row = {**row, "relative": abs(row["magnitude"]) / at if at > 0 else np.inf}
        if row["kind"] == "packet_steps" and per_byte > 0:
            # A step is worth the share of a packet's wire time it adds: the bandwidth packets cost.
            row["relative"] = abs(row["magnitude"]) / (per_byte * row["period"])
        if row["kind"] == "protocol_switch" and row["relative"] < PRACTICAL["protocol_switch"]:
            before, after = row["bandwidth_before_Bps"], row["bandwidth_after_Bps"]
            change = max(before / after, after / before) if before > 0 and after > 0 else np.inf
            if not (np.isfinite(change) and change >= REGIME_FACTOR):
                continue
            row = {**row, "kind": "regime_change", "relative": change - 1}
        if row["relative"] >= PRACTICAL[row["kind"]]:
            kept.append(row)
    return kept


def detect_launches(sizes, times, threshold: float = 6.0, counts=None, positions=None, **options) -> pd.DataFrame:
    """Findings of one curve, confirmed launch by launch (see the package's docstring): those of the
    launches pooled (each brought to the common level first) that at least AGREEING of the launches show
    on their own (at SUPPORT of the threshold, at the same place: within one size of the grid, or one packet
    period), and those at least AGREEING of the launches show at the full threshold that the pooled curve
    does not, whichever way they go in each (a switch up in one launch and down in another, as a launch in
    a slow mode shows it, is one switch: `note` says both directions; its size the one most launches put
    it at, its magnitude and score their medians). `launches` says how many showed it of `of_launches`.
    Launches in two modes are a finding of their own (launch_modes: `magnitude` the factor, `note` which
    launches). With one launch, the findings of that launch at ONE_LAUNCH_STRICTER times the
    threshold (`note`: one launch). Times without a launch axis go to `detect` as they are."""
    times = np.asarray(times, dtype=float)
    if times.ndim != 3:
        return detect(sizes, times, threshold=threshold, counts=counts, positions=positions, **options)
    measured = [launch for launch in range(times.shape[1]) if np.isfinite(times[:, launch]).any()]
    if len(measured) <= 1:
        table = detect(sizes, times[:, measured], threshold=threshold,
                       counts=None if counts is None else np.asarray(counts)[:, measured], **options)
        # A staircase or a residue class repeats itself at its period: its boundaries confirm each other as
        # launches would. What happens once (a switch, a spike) has only the one launch to stand on.
        periodic = table["kind"].isin(PERIODIC)
        table = table[periodic | (table["score"] >= threshold * ONE_LAUNCH_STRICTER)]
        return table.assign(launches=1.0, of_launches=1.0, note="one launch") if len(table) else table
    levelled = launch_levelled(times, positions)        # each launch at the common level, spells taken out
    order = np.argsort(np.asarray(sizes))
    grid = np.asarray(sizes)[order]

    def each_launch(scale: float) -> list[pd.DataFrame]:
        return [detect(grid, levelled[order][:, [launch]], threshold=threshold * scale,
                       counts=None if counts is None else np.asarray(counts)[order][:, [launch]], **options)
                for launch in measured]

    index = {float(size): i for i, size in enumerate(grid)}
    pooled = detect(grid, levelled[order], threshold=threshold,
                    counts=None if counts is None else np.asarray(counts)[order], **options).to_dict("records")
    # The launches' support of what the pooled curve shows, each launch held to a lower bar (SUPPORT): a
    # launch whose own noise hides a switch at the full threshold still shows it there.
    lenient = each_launch(SUPPORT)
    # The launches' own findings at the full threshold, read off the lenient ones (what scores that high
    # there): one detection a launch instead of two, at a fraction of what a second fit would change.
    strict = [table[table["score"].fillna(np.inf) >= threshold] for table in lenient]
    rows = []
    for row in pooled:
        if row["kind"] == "packet_steps":
            # A staircase is confirmed by each launch stepping at its period, not by each finding its own
            # period from its own noisier curve.
            shown = sum(_steps_in_launch(grid, levelled[order][:, [launch]], row, threshold * SUPPORT)
                        for launch in measured)
        else:
            shown = sum(any(_same(row, other, index) for other in table.to_dict("records")) for table in lenient)
        if shown >= int(np.ceil(AGREEING * len(measured))):
            rows.append({**row, "launches": float(shown), "of_launches": float(len(measured))})
    # What every launch shows at the full threshold and the pooled curve does not: a switch that goes up in
    # some launches and down in others (a launch in a slow mode), which pooling averages away.
    for row in _agreed(strict, grid, len(measured)):
        if not any(_same(row, kept, index) for kept in rows):
            rows.append(row)
    modes = find_modes(np.log(_launch_medians(times[order][:, measured])))
    if modes is not None:
        labels = [measured[i] for i in modes.slow]
        rows.append({"kind": "launch_modes", "size": float(grid[0]), "magnitude": modes.factor,
                     "relative": modes.factor - 1, "launches": float(len(labels)), "of_launches": float(len(measured)),
                     "note": Modes(tuple(labels), modes.factor, modes.replicated).describe()})
    return _table(rows)


def _steps_in_launch(grid: np.ndarray, times: np.ndarray, row: dict, bar: float) -> bool:
    """Whether one launch steps up at the period and header of the pooled finding `row`, to `bar`."""
    steps = steps_at(reduce_curve(grid, times), int(row["period"]), int(row.get("header", 0) or 0))
    return steps is not None and steps.confirmed(bar)


def _launch_medians(times: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(times, axis=2)


def _agreed(tables: list[pd.DataFrame], grid: np.ndarray, launches: int) -> list[dict]:
    """The findings the launches' tables agree on (detect_launches)."""
    needed = max(2, int(np.ceil(AGREEING * launches)))
    found = [(launch, row) for launch, table in enumerate(tables) for row in table.to_dict("records")]
    index = {float(size): i for i, size in enumerate(grid)}
    rows, used = [], set()
    for i, (launch, row) in enumerate(found):
        if i in used:
            continue
        group = [(launch, row)]
        for j in range(i + 1, len(found)):
            other_launch, other = found[j]
            if j in used or other_launch in {member for member, _ in group} or not _same(row, other, index):
                continue
            group.append(found[j])
            used.add(j)
        used.add(i)
        if len(group) >= needed:
            rows.append(_merged([member for _, member in group], len(group), launches))
    return rows


def _same(a: dict, b: dict, index: dict) -> bool:
    """Whether two launches' findings are one: alike in kind (a switch and a regime change are one
    breakpoint), at the same size or the next one on the grid, or (packet steps) at overlapping periods."""
    breakpoints = {"protocol_switch", "regime_change"}
    if a["kind"] != b["kind"] and not {a["kind"], b["kind"]} <= breakpoints:
        return False
    if a["kind"] == "packet_steps":
        return a["period_low"] - 1 <= b["period_high"] and b["period_low"] - 1 <= a["period_high"]
    if a["kind"] == "alignment":
        return a["modulus"] == b["modulus"] and a["residue"] == b["residue"]
    return abs(index.get(float(a["size"]), -9) - index.get(float(b["size"]), 9)) <= 1


def _merged(members: list[dict], shown: int, launches: int) -> dict:
    """One row for a finding `shown` of `launches` launches agree on: the size most of them put it at, the
    median of the rest; both directions where the launches differ."""
    sizes = [member["size"] for member in members]
    size = max(set(sizes), key=sizes.count)
    at = next(member for member in members if member["size"] == size)
    kinds = [member["kind"] for member in members]
    row = {**at, "kind": max(set(kinds), key=kinds.count), "launches": float(shown), "of_launches": float(launches)}
    for name in ("magnitude", "relative", "score"):
        row[name] = float(np.median([member[name] for member in members]))
    up = sum(member["magnitude"] > 0 for member in members)
    if row["kind"] in ("protocol_switch", "regime_change") and 0 < up < shown:
        row["note"] = f"up in {up} launches, down in {shown - up}: launches in two modes"
    return row


def _standardised(curve: Curve, fit: StructuralModel) -> tuple[np.ndarray, np.ndarray]:
    """The curve's residuals from the model, in noise units and in seconds."""
    residual = curve.median_s - fit.model_s
    return residual / fit.sigma_s / fit.dispersion, residual
