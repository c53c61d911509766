"""`commlens compare BASELINE CANDIDATE` and `commlens history TARGET`: what changed, where, by how
much and whether it is real, between two datasets or over a campaign's reruns."""

from __future__ import annotations

import os
import sys

from commlens.cli.datasets import dataset_path, open_dataset


def _mapping(items: list[str]) -> dict[str, str]:
    pairs = {}
    for item in items:
        old, sep, new = item.partition("=")
        if not sep or not old or not new:
            raise ValueError(f"--map {item!r}: expected OLD=NEW (a baseline library row = a candidate one)")
        pairs[old] = new
    return pairs


def same_dataset(paths, base, cand) -> bool:
    """Whether the two inputs are one dataset: one file, or copies of one collection (the same
    creation time and campaign configuration)."""
    try:
        if os.path.samefile(paths[0], paths[1]):
            return True
    except OSError:
        pass
    keys = ("created", "config_hash")
    return all(base.attrs.get(k) is not None and str(base.attrs.get(k)) == str(cand.attrs.get(k)) for k in keys)


def compare(args) -> int:
    """Prints the changed size ranges of candidate against baseline (two datasets, or two campaign
    files), writes them to --output (.csv or .json), and returns 1 when --fail-on finds any."""
    import pandas as pd

    from commlens.analysis.compare import (CALLS, NO_SPREAD, across, describe_launches, provenance_differences,
                                           verdict_counts, within)
    from commlens.analysis.ranges import changed_ranges, describe_range, single_value_cells
    from commlens.io.tables import table_format, write_table

    pairs = _mapping(args.map)
    if args.output:
        table_format(args.output, ("csv", "json"))     # refused before any work
    if args.rows and args.candidate:
        raise ValueError("--rows compares two rows of one dataset: give it one dataset, not two")
    if not args.rows and not args.candidate:
        raise ValueError("give a baseline and a candidate dataset, or one dataset and --rows BASELINE CANDIDATE")
    (base_path, base) = open_dataset(args.baseline)
    (cand_path, cand) = (base_path, base) if args.rows else open_dataset(args.candidate)
    warn = lambda line: print(f"commlens compare: warning: {line}", file=sys.stderr)  # noqa: E731
    rows = args.rows
    if not rows and same_dataset((base_path, cand_path), base, cand):
        if len(pairs) == 1 and all(name in base["library"].values for pair in pairs.items() for name in pair):
            rows = next(iter(pairs.items()))     # two rows of one dataset, asked for with --map: paired as --rows
        else:
            warn(f"baseline and candidate are the same dataset ({base_path}) and the same rows: every ratio is "
                 "1, and the verdicts only say how precisely it was measured (compare two of its rows with "
                 "--rows)")
    if not rows:
        for line in provenance_differences(base, cand):
            warn(f"measured differently: {line}")
    for role, ds in ((("dataset", base),) if rows else (("baseline", base), ("candidate", cand))):
        if "imported" in ds.coords and ds["imported"].values.any():
            print(f"commlens compare: note: the {role} holds rows measured by another suite, by its method "
                  f"({ds.attrs.get('source', 'imported')})", file=sys.stderr)
    if rows:
        result = within(base, *rows, min_effect=args.min_effect, confidence=args.confidence)
        print(f"dataset: {base_path}\nrows: {rows[0]} (baseline) against {rows[1]} (candidate), "
              f"{result.attrs['compared']} rows")
    else:
        result = across(base, cand, pairs, min_effect=args.min_effect, confidence=args.confidence)
        print(f"baseline:  {base_path}\ncandidate: {cand_path}\nlibrary rows matched: {result.attrs['library_map']}")
    counts = verdict_counts(result)
    print(f"launches per cell: {describe_launches(result)}")
    print("cells: " + ", ".join(f"{n} {verdict}" for verdict, n in counts.items() if n))
    print(f"method: {result.attrs['method']}; {result.attrs['multiple_testing']}; changes below "
          f"{args.min_effect:.0%} are not reported")
    table = changed_ranges(result)
    for _, row in table.iterrows():
        print(f"  {row['verdict']:<10} {describe_range(row)}")
    if table.empty:
        print("  no size range changed")
    single = single_value_cells(result)
    if not single.empty:
        print(f"cells with one value a side and no spread (ratio only, {NO_SPREAD}):")
        for _, row in single.iterrows():
            print(f"  {describe_range(row)}")
        table = pd.concat([table, single], ignore_index=True) if not table.empty else single
    if args.output:
        print(f"table: {write_table(table, args.output, table_format(args.output, ('csv', 'json')))}")
    wanted = {"regressed": ("regressed",), "improved": ("improved",), "changed": CALLS}
    if args.fail_on and table["verdict"].isin(wanted[args.fail_on]).any():
        print(f"commlens compare: {args.fail_on} cells found (--fail-on {args.fail_on})", file=sys.stderr)
        return 1
    return 0


def history(args) -> int:
    """Prints, per curve, the size ranges whose time changed from one rerun of the campaign to a
    later one (results/<campaign>/history/ and the current dataset), and writes them to --output."""
    from commlens.analysis.history import describe_change, history as find_changes
    from commlens.io.tables import table_format, write_table

    if args.output:
        table_format(args.output, ("csv", "json"))     # refused before any work
    result, table = find_changes(dataset_path(args.target), min_effect=args.min_effect)
    reruns = result.sizes["rerun"]
    print(f"history: {reruns} rerun{'s' if reruns != 1 else ''}, oldest first")
    for rerun, created, source in zip(result["rerun"].values, result["created"].values, result["source"].values):
        print(f"  rerun {rerun}: {str(created)[:16] or 'time unknown':<16}  {source}")
    tested = int(result["tested"].sum())
    changed = int(result["change"].any("rerun").sum())
    print(f"cells: {result.attrs['cells']} measured, {tested} in two reruns or more with a noise estimate, "
          f"{changed} with a change")
    print(f"method: {result.attrs['method']}")
    for _, row in table.iterrows():
        print(f"  {describe_change(row)}\n      location / level before, per rerun: {row['series']}")
    if table.empty:
        print(f"  no change of {args.min_effect:.0%} or more")
    if args.output:
        print(f"table: {write_table(table, args.output, table_format(args.output, ('csv', 'json')))}")
    return 0
