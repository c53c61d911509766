"""`commlens summary CAMPAIGN|DATASET`: the latency and bandwidth table `commlens run` ends with,
then what gave no data and why. A row imported from another suite's files is marked, with a
numbered legend line under the table saying where its numbers come from (commlens.data.origins)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from commlens.cli.datasets import open_dataset
from commlens.data.origins import curve_marks, curve_origins, legends
from commlens.units import format_mbps, format_size, format_us

TIMES = ("mean", "p50", "p90", "p99")
# Columns of the table: (header, left-aligned); two groups of them carry a title above.
COLUMNS = (("library", True), ("placement", True), ("kernel", True), ("size", False), ("mean", False),
           ("P50", False), ("P90", False), ("P99", False), ("size", False), ("MB/s", False),
           ("", True))          # where the row comes from: empty (measured here) or 'imported [1]'
GROUPS = ((3, 8, "time (us) at the smallest size"), (8, 10, "bandwidth at the largest"))
GAP = "  "


def summary_command(args) -> int:
    path, ds = open_dataset(args.target)
    return summary(ds, path, check=args.check)


def summary(ds, path: Path, check: bool = False) -> int:
    """The table, then which library rows and launches gave no data and why. With `check`, returns 1
    when anything did (what `commlens run` exits with, after the dataset and report are written).

    Per curve: at its smallest size the time's mean, P50 (the median), P90 and P99 (as OSU's -z),
    at its largest the bandwidth, all as ds.commlens.summary() gives them (and so as the report)."""
    print(f"dataset: {path}")
    asked = [s for s in ds["status"].values.ravel().tolist() if s != "skipped"]
    print(f"launches: {asked.count('ok')} ok of {len(asked)}")
    print(format_table(summary_rows(ds)))
    for number, legend in enumerate(legends(curve_origins(ds))[1], start=1):
        print(f"[{number}] {legend}")
    return 1 if _missing(ds, path) and check else 0


def summary_rows(ds) -> list[list[str]]:
    """One row of COLUMNS' cells per measured curve; a curve without data has 'no data' and its
    launches' outcomes in place of the numbers. An imported curve's last cell is its mark and the
    number of its legend line (origins.legends): 'imported [1]', 'imported, partial [2]'."""
    stats = ds.commlens.summary(ci=False)[["median", *TIMES, "bandwidth"]]
    marks = curve_marks(curve_origins(ds))
    rows = []
    for lib in ds.library.values:
        for pl in ds.placement.values:
            for k in ds.kernel.values:
                status = ds["status"].sel(library=lib, placement=pl, kernel=k).values.ravel().tolist()
                if all(s == "skipped" for s in status):
                    continue
                labels = [str(lib), str(pl), str(k)]
                curve = stats.sel(library=lib, placement=pl, kernel=k)
                curve = curve.isel(size=np.flatnonzero(np.isfinite(curve["median"].values)))
                if curve.sizes["size"] == 0:
                    outcomes = Counter(s for s in status if s != "skipped")
                    rows.append(labels + ["no data (launches: " + ", ".join(f"{n} {s}" for s, n in outcomes.items())
                                          + ")"])
                    continue
                small, large = curve.isel(size=0), curve.isel(size=-1)
                bandwidth = format_mbps(float(large["bandwidth"])) if int(large["size"]) else "-"
                rows.append(labels + [format_size(int(small["size"]))]
                            + [format_us(float(small[name])) or "-" for name in TIMES]   # -: not measured
                            + [format_size(int(large["size"])), bandwidth or "-", marks.get(tuple(labels), "")])
    return rows


def format_table(rows: list[list[str]]) -> str:
    """COLUMNS as wide as their longest cell (a long library row name never runs into the next
    column), GROUPS' titles centred over their columns. A row shorter than COLUMNS (no data) has its
    last cell run on past the columns it stands in."""
    widths = [max([len(header)] + [len(row[i]) for row in rows if len(row) == len(COLUMNS)])
              for i, (header, _) in enumerate(COLUMNS)]
    for first, last, title in GROUPS:     # a title wider than its columns widens them, evenly
        span = sum(widths[first:last]) + len(GAP) * (last - first - 1)
        for i in range(max(len(title) - span, 0)):
            widths[last - 1 - i % (last - first)] += 1
    for row in rows:                       # a short row's labels still line up
        for i, cell in enumerate(row[:-1]):
            widths[i] = max(widths[i], len(cell))

    def line(cells):
        padded = [cell.ljust(width) if left else cell.rjust(width)
                  for cell, width, (_, left) in zip(cells, widths, COLUMNS)]
        if len(cells) < len(COLUMNS):
            padded[-1] = cells[-1]
        return GAP.join(padded).rstrip()

    titles = [" " * widths[i] for i in range(len(COLUMNS))]
    for first, last, title in GROUPS:
        span = sum(widths[first:last]) + len(GAP) * (last - first - 1)
        titles[first:last] = [title.center(span)] + [None] * (last - first - 1)
    title_line = GAP.join(cell for cell in titles if cell is not None).rstrip()
    return "\n".join([title_line, line([header for header, _ in COLUMNS]), *(line(row) for row in rows)])


def _missing(ds, path: Path) -> bool:
    """Prints which library rows and launches gave no data and why; True if any did."""
    failed_rows = [(str(lib), str(st), str(why)) for lib, st, why in zip(
        ds.library.values, ds["library_status"].values, ds["library_reason"].values) if st != "ok"]
    runs = ds.commlens.failed_runs()
    runs = runs[~runs.index.get_level_values("library").isin([lib for lib, _, _ in failed_rows])]
    if not failed_rows and runs.empty:
        return False
    for lib, status, why in failed_rows:
        print(f"library {lib}: {status}, no data: {why}")
    for (lib, pl, k, launch), row in runs.head(10).iterrows():
        print(f"launch {lib}/{pl}/{k}/{launch}: {row['status']}: {row['reason'][:200]}")
    if len(runs) > 10:
        print(f"... and {len(runs) - 10} more launches")
    report = path.parent / "report.html"
    print(f"{len(failed_rows)} library row(s) and {len(runs)} launch(es) gave no data (details: "
          f"{path.parent / 'failures.jsonl'}); the dataset and report hold what did work: {path}"
          + (f", {report}" if report.exists() else ""))
    return True
