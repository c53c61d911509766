"""`commlens summary CAMPAIGN|DATASET`: the latency and bandwidth table `commlens run` ends with,
then what gave no data and why; with --per-size, every size of every curve. A row imported from
another suite's files is marked, with a numbered legend line under the table saying where its numbers
come from (commlens.data.origins). A measured point's tail percentiles are shown only where its
launches took samples enough to have a tail (tail_samples), and said in words where they did not."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from commlens.cli.datasets import open_dataset
from commlens.data.origins import curve_marks, curve_origins, legends
from commlens.data.quantities import TAILS
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
    return summary(ds, path, check=args.check, per_size=args.per_size)


def summary(ds, path: Path, check: bool = False, per_size: bool = False) -> int:
    """The table, then which library rows and launches gave no data and why. With `check`, returns 1
    when anything did (what `commlens run` exits with, after the dataset and report are written).

    Per curve: at its smallest size the time's mean, P50 (the median), P90 and P99 (as OSU's -z),
    at its largest the bandwidth, all as ds.commlens.summary() gives them (and so as the report);
    a tail its launches had too few samples for is '-', and a line under the table says how few.
    With `per_size`, then every size of every curve (per_size_blocks)."""
    print(f"dataset: {path}")
    asked = [s for s in ds["status"].values.ravel().tolist() if s != "skipped"]
    print(f"launches: {asked.count('ok')} ok of {len(asked)}")
    rows, few = summary_rows(ds)
    print(format_table(rows))
    for number, legend in enumerate(legends(curve_origins(ds))[1], start=1):
        print(f"[{number}] {legend}")
    for note in few:
        print(note)
    if per_size:
        for block in per_size_blocks(ds):
            print()
            print(block)
    return 1 if _missing(ds, path) and check else 0


def launch_counts(ds) -> np.ndarray:
    """Samples each launch took of each point, (library, placement, kernel, size, launch)."""
    return ds["sample_count"].transpose("library", "placement", "kernel", "size", "launch").values


def too_few_samples(counts) -> tuple[list[str], str]:
    """The TAILS a point's launches took too few samples for (`counts`: each launch's, 0 where a launch did
    not measure it), as headers, and in words how few: (['P90', 'P99'], 'need 10 and 100 samples a launch,
    had 1'). Its fewest samples in a launch decide: each launch's percentiles are its own."""
    taken = [int(n) for n in np.ravel(counts) if n > 0]
    fewest, most = min(taken, default=0), max(taken, default=0)
    hidden = [name for name, needed in TAILS.items() if fewest < needed]
    if not hidden:
        return [], ""
    needed = " and ".join(str(TAILS[name]) for name in hidden)
    had = f"{fewest} to {most}" if most != fewest else str(fewest)
    return [name.upper() for name in hidden], \
        f"need{'s' if len(hidden) == 1 else ''} {needed} samples a launch, had {had}"


def summary_rows(ds) -> tuple[list[list[str]], list[str]]:
    """One row of COLUMNS' cells per measured curve; a curve without data has 'no data' and its
    launches' outcomes in place of the numbers. An imported curve's last cell is its mark and the
    number of its legend line (origins.legends): 'imported [1]', 'imported, partial [2]'. A measured
    curve's P90 and P99 are '-' where its launches took too few samples for them (too_few_samples); then
    a line, besides the rows, says how few."""
    stats = ds.commlens.summary(ci=False)[["median", *TIMES, "bandwidth"]]
    marks = curve_marks(curve_origins(ds))
    counts = launch_counts(ds)
    rows = []
    few: dict[tuple[str, ...], list] = {}   # {tails left out: [(labels, size, its launches' counts)]}
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
                index = _index(ds, labels, int(small["size"]))
                hidden = _unshown_tails(counts[index], marks, labels)[0]
                if hidden:
                    few.setdefault(tuple(hidden), []).append((labels, int(small["size"]), counts[index]))
                rows.append(labels + [format_size(int(small["size"]))] + _times(small, hidden)
                            + [format_size(int(large["size"])), bandwidth or "-", marks.get(tuple(labels), "")])
    return rows, [_few_line(hidden, points) for hidden, points in few.items()]


def _few_line(hidden: tuple[str, ...], points: list) -> str:
    """What the table's '-' tails are: a curve's own words, or for several curves with the same tails left out
    one line over all their launches, so that a large campaign's table is not followed by a line a curve."""
    if len(points) == 1:
        labels, size, counts = points[0]
        return (f"{', '.join(labels)} at {format_size(size)}: {', '.join(hidden)} not shown: "
                f"{too_few_samples(counts)[1]}")
    words = too_few_samples(np.concatenate([np.ravel(counts) for _, _, counts in points]))[1]
    return (f"{', '.join(hidden)} not shown for {len(points)} curves at their smallest size: {words} "
            f"(--per-size: each size's)")


def _index(ds, labels, size: int) -> tuple[int, ...]:
    """A point's position in launch_counts: its library, placement, kernel and size."""
    return tuple(int(np.flatnonzero(ds[dim].values == label)[0])
                 for dim, label in zip(("library", "placement", "kernel", "size"), (*labels, size)))


def _unshown_tails(counts, marks: dict, labels) -> tuple[list[str], str]:
    """too_few_samples of a point of a measured curve (`counts`: its launches'); none of an imported one,
    whose tails are as its files report them (from the suite's own iterations, which the dataset lacks)."""
    return ([], "") if tuple(labels) in marks else too_few_samples(counts)


def _times(point, hidden: list[str]) -> list[str]:
    """TIMES' cells of one point in us; '-' where not measured, or a tail in `hidden`."""
    return [("" if name.upper() in hidden else format_us(float(point[name]))) or "-" for name in TIMES]


PER_SIZE_COLUMNS = ("bytes", "samples", "launches", "mean", "P50", "P90", "P99", "MB/s")


def per_size_blocks(ds) -> list[str]:
    """Per curve with data, a heading ('mpich-5.0.2, 1N2P, pingpong.send: ...', and its mark if imported) and
    a row per size it measured: bytes, samples (over its launches), launches, the time's mean, P50 (the
    median), P90 and P99 in us as ds.commlens.summary() gives them, and MB/s from the median ('-' at 0 B).
    A tail its launches took too few samples for is '-', with the words of too_few_samples at the row's end."""
    stats = ds.commlens.summary(ci=False)[["median", "count", "launches", *TIMES, "bandwidth"]]
    marks = curve_marks(curve_origins(ds))
    counts = launch_counts(ds)
    blocks = []
    for lib in ds.library.values:
        for pl in ds.placement.values:
            for k in ds.kernel.values:
                curve = stats.sel(library=lib, placement=pl, kernel=k)
                curve = curve.isel(size=np.flatnonzero(np.isfinite(curve["median"].values)))
                if curve.sizes["size"] == 0:
                    continue
                labels = [str(lib), str(pl), str(k)]
                rows = [[*PER_SIZE_COLUMNS, ""]]
                for i in range(curve.sizes["size"]):
                    point = curve.isel(size=i)
                    size = int(point["size"])
                    hidden, words = _unshown_tails(counts[_index(ds, labels, size)], marks, labels)
                    bandwidth = (format_mbps(float(point["bandwidth"])) if size else "") or "-"
                    rows.append([str(size), str(int(point["count"])), str(int(point["launches"])),
                                 *_times(point, hidden), bandwidth,
                                 f"{', '.join(hidden)} not shown: {words}" if hidden else ""])
                widths = [max(len(row[i]) for row in rows) for i in range(len(PER_SIZE_COLUMNS))]
                lines = [GAP + GAP.join(cell.rjust(width) for cell, width in zip(row, widths))
                         + (GAP + row[-1] if row[-1] else "") for row in rows]
                mark = marks.get(tuple(labels))
                heading = f"{', '.join(labels)}: time (us; P50 is the median), bandwidth from the median" \
                    + (f"  {mark}" if mark else "")
                blocks.append("\n".join([heading, *lines]))
    return blocks


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

    titles: list[str | None] = [" " * widths[i] for i in range(len(COLUMNS))]   # None: inside a group's title
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
