"""OSU Micro-Benchmarks console output (any version that prints `# OSU MPI ... Test vX.Y`).

A file is one benchmark's run: its title line, `# Datatype: ...` (one table per datatype with
`-T`), osu_mbw_mr's `[ pairs: N ] [ window size: W ]`, the one-sided tests' `# Window creation`
and `# Synchronization`, the column header (`# Size ...`; osu_barrier has no size), then one row per
size. An MPI library's warnings may come between the lines; they are passed over (a row of numbers
before the title or the column header is not: no OSU output has one). Times are in
microseconds, bandwidths in MB/s (1e6 B/s); every column is kept (commlens.io.importers.common).

OSU does not print its `-m` range: a file is checked against the benchmark's default range (or
the one given as `sizes`), less the sizes smaller than one element of its datatype, and against the
smaller maximum OSU announces when it limits the sizes to its memory limit (`-M`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from commlens.io.importers.common import (MB, US, ImportFileError, InputFile, Measurement, check_complete,
                                           column_kind, doubling, percentile_column, starts_row)

SUITE = "OSU Micro-Benchmarks"
MEAN_LOOP = "mean time per iteration of one timed loop (-i iterations after -x warm-up ones) at rank 0"
COLLECTIVE = ("each rank's mean time per call over -i calls back to back, averaged over the ranks (Avg; -f adds "
              "the Min and Max over the ranks)")


@dataclass(frozen=True)
class Benchmark:
    program: str
    kernel: str
    measures: str                 # what OSU's number is
    differs: str                  # how the commlens kernel's differs
    ranks: int | None = None      # the ranks OSU runs it on (None: any; the file does not say)
    max_size: int = 1 << 22       # OSU's default -m maximum
    options: dict = field(default_factory=dict)   # kernel options the benchmark implies (window 1: latency)
    per_rank_sizes: bool = False  # OSU's size is the whole vector, split over the ranks (reduce_scatter)
    no_sizes: bool = False        # a single row, no size column (barrier)


def _coll(program: str, kernel: str, method: str, **extra) -> Benchmark:
    return Benchmark(program, kernel, COLLECTIVE, f"commlens's {kernel}: {method}", max_size=1 << 20, **extra)


FAN_OUT = "the slowest rank's time per call acknowledged to the root (--method accurate)"
BOUND = "repeated calls timed at rank 0 (--method lower)"
# Title (between "OSU " and " Test", lower case) -> what it measures.
BENCHMARKS = {
    "mpi latency": Benchmark("osu_latency", "pingpong.send", f"half round trip of MPI_Send/MPI_Recv, {MEAN_LOOP}",
                             "commlens: the median of timed batches, sampled to a precision target", ranks=2),
    "mpi multi latency": Benchmark(
        "osu_multi_lat", "multipair.pingpong", f"each pair's half round trip of MPI_Send/MPI_Recv, {MEAN_LOOP} of "
        "each pair, averaged over the pairs", "commlens: the time until the last pair is done"),
    "mpi bandwidth": Benchmark("osu_bw", "stream.uni", "MB/s of windows of -W MPI_Isend (default 64) from rank 0 to "
                               "rank 1 on one buffer, each window acknowledged", "the same pattern; the sample is "
                               "OSU's time per message, size / bandwidth", ranks=2),
    "mpi bi-directional bandwidth": Benchmark(
        "osu_bibw", "stream.bi", "MB/s of windows of -W MPI_Isend both ways between ranks 0 and 1",
        "the same pattern; the sample is OSU's time per message each way, 2 size / bandwidth", ranks=2),
    "mpi multiple bandwidth / message rate": Benchmark(
        "osu_mbw_mr", "multipair.stream", "aggregate MB/s and messages/s of windows of MPI_Isend in every pair "
        "at once", "the same pattern; the sample is OSU's time per message, pairs x size / bandwidth"),
    "mpi_put latency": Benchmark("osu_put_latency", "rma.put", f"one MPI_Put and its synchronisation, {MEAN_LOOP}",
                                 "commlens's rma.put with --window 1", ranks=2, options={"window": 1}),
    "mpi_get latency": Benchmark("osu_get_latency", "rma.get", f"one MPI_Get and its synchronisation, {MEAN_LOOP}",
                                 "commlens's rma.get with --window 1", ranks=2, options={"window": 1}),
    "mpi_put bandwidth": Benchmark("osu_put_bw", "rma.put", "MB/s of windows of -W MPI_Put (default 64) per "
                                   "synchronisation", "the sample is OSU's time per put, size / bandwidth", ranks=2),
    "mpi_get bandwidth": Benchmark("osu_get_bw", "rma.get", "MB/s of windows of -W MPI_Get (default 64) per "
                                   "synchronisation", "the sample is OSU's time per get, size / bandwidth", ranks=2),
    "mpi broadcast latency": _coll("osu_bcast", "coll.bcast", FAN_OUT),
    "mpi scatter latency": _coll("osu_scatter", "coll.scatter", FAN_OUT),
    "mpi scatterv latency": _coll("osu_scatterv", "coll.scatterv", FAN_OUT),
    "mpi reduce latency": _coll("osu_reduce", "coll.reduce", BOUND),
    "mpi gather latency": _coll("osu_gather", "coll.gather", BOUND),
    "mpi gatherv latency": _coll("osu_gatherv", "coll.gatherv", BOUND),
    "mpi allreduce latency": _coll("osu_allreduce", "coll.allreduce", BOUND),
    "mpi allgather latency": _coll("osu_allgather", "coll.allgather", BOUND),
    "mpi allgatherv latency": _coll("osu_allgatherv", "coll.allgatherv", BOUND),
    "mpi all-to-all personalized exchange latency": _coll("osu_alltoall", "coll.alltoall", BOUND),
    "mpi all-to-allv personalized exchange latency": _coll("osu_alltoallv", "coll.alltoallv", BOUND),
    "mpi reduce_scatter latency": _coll(
        "osu_reduce_scatter", "coll.reduce_scatter", BOUND + "; OSU's size is the whole vector, split over the "
        "ranks: its size S is commlens's S / ranks (bytes each rank keeps); sizes that do not split evenly are "
        "not imported", per_rank_sizes=True),
    "mpi barrier latency": _coll("osu_barrier", "coll.barrier", BOUND + "; no size (imported at size 0)",
                                 no_sizes=True),
}
TITLE = re.compile(r"#\s*OSU (?P<api>MPI(?:_\w+)?)(?P<device>-(?:CUDA MANAGED|CUDA|OPENACC|ROCM|MANAGED))?"
                   r" (?P<name>.+?) Test(?: v?(?P<version>\d[\w.]*))?\s*$")
# Column headers -> `reported` name ("" for the columns handled apart). OSU before 7.0: "Latency (us)".
COLUMNS = [
    (r"Avg Latency\s*\(us\)", "avg_latency_s"), (r"Latency\s*\(us\)", "avg_latency_s"),
    (r"Min Latency\s*\(us\)", "min_latency_s"), (r"Max Latency\s*\(us\)", "max_latency_s"),
    (r"P(?P<p>\d+) Tail Lat\s*\(us\)", "latency"), (r"P(?P<p>\d+) Tail BW\s*\(MB/s\)", "bandwidth"),
    (r"Bandwidth\s*\(MB/s\)", "bandwidth_Bps"), (r"MB/s", "bandwidth_Bps"), (r"Messages/s", "message_rate_per_s"),
    (r"Iterations", "iterations"), (r"Validation", "validation"),
]
DATATYPE_BYTES = {"MPI_CHAR": 1, "MPI_BYTE": 1, "MPI_SIGNED_CHAR": 1, "MPI_INT": 4, "MPI_FLOAT": 4, "MPI_DOUBLE": 8}
# OSU's "# Synchronization" -> commlens's --rma-sync, where they are the same calls.
RMA_SYNC = {"MPI_Win_lock/unlock": "lock", "MPI_Win_fence": "fence", "MPI_Win_flush": "flush"}
LIMIT = re.compile(r"Limiting max message size to:\s*(\d+)")
# What the lines after the title may state of the run (osu_mbw_mr's pairs, the one-sided tests'...).
STATED = {"pairs": re.compile(r"pairs:\s*(\d+)"), "window": re.compile(r"window size:\s*(\d+)"),
          "window_creation": re.compile(r"^#\s*Window creation:\s*(\S+)"),
          "synchronization": re.compile(r"^#\s*Synchronization:\s*(\S+)"), "limit": LIMIT}


def parse_osu_sizes(text: str) -> tuple[int, int | None]:
    """(min, max) of an OSU -m argument: MIN:MAX, MAX or MIN: (max None: the benchmark's default)."""
    low, sep, high = text.partition(":")
    try:
        if not sep:
            return 1, int(low)
        return int(low) if low else 1, int(high) if high else None
    except ValueError:
        raise ValueError(f"--osu-sizes {text}: expected MIN:MAX, MAX or MIN: in bytes, as OSU's -m") from None


def known() -> str:
    return ", ".join(b.program for b in BENCHMARKS.values())


def read_osu(path, nprocs: int, sizes: tuple[int, int | None] | None = None,
             partial: bool = False) -> list[Measurement]:
    """The tables of one OSU output file run on `nprocs` ranks (a table per datatype). `sizes` is the
    -m MIN:MAX the run was given (default, or MAX None: the benchmark's own); a table that stops short
    of it is refused unless `partial`, when it is imported marked partial. The file is read a line at a time,
    each row checked as it comes: a file that is no OSU output is refused at its first row."""
    source = InputFile(path)
    path = source.path
    title_line, title, bench, first = None, None, None, ""
    stated: dict[str, int | str] = {}
    tables: list[_Table] = []
    datatype = "unknown (not printed)"
    for number, line in source.lines():
        text = line.strip()
        if match := TITLE.search(text):
            if title is not None:
                raise ImportFileError(path, f"holds more than one OSU output (titles at lines {title_line} and "
                                            f"{number}); give each run its own file", number)
            title_line, title, bench = number, match, _benchmark(path, match, number, nprocs)
        elif bench is None:        # no title yet (read with it)
            if starts_row(text):          # refused here, not after reading a file of numbers to its end
                raise ImportFileError(path, f"not an OSU Micro-Benchmarks output: no '# OSU ... Test' title line "
                                            f"before its first row of numbers (line {number}: {text[:120]!r}); "
                                            f"known benchmarks: {known()}")
            first = first or text
        else:
            _state(stated, text)
            if match := re.match(r"^#\s*Datatype:\s*(\S+?)\.?$", text):
                datatype = match.group(1)
            elif re.match(r"^#\s*Size\b", text) or (bench.no_sizes and re.match(r"^#\s*(Avg )?Latency", text)):
                if tables:
                    _end(path, tables[-1], partial)
                header = re.sub(r"^#\s*(Size\s*)?", "", text)
                tables.append(_Table(datatype, number, _columns(path, number, header)))
            elif starts_row(text):
                if not tables:
                    raise ImportFileError(path, "a row of numbers before any column header ('# Size ...'): OSU "
                                                "prints its header before its rows", number)
                tables[-1].add(source, number, text.split(), bench)
    if title is None or bench is None:
        raise ImportFileError(path, f"not an OSU Micro-Benchmarks output: no '# OSU ... Test' title line "
                                    f"(first line: {first[:120]!r}); known benchmarks: {known()}")
    if not tables:
        raise ImportFileError(path, "no column header after the title line (did the run fail?)", title_line)
    _end(path, tables[-1], partial)
    pairs = stated.get("pairs")
    if pairs is not None and 2 * pairs != nprocs:
        raise ImportFileError(path, f"{bench.program} ran {pairs} pairs ({2 * pairs} ranks, the file's '[ pairs: "
                                    f"{pairs} ]'), but the placement has {nprocs} ranks; name the placement it ran on")
    provenance = {**source.provenance(), "suite": SUITE, "benchmark": bench.program, "version": title["version"],
                  "title": title.group(0).lstrip("# ").strip(),
                  "ranks_stated": 2 * pairs if pairs else bench.ranks or "unknown (the file does not say)",
                  **{key: value for key, value in stated.items() if key != "limit"}}
    return [_measurement(path, bench, table, provenance, nprocs, sizes, stated.get("limit"), partial)
            for table in tables]


def _benchmark(path: Path, title: re.Match, line: int, nprocs: int) -> Benchmark:
    """The benchmark a title line names, if commlens imports it and it can have run on `nprocs` ranks."""
    name = f"{title['api']} {title['name']}".lower()
    if title["device"]:
        raise ImportFileError(path, f"an OSU {title['device'][1:]} run (device buffers); commlens measures host "
                                    f"memory", line)
    if name not in BENCHMARKS:
        raise ImportFileError(path, f"'{title.group(0).lstrip('# ')}' is not a benchmark a commlens kernel "
                                    f"measures alike; imported: {known()}", line)
    bench = BENCHMARKS[name]
    if bench.ranks and bench.ranks != nprocs:
        raise ImportFileError(path, f"{bench.program} runs on {bench.ranks} ranks, but the placement has {nprocs}; "
                                    f"name the placement it ran on")
    return bench


def _state(stated: dict, text: str) -> None:
    """What a line after the title states of the run: pairs, window, window creation, sync, limit."""
    for key, pattern in STATED.items():
        if match := pattern.search(text):
            stated[key] = int(match.group(1)) if match.group(1).isdigit() else match.group(1)


@dataclass
class _Table:
    """One table after the title: its datatype, header line, columns [(key, header)] and rows, each
    (size, column...) checked as it is read; `short` is a row with fewer fields than the header,
    refused unless it is the table's last (the file was cut inside it); `cut` says so."""
    datatype: str
    line: int
    columns: list[tuple[str, str]]
    rows: list[list[float]] = field(default_factory=list)
    short: tuple[int, list[str]] | None = None
    cut: str = ""

    def add(self, source: InputFile, number: int, fields: list[str], bench: Benchmark) -> None:
        fields = ["0", *fields] if bench.no_sizes else fields      # osu_barrier: size 0
        if self.short:
            raise ImportFileError(source.path, _mismatch(self.short[1], len(self.columns) + 1), self.short[0])
        if len(fields) < len(self.columns) + 1:
            self.short = number, fields
            return
        if len(fields) > len(self.columns) + 1:
            raise ImportFileError(source.path, _mismatch(fields, len(self.columns) + 1), number)
        kinds = [("Size", "size"), *((header, _kind(key)) for key, header in self.columns)]
        row = source.values(number, fields, kinds)
        if self.rows and row[0] <= self.rows[-1][0]:
            raise ImportFileError(source.path, f"size {fields[0]} after {self.rows[-1][0]:.0f}: sizes do not "
                                               f"increase row by row: not one run's table", number)
        self.rows.append(row)


def _end(path: Path, table: _Table, partial: bool) -> None:
    """A table is over: a last row cut short is why it is partial (refused unless `partial`)."""
    if table.short:
        number, fields = table.short
        table.cut = f"truncated: the last row is incomplete ({_mismatch(fields, len(table.columns) + 1)})"
        if not partial:
            raise ImportFileError(path, table.cut + "; give --partial to import the rows before it, marked partial",
                                  number)
    if not table.rows:
        raise ImportFileError(path, "an OSU header without a single measured row (did the run fail?)", table.line)


def _mismatch(fields: list[str], width: int) -> str:
    return f"a row of {len(fields)} fields where the header has {width}: {' '.join(fields)!r}"


def _kind(key: str) -> str:
    """What a column's numbers may be (commlens.io.importers.common.ALLOWED)."""
    return {"iterations": "count", "validation": "check"}.get(key) or column_kind(key)


def _columns(path: Path, number: int, text: str) -> list[tuple[str, str]]:
    columns, rest = [], text.strip()
    while rest:
        for pattern, key in COLUMNS:
            if match := re.match(pattern, rest):
                if key in ("latency", "bandwidth"):
                    key = percentile_column(int(match["p"]), key)
                columns.append((key, match.group(0)))
                rest = rest[match.end():].strip()
                break
        else:
            raise ImportFileError(path, f"unknown column {rest[:40]!r}; known columns: Avg Latency(us), Latency "
                                        f"(us), Min/Max Latency(us), PNN Tail Lat(us), Bandwidth (MB/s), MB/s, "
                                        f"PNN Tail BW(MB/s), Messages/s, Iterations, Validation", number)
    return columns


def _measurement(path: Path, bench: Benchmark, table: _Table, provenance: dict, nprocs: int, sizes, limit,
                 partial: bool) -> Measurement:
    columns, line = table.columns, table.line
    rows, cut = np.array(table.rows), table.cut
    keys = [key for key, _ in columns]
    values = {key: rows[:, i + 1] for i, key in enumerate(keys)}
    reported = {key: column * _unit(key) for key, column in values.items() if key not in ("iterations", "validation")}
    sample = "avg_latency_s" if "avg_latency_s" in reported else "bandwidth_Bps" if "bandwidth_Bps" in reported \
        else None
    if sample is None:
        raise ImportFileError(path, f"{bench.program}: no latency or bandwidth column among "
                                    f"{[name for _, name in columns]}", line)
    if sample == "bandwidth_Bps" and (reported[sample] <= 0).any():
        bad = int(rows[np.flatnonzero(reported[sample] <= 0)[0], 0])
        raise ImportFileError(path, f"{bench.program} reports no bandwidth at size {bad}: a time per message cannot "
                                    f"be derived from it", line)
    file_sizes = rows[:, 0].astype(np.int64)
    datatype = table.datatype
    low, high = sizes or (1, None)
    high = high or bench.max_size
    high = min(high, limit) if limit else high
    element = DATATYPE_BYTES.get(datatype, 1)
    expected = [0] if bench.no_sizes else [s for s in doubling(low, high) if s // element > 0]
    what = f"{bench.program} ({'-m ' + f'{low}:{high}' if sizes else 'its default sizes'})"
    why = cut or check_complete(path, file_sizes, expected, what, partial,
                                "" if sizes else " (or --osu-sizes MIN:MAX, if the run was given -m MIN:MAX)")
    percentiles = {int(key[1:].split("_")[0]) / 100: reported[key] for key in reported
                   if key.startswith("p") and key.endswith("latency_s")}
    if percentiles and 0.5 not in percentiles:
        raise ImportFileError(path, "percentile columns without the P50", line)
    measured_sizes, keep = _kernel_sizes(bench, file_sizes, nprocs)
    options = {**bench.options, **({"window": provenance["window"]} if "window" in provenance else {}),
               **({"sync": RMA_SYNC[provenance["synchronization"]]}
                  if provenance.get("synchronization") in RMA_SYNC else {})}
    return Measurement(
        path=path, suite=SUITE, benchmark=bench.program, kernel=bench.kernel,
        metric=f"{bench.program}: {bench.measures}; {bench.differs}", sizes=measured_sizes,
        reported={key: column[keep] for key, column in reported.items()}, sample=sample,
        percentiles={q: column[keep] for q, column in percentiles.items()},
        iterations=values["iterations"][keep].astype(np.int64) if "iterations" in values else None,
        errors=values["validation"][keep] if "validation" in values else None,
        nprocs=provenance["ranks_stated"] if isinstance(provenance["ranks_stated"], int) else None, options=options,
        kind={"benchmark": bench.program, "version": provenance["version"] or "unknown", "datatype": datatype,
              "options": " ".join(_options(keys)),
              **{key: str(provenance[key]) for key in ("pairs", "window", "window_creation", "synchronization")
                 if key in provenance}},
        partial=why, provenance={**provenance, "datatype": datatype, "columns": [name for _, name in columns],
                                 "options": _options(keys), "partial": why,
                                 "not_imported": [f"{int(s)} B (does not split evenly over {nprocs} ranks)"
                                                  for s in file_sizes[~keep]]})


def _unit(key: str) -> float:
    """What turns the column's printed numbers into SI units: us -> s, MB/s -> B/s."""
    return MB if key.endswith("_Bps") else 1.0 if key.endswith("per_s") else US


def _kernel_sizes(bench: Benchmark, sizes: np.ndarray, nprocs: int) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's sizes of the file's, and which of the file's rows they keep."""
    if not bench.per_rank_sizes:
        return sizes, np.ones(len(sizes), dtype=bool)
    keep = sizes % nprocs == 0
    return sizes[keep] // nprocs, keep


def _options(keys: list[str]) -> list[str]:
    """The OSU options the columns show were given (-z with its percentiles where not OSU's default)."""
    shown = []
    if any(k.startswith("p") and k[1].isdigit() for k in keys):
        given = sorted(int(key[1:].split("_")[0]) for key in keys if key.startswith("p") and key[1].isdigit())
        shown.append("-z" if given == [50, 90, 99] else "-z" + ",".join(map(str, given)))
    return shown + [option for option, key in (("-f", "iterations"), ("-c", "validation")) if key in keys]

