"""Intel MPI Benchmarks (IMB-MPI1) output tables.

A file holds one IMB-MPI1 run: a `# Intel(R) MPI Benchmarks <version>, MPI-1 part` banner, the
calling sequence, the message lengths (`# Minimum/Maximum message length in bytes`, from -msglog),
the datatypes, the `# List of Benchmarks to run`, then one table per benchmark and process count:

    # Benchmarking PingPong
    # #processes = 2
    # ( 2 additional processes waiting in MPI_Barrier)
    #---------------------------------------------------
           #bytes #repetitions      t[usec]   Mbytes/sec

and last `# All processes entering MPI_Finalize`. Point-to-point tables print t[usec]; the others
t_min, t_max and t_avg over the ranks, each kept in its own `reported` column; the sample is t, or
t_max (the slowest rank, from which IMB's Mbytes/sec is computed). A run on N ranks repeats the
parallel and collective tables for 2, 4, ... processes: the table that ran on all of the placement's
ranks is taken (point-to-point: two, the others waiting), the rest are listed as not imported.
A run is checked against what its header says it was to run: every listed benchmark's table for the
placement's ranks, every message length of the header's range, and the closing line.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np

from commlens.io.importers.common import (MB, US, ImportFileError, InputFile, Measurement, check_complete,
                                           checked_value, column_kind, doubling, starts_row)

SUITE = "Intel MPI Benchmarks"
SLOWEST = "the slowest rank's mean time per call over #repetitions (IMB's t_max; t_min and t_avg kept beside it)"
LOWER = "commlens: repeated calls timed at rank 0 (--method lower), the median of timed batches"
# IMB-MPI1 benchmark -> (commlens kernel, what IMB's number is and how the kernel's differs)
BENCHMARKS = {
    "PingPong": ("pingpong.send", "half round trip of MPI_Send/MPI_Recv, mean over #repetitions at rank 0 (IMB's "
                                  "t); commlens: the median of timed batches"),
    "PingPing": ("pingping", "time per iteration in which both ranks MPI_Isend and MPI_Recv one message at once, "
                             "mean over #repetitions (IMB's t; its Mbytes/sec counts one direction, commlens's "
                             "bandwidth both)"),
    "Sendrecv": ("exchange.sendrecv", f"time per MPI_Sendrecv in a periodic chain of all the ranks, {SLOWEST}; "
                                      "commlens: ranks 0 and 1 only (the same on two ranks)"),
    "Exchange": ("ring.waitall4", f"time per iteration of MPI_Isend to both neighbours in a periodic chain, "
                                  f"MPI_Recv from both, MPI_Waitall, {SLOWEST}; commlens's ring.waitall4: 2 "
                                  f"MPI_Irecv, 2 MPI_Isend, MPI_Waitall(4), timed at rank 0"),
    "Bcast": ("coll.bcast", f"MPI_Bcast, {SLOWEST}; commlens: the slowest rank's time per call acknowledged to "
                            f"the root (--method accurate)"),
    "Scatter": ("coll.scatter", f"MPI_Scatter, {SLOWEST}; commlens: --method accurate"),
    "Scatterv": ("coll.scatterv", f"MPI_Scatterv, {SLOWEST}; commlens: --method accurate"),
    "Allreduce": ("coll.allreduce", f"MPI_Allreduce (MPI_FLOAT), {SLOWEST}; {LOWER}"),
    "Reduce": ("coll.reduce", f"MPI_Reduce (MPI_FLOAT), {SLOWEST}; {LOWER}"),
    "Allgather": ("coll.allgather", f"MPI_Allgather, {SLOWEST}; {LOWER}"),
    "Allgatherv": ("coll.allgatherv", f"MPI_Allgatherv, {SLOWEST}; {LOWER}"),
    "Alltoall": ("coll.alltoall", f"MPI_Alltoall, {SLOWEST}; {LOWER}"),
    "Alltoallv": ("coll.alltoallv", f"MPI_Alltoallv, {SLOWEST}; {LOWER}"),
    "Gather": ("coll.gather", f"MPI_Gather, {SLOWEST}; {LOWER}"),
    "Gatherv": ("coll.gatherv", f"MPI_Gatherv, {SLOWEST}; {LOWER}"),
    "Barrier": ("coll.barrier", f"MPI_Barrier, {SLOWEST} (no size: imported at size 0); {LOWER}"),
}
TWO_RANKS = ("PingPong", "PingPing")
REDUCTIONS = ("Allreduce", "Reduce")
BANNER = re.compile(r"Intel\s*\(R\)\s*MPI Benchmarks\s+(?P<version>[\w.]+)(?:,\s*(?P<part>\S+) part)?")
BENCHMARKING = re.compile(r"^#\s*Benchmarking\s+(?P<multi>Multi-)?(?P<name>\S+)")
FINALIZE = "All processes entering MPI_Finalize"
# Columns -> `reported` name; #bytes and #repetitions are the size and iters_per_sample.
COLUMNS = {"t[usec]": "t_s", "t_min[usec]": "t_min_s", "t_max[usec]": "t_max_s", "t_avg[usec]": "t_avg_s",
           "Mbytes/sec": "bandwidth_Bps", "Msg/sec": "message_rate_per_s"}
# Options of the calling sequence that change what a table measures (the others choose what runs).
MEASUREMENT_OPTIONS = ("-off_cache", "-iter", "-iter_policy", "-time", "-mem", "-sync", "-root_shift",
                       "-imb_barrier", "-warm_up", "-zero_size", "-data_type", "-red_data_type", "-contig_type")


def read_imb(path, nprocs: int, partial: bool = False) -> list[Measurement]:
    """The tables of an IMB-MPI1 output that ran on `nprocs` ranks and that a commlens kernel
    measures alike, one Measurement each; every other table is named in their provenance. A run
    cut short is refused unless `partial`, when what it has is imported, marked partial (less a
    last row cut in two). The file is read a line at a time: the rows of the tables imported are
    checked as they come, the others' are passed over."""
    source = InputFile(path)
    path = source.path
    blocks: list[dict] = []
    banner, first, header, finished = None, "", _Header(), False
    for number, line in source.lines():
        text = line.strip()
        if banner is None and (banner := BANNER.search(line)) is None:
            if starts_row(text):          # refused here, not after reading a file of numbers to its end
                raise ImportFileError(path, f"not an IMB output: no 'Intel(R) MPI Benchmarks <version>, MPI-1 part' "
                                            f"banner before its first row of numbers (line {number}: "
                                            f"{text[:120]!r})")
            first = first or text
        finished = finished or FINALIZE in line
        header.read(text)
        if match := BENCHMARKING.match(text):
            blocks.append({"name": match["name"], "multi": bool(match["multi"]), "processes": 0, "idle": 0,
                           "columns": None, "rows": [], "line": number})
        elif not blocks:
            continue
        elif match := re.match(r"^#\s*#processes\s*=\s*(\d+)", text):
            blocks[-1]["processes"] = int(match.group(1))
        elif match := re.match(r"^#\s*\(\s*(\d+) additional process", text):
            blocks[-1]["idle"] = int(match.group(1))
        elif blocks[-1]["columns"] is None and text.startswith(("#bytes", "#repetitions")):
            blocks[-1]["columns"] = text.split()
            if _taken(blocks[-1], nprocs):
                _check_columns(path, blocks[-1])
        elif blocks[-1]["columns"] and starts_row(text) and _taken(blocks[-1], nprocs):
            _add_row(source, blocks[-1], number, text.split())
    if banner is None:
        raise ImportFileError(path, f"not an IMB output: no 'Intel(R) MPI Benchmarks <version>, MPI-1 part' banner "
                                    f"(first line: {first[:120]!r})")
    if banner["part"] not in (None, "MPI-1"):
        raise ImportFileError(path, f"an IMB {banner['part']} output; commlens imports IMB-MPI1's tables "
                                    f"({', '.join(BENCHMARKS)})")
    stated = header.stated()
    provenance = {**source.provenance(), "suite": SUITE, "version": banner["version"], **stated,
                  "ranks_stated": nprocs}
    taken, not_imported = [], []
    for block in blocks:
        name, processes = block["name"], block["processes"]
        where = f"{name} on {processes} processes"
        if block["multi"]:
            not_imported.append(f"Multi-{where} (multi mode)")
        elif name not in BENCHMARKS:
            not_imported.append(f"{where} (no commlens kernel measures it)")
        elif not _taken(block, nprocs):
            not_imported.append(f"{where} (the placement has {nprocs} ranks)")
        else:
            taken.append(block)
    found = ", ".join(f"{b['name']} on {b['processes']}+{b['idle']} processes" for b in blocks) or "no tables"
    if not any(b["processes"] + b["idle"] == nprocs for b in blocks) and blocks:
        raise ImportFileError(path, f"ran on {max(b['processes'] + b['idle'] for b in blocks)} ranks (its tables: "
                                    f"{found}), but the placement has {nprocs}; name the placement it ran on")
    unfinished = _unfinished(stated, blocks, taken, finished, nprocs)
    if unfinished and not partial:
        raise ImportFileError(path, f"truncated: {unfinished}; give --partial to import what it has, marked "
                                    f"partial")
    if not taken:
        raise ImportFileError(path, f"no table to import for {nprocs} ranks; found: {found}; commlens imports "
                                    f"{', '.join(BENCHMARKS)} run on all of the placement's ranks")
    provenance["not_imported"] = not_imported
    # The table being written when the file was cut may end in a row cut in two: it is left out.
    cut = blocks[-1] if not finished and blocks else None
    return [_measurement(path, block, provenance, nprocs, stated, unfinished, partial, block is cut)
            for block in taken]


def _taken(block: dict, nprocs: int) -> bool:
    """Whether a table is one to import: a benchmark a kernel measures alike, on the placement's
    ranks (point-to-point: two of them, the others waiting)."""
    processes, world = block["processes"], block["processes"] + block["idle"]
    return (not block["multi"] and block["name"] in BENCHMARKS and world == nprocs
            and (processes == nprocs or block["name"] in TWO_RANKS))


class _Header:
    """What the header says of the run, read a line at a time until its list of benchmarks ends:
    its calling sequence, options, message lengths, benchmarks."""

    def __init__(self):
        self.command, self.min_size, self.max_size, self.benchmarks = "", None, None, []
        self.command_next = self.listing = self.over = False

    def read(self, line: str) -> None:
        if self.over:
            return
        text = line.lstrip("#").strip()
        if line.startswith("# Calling sequence was"):
            self.command_next = True
        elif self.command_next and text:
            self.command, self.command_next = text, False
        elif match := re.match(r"(Minimum|Maximum) message length in bytes:\s*(\d+)", text):
            setattr(self, "min_size" if match.group(1) == "Minimum" else "max_size", int(match.group(2)))
        elif text.startswith("List of Benchmarks to run"):
            self.listing = True
        elif self.listing and re.fullmatch(r"[A-Za-z][\w-]*", text):
            self.benchmarks.append(text)
        elif self.listing and text.startswith("-"):
            self.over = True

    def stated(self) -> dict:
        try:
            words = shlex.split(self.command)
        except ValueError:
            words = self.command.split()
        options = {word: words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("-") else ""
                   for i, word in enumerate(words) if word in MEASUREMENT_OPTIONS}
        return {"command": self.command, "min_size": self.min_size, "max_size": self.max_size,
                "benchmarks": self.benchmarks, "options": options}


def _unfinished(header: dict, blocks: list[dict], taken: list[dict], finished: bool, nprocs: int) -> str:
    """Why the run is not all there ('' when it is): the closing line, or a listed benchmark's table
    (IMB runs every benchmark on all the ranks, whatever -npmin)."""
    if not finished:
        last = f"in {blocks[-1]['name']} on {blocks[-1]['processes']} processes" if blocks else "before any table"
        return f"no '# {FINALIZE}' line: the run was cut short ({last})"
    have = {block["name"] for block in taken}
    missing = [name for name in header["benchmarks"] if name in BENCHMARKS and name not in have]
    return f"the header lists {', '.join(missing)}, with no table for {nprocs} ranks" if missing else ""


def _columns(block: dict) -> list[str]:
    """A table's columns, #bytes first (Barrier prints none: its rows are at size 0)."""
    columns = block["columns"] or []
    return columns if "#bytes" in columns else ["#bytes", *columns]


def _check_columns(path: Path, block: dict) -> None:
    columns, name = block["columns"] or [], block["name"]
    if "#repetitions" not in columns or not set(columns) & {"t[usec]", "t_max[usec]"}:
        raise ImportFileError(path, f"the {name} table has columns {columns}; expected #bytes, #repetitions and "
                                    f"t[usec] or t_min/t_max/t_avg[usec]", block["line"])
    unknown = [c for c in columns if c not in COLUMNS and c not in ("#bytes", "#repetitions")]
    if unknown:
        raise ImportFileError(path, f"the {name} table has columns {unknown} commlens does not know; known: "
                                    f"#bytes, #repetitions, {', '.join(COLUMNS)}", block["line"])


def _add_row(source: InputFile, block: dict, number: int, fields: list[str]) -> None:
    """A row of a table to import: its numbers checked, or, where it has not a field a column (IMB's
    time-out. or out-of-mem., a row cut in two), its size checked and its text kept."""
    columns = _columns(block)
    fields = fields if block["columns"][0] == "#bytes" else ["0", *fields]
    if len(fields) != len(columns):
        checked_value(source.path, number, fields[0], "#bytes", "size")
        block["rows"].append((number, fields, None))
        return
    kinds = [(column, "size" if column == "#bytes" else "count" if column == "#repetitions"
              else column_kind(COLUMNS[column])) for column in columns]
    block["rows"].append((number, fields, source.values(number, fields, kinds)))


def _measurement(path: Path, block: dict, provenance: dict, nprocs: int, header: dict, unfinished: str,
                 partial: bool, cut: bool) -> Measurement:
    name, columns = block["name"], _columns(block)
    kernel, meaning = BENCHMARKS[name]
    _check_columns(path, block)            # a table whose columns line never came
    rows, failed = [], []
    for index, (_number, fields, values) in enumerate(block["rows"]):
        if cut and index == len(block["rows"]) - 1 and len(fields) < len(columns):
            break
        if values is None:
            failed.append(f"{fields[0]} B ({' '.join(fields[1:])[:60]})")   # IMB's time-out. / out-of-mem.
            continue
        rows.append(values)
    if not rows:
        raise ImportFileError(path, f"the {name} table has no measured row", block["line"])
    table = np.array(rows)
    values = dict(zip(columns, table.T))
    reported = {COLUMNS[c]: values[c] * (MB if c == "Mbytes/sec" else 1.0 if c == "Msg/sec" else US)
                for c in columns if c in COLUMNS}
    sizes = values["#bytes"].astype(np.int64)
    present = [int(f.split()[0]) for f in failed] + sizes.tolist()
    why = unfinished
    if header["min_size"] is not None and header["max_size"] is not None:
        # Reductions (MPI_FLOAT) skip the lengths that are no whole number of floats.
        element = 4 if name in REDUCTIONS else 1
        expected = [0] if name == "Barrier" else [s for s in doubling(header["min_size"], header["max_size"])
                                                  if s % element == 0]
        if failed and block["rows"][-1][1][0] == failed[-1].split()[0]:
            # IMB stops a table at a time-out: the lengths after it were never to run.
            expected = [s for s in expected if s <= int(block["rows"][-1][1][0])]
        why = why or check_complete(path, present, expected, f"IMB-MPI1 {name} (-msglog)", partial)
    return Measurement(
        path=path, suite=SUITE, benchmark=f"IMB-MPI1 {name}", kernel=kernel, metric=f"IMB-MPI1 {name}: {meaning}",
        sizes=sizes, reported=reported, sample="t_s" if "t_s" in reported else "t_max_s",
        iterations=values["#repetitions"].astype(np.int64), nprocs=nprocs,
        kind={"benchmark": f"IMB-MPI1 {name}", "processes": str(block["processes"]),
              "options": " ".join(f"{k} {v}".strip() for k, v in sorted(header["options"].items()))},
        partial=why,
        provenance={**provenance, "benchmark": f"IMB-MPI1 {name}", "processes": block["processes"],
                    "columns": block["columns"], "rows_not_measured": failed, "partial": why})
