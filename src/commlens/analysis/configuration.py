"""What a library was set to, and what that explains: its control variables (MPI_T cvars, as the dataset
holds them: commlens.data.machine) as a table, diffed between two rows or two releases, and matched to the
findings of its curves.

- `configuration(ds)`: one row per (library, cvar): value, status, default, datatype, scope, description.
- `difference(ds, baseline, candidate)`: the cvars whose value differs between two rows, appeared or
  disappeared, each with its description and the environment variable of the row that set it, where one did
  (a tuned row's OMPI_MCA_btl_sm_eager_limit); placement by placement where a placement changed a value (the
  emulated network's settings).
- `release_difference(before, after)`: the same between two builds' own descriptions (cvars.json: the values
  each release defaults to), for a bisection that ends between two releases.
- `settings_where_changed(table, changed)`: which of the size-valued settings that differ lies where a
  comparison found a change, or that none does.
- `explain_findings(ds, findings)`: each protocol switch, regime change or packet step said with the
  size-valued settings of its row that lie where it was found ("at 8 KiB: btl_sm_eager_limit = 8192"), or
  "no recorded setting explains it". Never beyond what was recorded: a setting is size-valued when its name
  says a size, limit or threshold and its value is a whole number of bytes within the curve's measured sizes,
  and near when it lies within one step of the size grid of where the finding is.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from commlens.io.cvars import CvarDescriptions, build_descriptions, integer_value
from commlens.units import format_exact_size

COLUMNS = ("library", "cvar", "value", "status", "default", "datatype", "scope", "description")
DIFFERENCE_COLUMNS = ("cvar", "change", "baseline", "candidate", "placements", "set_by", "also_as", "description")
CHANGED, APPEARED, DISAPPEARED = "changed", "appeared", "disappeared"
# What a size-valued setting's name says (MPICH's MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE, Open MPI's
# btl_sm_eager_limit, pml_ob1_..._threshold, btl_tcp_max_send_size): matched case-insensitively as words.
SIZE_WORDS = re.compile(r"(?:^|_)(size|sz|limit|thresh|threshold|eager|rndv|rendezvous|bytes|len|length|mtu|frag|"
                        r"fragment|pipeline|chunk|cutoff|segment|msg)(?:_|$)", re.IGNORECASE)
NOT_SIZES = re.compile(r"(?:^|_)(version|verbose|verbosity|debug|count|num|priority|exclusivity|flags|kval|radix)"
                       r"(?:_|$)", re.IGNORECASE)
EXPLAINED_KINDS = ("protocol_switch", "regime_change", "packet_steps")
UNEXPLAINED = "no recorded setting explains it"


def has_configuration(ds: xr.Dataset) -> bool:
    return "cvar_value" in ds.data_vars


def configuration(ds: xr.Dataset, library: str | None = None) -> pd.DataFrame:
    """One row per (library, cvar) the row's launches recorded (COLUMNS; `status` read, varies, unreadable:
    why; `default`: the build's own value, nothing set), or of one library; empty where the dataset has
    none (launches from before commlens recorded them)."""
    if not has_configuration(ds):
        return pd.DataFrame({name: pd.Series(dtype=object) for name in COLUMNS})
    names = {"cvar_value": "value", "cvar_status": "status", "cvar_default": "default", "cvar_datatype": "datatype",
             "cvar_scope": "scope", "cvar_description": "description"}
    part = ds[list(names)]
    if library is not None:
        part = part.sel(library=[library])
    frame = part.to_dataframe().reset_index().rename(columns=names)
    frame = frame[frame["status"] != "absent"]
    return frame[list(COLUMNS)].reset_index(drop=True)


def settings(ds: xr.Dataset, library: str, placement: str | None = None) -> dict[str, str]:
    """The cvars a row ran with, {cvar: value}: each read value, and, where the row's launches differ, the
    value most of the placement's launches read (of all the row's launches without a placement)."""
    if not has_configuration(ds):
        return {}
    row = ds.sel(library=library)
    values = {str(cvar): str(value) for cvar, value, status in zip(row["cvar"].values, row["cvar_value"].values,
                                                                   row["cvar_status"].values) if status == "read"}
    if "cvar_launch_value" in ds.data_vars:
        launches = row["cvar_launch_value"]
        if placement is not None:
            launches = launches.sel(placement=placement)
        for cvar in ds["cvar_varying"].values:
            read = [str(v) for v in np.ravel(launches.sel(cvar_varying=cvar).values) if str(v)]
            if read:
                values[str(cvar)] = max(set(read), key=lambda v: (read.count(v), v))
    return values


def _set_by(ds: xr.Dataset, library: str) -> dict[str, str]:
    """{cvar: "VARIABLE=value"}: what the row's environment (the campaign's `env`, and what the launcher set)
    set, by the cvar each variable names (its family's spelling)."""
    from commlens.launch.families import family_named

    row = ds.sel(library=library)
    try:
        family = family_named(str(row["family"].item())) if "family" in ds.coords else None
    except KeyError:
        family = None
    env: dict[str, str] = {}
    if "library_env" in ds.coords:
        env |= json.loads(str(row["library_env"].item()) or "{}")
    if "launch_env" in ds.data_vars:
        for text in set(np.ravel(row["launch_env"].values).tolist()):
            if text:
                env = {**json.loads(text), **env}
    named = {}
    for variable, value in env.items():
        cvar = family.cvar_of_environment(variable) if family else None
        if cvar:
            named[cvar] = f"{variable}={value}"
    return named


def difference(ds: xr.Dataset, baseline: str, candidate: str) -> pd.DataFrame:
    """The cvars whose value differs between two rows of `ds` (DIFFERENCE_COLUMNS): `change` changed,
    appeared (the candidate has it, the baseline has not) or disappeared; `placements` where (empty: every
    placement alike); `set_by` the environment variable of either row that set it; `also_as` the other names
    of a variable listed under several (Open MPI keeps a parameter's old names: btl_vader_eager_limit for
    btl_sm_eager_limit), which change with it and are folded into one row. Empty where the rows ran with
    the same values, or the dataset recorded none."""
    if not has_configuration(ds):
        return _empty_difference()
    placements = [str(p) for p in ds["placement"].values]
    per_placement = {p: (settings(ds, baseline, p), settings(ds, candidate, p)) for p in placements}
    found: dict[tuple, list[str]] = {}
    for placement, (before, after) in per_placement.items():
        if not before and not after:
            continue
        for cvar in sorted(set(before) | set(after)):
            old, new = before.get(cvar), after.get(cvar)
            if old == new:
                continue
            change = APPEARED if old is None else DISAPPEARED if new is None else CHANGED
            found.setdefault((cvar, change, old or "", new or ""), []).append(placement)
    measured = [p for p, (before, after) in per_placement.items() if before or after]
    descriptions = _descriptions(ds, (candidate, baseline))
    set_by = {**_set_by(ds, baseline), **_set_by(ds, candidate)}
    rows = [{"cvar": cvar, "change": change, "baseline": old, "candidate": new,
             "placements": "" if sorted(where) == sorted(measured) else ", ".join(where),
             "set_by": set_by.get(cvar, ""), "description": descriptions.get(cvar, "")}
            for (cvar, change, old, new), where in found.items()]
    return _folded(rows)


def release_difference(before: dict | CvarDescriptions, after: dict | CvarDescriptions) -> pd.DataFrame:
    """The configuration difference between two releases: the cvars whose default value (the build's own
    run, nothing set by the environment) differs between two builds, appeared or disappeared, with the
    newer release's description (DIFFERENCE_COLUMNS; `placements` and `set_by` empty). `before` and `after`
    are build.json records (commlens.launch.build: their `cvars` names cvars.json) or their descriptions.
    Where either build described none, the table is empty and its `attrs["reason"]` says why."""
    described = [side if isinstance(side, CvarDescriptions) else build_descriptions(side) for side in (before, after)]
    missing = [f"{'before' if i == 0 else 'after'}: {d.reason or d.status}" for i, d in enumerate(described)
               if d.status != "ok"]
    if missing:
        table = _empty_difference()
        table.attrs["reason"] = "; ".join(missing)
        return table
    old, new = ({name: c.default for name, c in d.cvars.items() if c.default is not None} for d in described)
    # Both releases' descriptions, the newer's where both describe a variable.
    descriptions = {name: entry.description for d in described for name, entry in d.cvars.items()}
    return default_difference(old, new, descriptions)


def row_defaults(ds: xr.Dataset, library: str) -> tuple[dict[str, str], dict[str, str]]:
    """({cvar: default}, {cvar: description}) of one library row as its build described them (the dataset's
    cvar_default: what the release runs with when nothing is set); empty where it recorded none."""
    if not has_configuration(ds) or library not in ds["library"].values:
        return {}, {}
    row = ds.sel(library=library)
    defaults = {str(cvar): str(value) for cvar, value, status in zip(row["cvar"].values, row["cvar_default"].values,
                                                                     row["cvar_status"].values)
                if str(value) != "" and status != "absent"}
    return defaults, {cvar: str(text) for cvar, text in zip(row["cvar"].values, row["cvar_description"].values)
                      if str(cvar) in defaults}


def default_difference(old: dict[str, str], new: dict[str, str], descriptions: dict[str, str]) -> pd.DataFrame:
    """The cvars whose default differs between two releases ({cvar: default} each), appeared or
    disappeared, with their descriptions (DIFFERENCE_COLUMNS; `placements` and `set_by` empty)."""
    rows = []
    for cvar in sorted(set(old) | set(new)):
        if old.get(cvar) == new.get(cvar):
            continue
        change = APPEARED if cvar not in old else DISAPPEARED if cvar not in new else CHANGED
        rows.append({"cvar": cvar, "change": change, "baseline": old.get(cvar, ""), "candidate": new.get(cvar, ""),
                     "placements": "", "set_by": "", "description": descriptions.get(cvar, "")})
    return _folded(rows)


def comparison_settings(ds: xr.Dataset, baseline: str, candidate: str, changed: pd.DataFrame,
                        limit: int = 8) -> list[str]:
    """What a comparison of two library rows says of their settings, in sentences: that they are different
    families (whose variables are not comparable), or ran with the same recorded values, or which values
    differ (at most `limit` named) and whether a size-valued one lies where a change was found
    (settings_where_changed). Empty where the dataset recorded no settings."""
    if not has_configuration(ds):
        return []
    if "family" in ds.coords:
        families = {str(ds["family"].sel(library=row).item()) for row in (baseline, candidate)}
        if len(families) > 1:
            return [f"{baseline} and {candidate} are libraries of different families: their control variables "
                    "are not compared"]
    table = difference(ds, baseline, candidate)
    if table.empty:
        return ["Both rows ran with the same values of every control variable their launches recorded"]
    return ([f"Control variables that differ ({len(table)}): " + "; ".join(difference_lines(table, limit))]
            + settings_where_changed(table, changed))


def settings_where_changed(table: pd.DataFrame, changed: pd.DataFrame) -> list[str]:
    """Which size-valued settings of a difference table (difference, default_difference) lie where a change
    was found: `changed` has one row per changed size range (size_from, size_to; and the curve's kernel and
    placement where it has them, as analysis.ranges.changed_ranges gives them). A setting that moved from a
    to b moves the sizes between them to its other side (an eager limit from 4 KiB to 16 KiB sends 8 KiB
    messages another way), so it lies where a change was found if a changed range overlaps (min, max]; one
    that appeared or disappeared lies there if a changed range is within a factor of two of its value.
    Sentences, one per setting that lies there, else one that says none does; empty where no size-valued
    setting differs."""
    sized: list[tuple[Any, float, float]] = []
    for row in table.itertuples():
        if not SIZE_WORDS.search(row.cvar) or NOT_SIZES.search(row.cvar):
            continue
        old, new = integer_value(str(row.baseline)), integer_value(str(row.candidate))
        if old is not None and new is not None and old != new:
            sized.append((row, min(old, new), max(old, new)))
        elif (old is None) != (new is None):
            value = old if old is not None else new
            if value and value > 0:
                sized.append((row, value / 2, value * 2))
    if not sized:
        return []
    said = []
    for row, low, high in sized:
        where = [piece for piece in changed.itertuples() if piece.size_from <= high and piece.size_to > low]
        if where:
            curves = "; ".join(dict.fromkeys(
                " ".join(str(getattr(piece, dim)) for dim in ("kernel", "placement") if hasattr(piece, dim))
                + f" {_span(piece.size_from, piece.size_to)}" for piece in where))
            moved = (f"{row.baseline} -> {row.candidate}" if row.change == CHANGED
                     else f"{row.change}, {row.baseline or row.candidate}")
            said.append(f"{row.cvar} ({moved}) lies where a change was found: {curves.strip()}")
    if said:
        return said
    return [f"None of the {len(sized)} size-valued settings that differ lies where a change was found"]


def difference_lines(table: pd.DataFrame, limit: int | None = None) -> list[str]:
    """The difference as sentences, one per cvar: "btl_sm_eager_limit: 4096 -> 8192 (set by
    OMPI_MCA_btl_sm_eager_limit=8192): Maximum size ..."."""
    lines = []
    for row in table.head(limit).itertuples() if limit else table.itertuples():
        what = {CHANGED: f"{row.baseline or '(empty)'} -> {row.candidate or '(empty)'}",
                APPEARED: f"new, {row.candidate or '(empty)'}", DISAPPEARED: f"gone (was {row.baseline or '(empty)'})"}
        extra = [part for part in (f"in {row.placements}" if row.placements else "",
                                   f"set by {row.set_by}" if row.set_by else "",
                                   f"also as {row.also_as}" if row.also_as else "") if part]
        line = f"{row.cvar}: {what[row.change]}" + (f" ({'; '.join(extra)})" if extra else "")
        description = " ".join(str(row.description).split())
        lines.append(line + (f": {description}" if description else ""))
    if limit and len(table) > limit:
        lines.append(f"... and {len(table) - limit} more")
    return lines


def _descriptions(ds: xr.Dataset, libraries) -> dict[str, str]:
    described: dict[str, str] = {}
    for library in libraries:
        row = ds.sel(library=library)
        for cvar, text in zip(row["cvar"].values, row["cvar_description"].values):
            if str(text):
                described.setdefault(str(cvar), str(text))
    return described


def _empty_difference() -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=object) for name in DIFFERENCE_COLUMNS})


def _folded(rows: list[dict]) -> pd.DataFrame:
    """One row per variable: those of the same change, values and description are one variable under
    several names (Open MPI's synonyms), the set one (or the first by name) kept, the others in also_as."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        # Open MPI's old names are its component's old name: btl_vader_x for btl_sm_x.
        words = row["cvar"].split("_")
        shape = (len(words), words[0], *words[2:]) if len(words) > 2 else (row["cvar"],)
        key = (row["change"], row["baseline"], row["candidate"], row["placements"], shape,
               " ".join(row["description"].split()) or row["cvar"])
        groups.setdefault(key, []).append(row)
    folded = []
    for members in groups.values():
        members.sort(key=lambda row: (not row["set_by"], row["cvar"]))
        folded.append({**members[0], "set_by": next((m["set_by"] for m in members if m["set_by"]), ""),
                       "also_as": ", ".join(m["cvar"] for m in members[1:])})
    table = pd.DataFrame(folded, columns=list(DIFFERENCE_COLUMNS)) if folded else _empty_difference()
    order = {CHANGED: 0, APPEARED: 1, DISAPPEARED: 2}
    return table.sort_values(["change", "cvar"], key=lambda c: c.map(order) if c.name == "change" else c,
                             ignore_index=True)


def size_valued(values: dict[str, str], low: float, high: float) -> dict[str, int]:
    """{cvar: bytes} of the settings whose name says a size, limit or threshold and whose value is a whole
    number of bytes within [low, high] (a curve's measured sizes)."""
    found = {}
    for cvar, text in values.items():
        number = integer_value(text)
        if number is None or number <= 0 or not low <= number <= high:
            continue
        if SIZE_WORDS.search(cvar) and not NOT_SIZES.search(cvar):
            found[cvar] = number
    return found


def near(value: int, finding: pd.Series | dict, grid: np.ndarray) -> bool:
    """Whether a setting of `value` bytes lies within one step of the size grid of where `finding` is: a
    switch between the measured sizes a and b lies in (a, b], so a limit from one step below a to one
    above b may be it; a packet step's first boundary likewise, or its period."""
    size = float(finding["size"])
    low = float(finding["size_low"]) if _finite(finding.get("size_low")) else _neighbour(grid, size, -1)
    high = float(finding["size_high"]) if _finite(finding.get("size_high")) else size
    step_below, step_above = low - _neighbour(grid, low, -1), _neighbour(grid, high, +1) - high
    if low - step_below <= value <= high + step_above:
        return True
    if finding.get("kind") == "packet_steps" and _finite(finding.get("period")):
        period_low = float(finding["period_low"]) if _finite(finding.get("period_low")) else float(finding["period"])
        period_high = float(finding["period_high"]) if _finite(finding.get("period_high")) else float(finding["period"])
        return period_low <= value <= period_high
    return False


def _neighbour(grid: np.ndarray, size: float, direction: int) -> float:
    """The measured size next to `size` on the grid (below: -1, above: +1), or `size` itself at an end."""
    grid = np.sort(np.asarray(grid, dtype=float))
    at = np.searchsorted(grid, size)
    if direction < 0:
        return float(grid[at - 1]) if at > 0 else size
    at = at + 1 if at < grid.size and grid[at] == size else at
    return float(grid[at]) if at < grid.size else size


def _finite(value) -> bool:
    try:
        return value is not None and np.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _span(first, last) -> str:
    return format_exact_size(first) if first == last else f"{format_exact_size(first)} to {format_exact_size(last)}"


def explain_findings(ds: xr.Dataset, findings: pd.DataFrame) -> pd.DataFrame:
    """`findings` (ds.commlens.anomalies()' table) with `settings` (the size-valued cvars of each finding's row
    near where it was found, "btl_sm_eager_limit = 8192", nearest first) and `explanation` ("at 8 KiB:
    btl_sm_eager_limit = 8192", or "no recorded setting explains it") for every protocol switch, regime
    change and packet step; both empty for other kinds, and for every finding where the dataset recorded no
    settings (nothing is claimed beyond what was recorded)."""
    table = findings.copy()
    table["settings"], table["explanation"] = "", ""
    if not has_configuration(ds) or table.empty:
        return table
    sizes_of = {}
    if "sample_count" in ds.data_vars:
        measured = ds["sample_count"].sum("launch") > 0
        for library in ds["library"].values:
            for placement in ds["placement"].values:
                for kernel in ds["kernel"].values:
                    curve = measured.sel(library=library, placement=placement, kernel=kernel).values
                    sizes_of[str(library), str(placement), str(kernel)] = ds["size"].values[curve]
    cache: dict[tuple, dict[str, str]] = {}
    set_by_of: dict[str, dict[str, str]] = {}
    for index, finding in table.iterrows():
        if finding["kind"] not in EXPLAINED_KINDS:
            continue
        key = (str(finding["library"]), str(finding["placement"]), str(finding["kernel"]))
        grid = sizes_of.get(key, ds["size"].values)
        if key[:2] not in cache:
            cache[key[:2]] = settings(ds, key[0], key[1])
        if not cache[key[:2]]:
            continue
        candidates = size_valued(cache[key[:2]], float(np.min(grid)), float(np.max(grid))) if len(grid) else {}
        # A setting the row's environment set comes first, said so: several of a library's defaults may be
        # the same number (Open MPI's transports default to 8 KiB limits), and the one set is the row's own.
        set_by = set_by_of.setdefault(key[0], _set_by(ds, key[0]))
        matched = sorted(((cvar, value) for cvar, value in candidates.items() if near(value, finding, grid)),
                         key=lambda item: (item[0] not in set_by, abs(item[1] - float(finding["size"])), item[0]))
        where = format_exact_size(finding["size"])
        if matched:
            said = ", ".join(f"{cvar} = {value}" + (f" (set by {set_by[cvar]})" if cvar in set_by else "")
                             for cvar, value in matched)
            table.at[index, "settings"], table.at[index, "explanation"] = said, f"at {where}: {said}"
        else:
            table.at[index, "explanation"] = UNEXPLAINED
    return table
