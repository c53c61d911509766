"""Intel MPI Benchmarks (IMB-MPI1) output tables.

A file holds one IMB-MPI1 run: a `# Intel(R) MPI Benchmarks <version>, MPI-1 part` banner, the
calling sequence, then one table per benchmark and process count:

    # Benchmarking PingPong
    # #processes = 2
    # ( 2 additional processes waiting in MPI_Barrier)
    #---------------------------------------------------
           #bytes #repetitions      t[usec]   Mbytes/sec

Point-to-point tables print t[usec]; the others t_min, t_max and t_avg over the ranks, and IMB's
Mbytes/sec (1e6 B/s) divides by t_max, which is the time taken here (the slowest rank, as
commbench's collectives report). A run on N ranks repeats the parallel and collective tables for
2, 4, ... processes: the table that ran on all of the placement's ranks is taken (point-to-point:
two ranks, the others waiting), the rest are listed as not imported.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from commbench.io.importers.common import US, ImportFileError, Measurement, file_provenance

SUITE = "Intel MPI Benchmarks"
# IMB-MPI1 benchmark -> (commbench kernel, what its time is)
BENCHMARKS = {
    "PingPong": ("pingpong.send", "half round trip of MPI_Send/MPI_Recv (IMB's t)"),
    "PingPing": ("pingping", "time per iteration in which both ranks MPI_Isend and MPI_Recv one message at once "
                             "(IMB's t)"),
    "Sendrecv": ("exchange.sendrecv", "time per MPI_Sendrecv in a periodic chain of the ranks, the slowest rank's "
                                      "(IMB's t_max)"),
    "Bcast": ("coll.bcast", "mean time per MPI_Bcast call, the slowest rank's (IMB's t_max)"),
    "Allreduce": ("coll.allreduce", "mean time per MPI_Allreduce call, the slowest rank's (IMB's t_max)"),
    "Reduce": ("coll.reduce", "mean time per MPI_Reduce call, the slowest rank's (IMB's t_max)"),
    "Allgather": ("coll.allgather", "mean time per MPI_Allgather call, the slowest rank's (IMB's t_max)"),
    "Alltoall": ("coll.alltoall", "mean time per MPI_Alltoall call, the slowest rank's (IMB's t_max)"),
    "Gather": ("coll.gather", "mean time per MPI_Gather call, the slowest rank's (IMB's t_max)"),
    "Scatter": ("coll.scatter", "mean time per MPI_Scatter call, the slowest rank's (IMB's t_max)"),
}
TWO_RANKS = ("PingPong", "PingPing")
BANNER = re.compile(r"Intel\s*\(R\)\s*MPI Benchmarks\s+(?P<version>[\w.]+)(?:,\s*(?P<part>\S+) part)?")
BENCHMARKING = re.compile(r"^#\s*Benchmarking\s+(?P<multi>Multi-)?(?P<name>\S+)")
TIME_COLUMNS = ("t_max[usec]", "t[usec]")


def read_imb(path, nprocs: int) -> list[Measurement]:
    """The tables of an IMB-MPI1 output that ran on `nprocs` ranks and that a commbench kernel
    measures alike, one Measurement each; every other table is named in their provenance."""
    path = Path(path)
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as error:
        raise ImportFileError(path, f"cannot be read: {error.strerror or error}") from None
    banner = next((BANNER.search(line) for line in lines if BANNER.search(line)), None)
    if banner is None:
        first = next((line.strip() for line in lines if line.strip()), "")
        raise ImportFileError(path, f"not an IMB output: no 'Intel(R) MPI Benchmarks <version>, MPI-1 part' banner "
                                    f"(first line: {first[:120]!r})")
    if banner["part"] not in (None, "MPI-1"):
        raise ImportFileError(path, f"an IMB {banner['part']} output; commbench imports IMB-MPI1's tables "
                                    f"({', '.join(BENCHMARKS)})")
    provenance = {**file_provenance(path), "suite": SUITE, "version": banner["version"],
                  "command": _calling_sequence(lines)}
    blocks = list(_blocks(path, lines))
    taken, not_imported = [], []
    for block in blocks:
        name, processes, world = block["name"], block["processes"], block["processes"] + block["idle"]
        where = f"{name} on {processes} processes"
        if block["multi"]:
            not_imported.append(f"Multi-{where} (multi mode)")
        elif name not in BENCHMARKS:
            not_imported.append(f"{where} (no commbench kernel measures it)")
        elif world != nprocs or (processes != nprocs and name not in TWO_RANKS):
            not_imported.append(f"{where} (the placement has {nprocs} ranks)")
        else:
            taken.append(block)
    if not taken:
        found = ", ".join(f"{b['name']} on {b['processes']}+{b['idle']} processes" for b in blocks) or "no tables"
        raise ImportFileError(path, f"no table to import for {nprocs} ranks; found: {found}; commbench imports "
                                    f"{', '.join(BENCHMARKS)} run on all of the placement's ranks")
    provenance["not_imported"] = not_imported
    return [_measurement(path, block, provenance, nprocs) for block in taken]


def _calling_sequence(lines: list[str]) -> str:
    for number, line in enumerate(lines):
        if line.strip().startswith("# Calling sequence was"):
            return next((rest.strip().lstrip("#").strip() for rest in lines[number + 1:]
                         if rest.strip().lstrip("#").strip()), "")
    return ""


def _blocks(path: Path, lines: list[str]):
    """Each `# Benchmarking` table: name, multi, processes, idle, columns and rows (line, fields)."""
    block = None
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if match := BENCHMARKING.match(text):
            if block:
                yield block
            block = {"name": match["name"], "multi": bool(match["multi"]), "processes": 0, "idle": 0,
                     "columns": None, "rows": [], "line": number}
        elif block is None:
            continue
        elif match := re.match(r"^#\s*#processes\s*=\s*(\d+)", text):
            block["processes"] = int(match.group(1))
        elif match := re.match(r"^#\s*\(\s*(\d+) additional process", text):
            block["idle"] = int(match.group(1))
        elif block["columns"] is None and text.startswith("#bytes"):
            block["columns"] = text.split()
        elif block["columns"] and text and text.split()[0].isdigit():
            block["rows"].append((number, text.split()))
    if block:
        yield block


def _measurement(path: Path, block: dict, provenance: dict, nprocs: int) -> Measurement:
    name, columns = block["name"], block["columns"] or []
    kernel, meaning = BENCHMARKS[name]
    time_column = next((c for c in TIME_COLUMNS if c in columns), None)
    if time_column is None or "#repetitions" not in columns:
        raise ImportFileError(path, f"the {name} table has columns {columns}; expected #bytes, #repetitions and "
                                    f"{' or '.join(TIME_COLUMNS)}", block["line"])
    sizes, times, repetitions, failed = [], [], [], []
    for number, fields in block["rows"]:
        if len(fields) != len(columns):
            failed.append(f"{fields[0]} B ({' '.join(fields[1:])[:60]})")   # IMB's time-out. / out-of-mem.
            continue
        try:
            row = dict(zip(columns, map(float, fields)))
        except ValueError:
            raise ImportFileError(path, f"not a number in the {name} row {' '.join(fields)!r}", number) from None
        sizes.append(int(row["#bytes"]))
        times.append(row[time_column] * US)
        repetitions.append(int(row["#repetitions"]))
    if not sizes:
        raise ImportFileError(path, f"the {name} table has no measured row", block["line"])
    return Measurement(path=path, benchmark=f"IMB-MPI1 {name}", kernel=kernel, metric=f"IMB-MPI1 {name}: {meaning}",
                       sizes=np.array(sizes, dtype=np.int64), time_s=np.array(times),
                       iterations=np.array(repetitions, dtype=np.int64), nprocs=nprocs,
                       provenance={**provenance, "benchmark": f"IMB-MPI1 {name}", "processes": block["processes"],
                                   "time_column": time_column, "rows_not_measured": failed})
