"""`commlens bisect BASELINE CANDIDATE`: which release of one MPI family first brought a change.

The cells to watch come from --kernel/--placement/--sizes or a table of `commlens compare --output`;
the bisection itself, each step a small campaign run through the workflow, is
commlens.orchestrate.bisection_steps. What it found is printed as a table (or, with --json, as the
record bisect.json keeps: commlens.analysis.bisection.BisectionRecord); the exit status is 0 where the
candidate showed the change, 1 where it did not.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pandas as pd

from commlens.analysis.bisection import WatchedCell, bisection_text, table_lines
from commlens.cli.run import show_run
from commlens.orchestrate.bisection_steps import BisectionRequest, run_bisection
from commlens.units import parse_size


def bisect(args) -> int:
    request = BisectionRequest(baseline=args.baseline, candidate=args.candidate, cells=tuple(watched_cells(args)),
                               launches=args.launches, max_launches=args.max_launches, min_effect=args.min_effect,
                               confidence=args.confidence, directory=Path(args.directory),
                               snakemake_args=tuple(shlex.split(args.snakemake)))
    # With --json the standard output is the JSON alone: the steps' progress goes to the error stream.
    record = run_bisection(request, progress=sys.stderr if args.json else sys.stdout, show_run=show_run)
    if args.json:
        sys.stdout.write(bisection_text(record))
    else:
        print("\n".join(table_lines(record)))
    return 0 if record.conclusion.confirmed else 1


def watched_cells(args) -> list[WatchedCell]:
    """(kernel, placement, size) cells from --kernel/--placement/--sizes, or from --cells: a table that
    `commlens compare --output` wrote (each changed range watched at its first and last size)."""
    if args.cells:
        if args.kernel or args.sizes:
            raise ValueError("give the cells to watch either as --cells TABLE or as --kernel/--placement/--sizes")
        path = Path(args.cells)
        table = pd.read_json(path, orient="records") if path.suffix == ".json" else pd.read_csv(path)
        missing = [c for c in ("kernel", "placement", "size_from", "size_to") if c not in table.columns]
        if missing:
            raise ValueError(f"{path}: no column {', '.join(missing)}; --cells takes the table commlens compare "
                             "--output writes")
        found = {(row["kernel"], row["placement"], int(size)) for _, row in table.iterrows()
                 for size in (row["size_from"], row["size_to"])}
        if not found:
            raise ValueError(f"{path}: no changed range to watch")
        return [WatchedCell(k, p, s) for k, p, s in sorted(found)]
    if not (args.kernel and args.placement and args.sizes):
        raise ValueError("give the cells to watch: --kernel, --placement and --sizes (or --cells TABLE)")
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    return [WatchedCell(args.kernel, p, s) for p in args.placement for s in sizes]
