"""NetPIPE 5 (NPmpi) outputs: its `-o` file (np.out by default) read with the console output of the
same run.

The -o file has a row per message size: bytes, average, smallest and largest throughput (Gbps,
1e9 bit/s) and the average one-way time (us), nothing else. The console says how the run was made
(ping-pong by default, `--stream`, `--bidir` with its pairs, --async, --nocache... one line each),
prints a line per size (`  n: <bytes> <repeats> times -->  <rate>  in  <time>`) and, when the run
finished, `Completed with max bandwidth ... latency`. Neither is imported alone: the -o file does not
say how it was run or where it was to stop, and the console prints sizes from 1 MB in thousands of
bytes. A -o file and a console are paired by their rows (the same sizes, times and rates, to the
console's precision), whatever their names.

NPmpi always preposts its receives (MPI_Irecv, then MPI_Wait) and sends with MPI_Send: a ping-pong
is commlens's pingpong.irecv (several pairs: multipair.pingpong), --stream is stream.uni (several
pairs: multipair.stream), --bidir on one pair is pingping. Its bytes column counts both directions
in --bidir; the size imported is the message's.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from commlens.io.importers.common import NUMBER, US, ImportFileError, InputFile, Measurement, starts_row

SUITE = "NetPIPE"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Any number where the console prints one, so that a row with a negative, nan or inf is refused, not passed over.
ROW = re.compile(rf"^\s*(?P<n>\d+):\s+(?P<size>{NUMBER})\s*(?P<size_unit>B|KB|MB|GB|TB)\s+(?P<repeats>{NUMBER}) times "
                 rf"-->\s+(?P<rate>{NUMBER})\s*(?P<rate_unit>bps|Kbps|Mbps|Gbps|Tbps)\s+in\s+(?P<time>{NUMBER})\s*"
                 r"(?P<time_unit>nsecs|usecs|msecs|secs)")
# The -o file's columns, as NetPIPE's usage describes them, and what each may hold.
OUT_COLUMNS = [("bytes", "size"), ("average Gbps", "rate"), ("smallest Gbps", "rate"), ("largest Gbps", "rate"),
               ("time (us)", "time")]
CONSOLE_COLUMNS = [("size", "amount"), ("repeats", "count"), ("rate", "rate"), ("time", "time")]
NEITHER = ("neither a NetPIPE 5 -o file (rows of bytes, average, smallest and largest Gbps, time in us) nor its "
           "console output")
SCALE = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "bps": 1, "Kbps": 1e3, "Mbps": 1e6, "Gbps": 1e9,
         "Tbps": 1e12, "nsecs": 1e-9, "usecs": 1e-6, "msecs": 1e-3, "secs": 1.0}
# Console lines that say how the run was made -> the option, as NetPIPE's usage names it.
OPTIONS = [(r"Streaming data in one direction", "--stream"), (r"Bidirectional mode using (\d+) pairs", "--bidir"),
           (r"Preposting all receives before a timed run", "--burst"),
           (r"Pass data from a different memory buffer", "--nocache"), (r"Using MPI_SSend", "--syncSend"),
           (r"Receive using the MPI_ANY_SOURCE", "--anysource"), (r"Using type MPI_DOUBLE", "--doubles"),
           (r"Offsetting send buffer by (\d+)", "--soffset"), (r"Offsetting recv buffer by (\d+)", "--roffset"),
           (r"Only testing factors of 2", "--fac2"), (r"Using a constant number of (\d+)", "--repeats"),
           (r"Measuring the CPU workload using type (\S+)", "--workload"),
           (r"Doing a message integrity check", "--integrity")]
KERNELS = {("ping-pong", False): "pingpong.irecv", ("ping-pong", True): "multipair.pingpong",
           ("stream", False): "stream.uni", ("stream", True): "multipair.stream", ("bidir", False): "pingping"}
MEANS = {"ping-pong": "half round trip of MPI_Send against a preposted MPI_Irecv+MPI_Wait, each trial's repeats "
                      "timed together, averaged over the trials",
         "stream": "seconds per message of back-to-back MPI_Send to a receiver keeping one MPI_Irecv posted, averaged "
                   "over the trials",
         "bidir": "time per iteration in which both ranks MPI_Send one message and MPI_Wait for the one preposted, "
                  "averaged over the trials"}
DIFFERS = {"pingpong.irecv": "commlens's pingpong.irecv posts each MPI_Irecv when it waits for the message "
                             "(NetPIPE before its own send)",
           "multipair.pingpong": "the same: every pair at once, until the last is done",
           "stream.uni": "commlens's stream.uni sends windows of MPI_Isend",
           "multipair.stream": "commlens's multipair.stream sends windows of MPI_Isend",
           "pingping": "commlens's pingping: MPI_Isend, MPI_Recv, MPI_Wait"}


def read_netpipe(paths: list[Path], nprocs: int, partial: bool = False) -> tuple[list[Measurement], list]:
    """The runs of the -o files and consoles among `paths` on `nprocs` ranks: a Measurement per pair
    of a -o file and its console, an ImportFileError for every file that cannot be imported."""
    consoles: dict[Path, dict] = {}
    tables: dict[Path, dict] = {}
    refused = []
    for path in paths:
        try:
            kind, content = _read(path)
        except ImportFileError as error:
            refused.append(error)
            continue
        (consoles if kind == "console" else tables)[path] = content
    measurements, paired = [], set()
    for path, table in tables.items():
        console = next((c for c, printed in consoles.items()
                        if c not in paired and _same_run(table["rows"], printed["rows"])), None)
        if console is None:
            refused.append(ImportFileError(path, "a NetPIPE -o file does not say how it was run (ping-pong, --stream "
                                                 "or --bidir, the pairs) nor where it was to stop: give the console "
                                                 "output of the same run beside it (none of the consoles given has "
                                                 "its rows)"))
            continue
        paired.add(console)
        try:
            measurements.append(_measurement(path, table, console, consoles[console], nprocs, partial))
        except ImportFileError as error:
            refused.append(error)
    for console in sorted(consoles.keys() - paired):
        refused.append(ImportFileError(console, "a NetPIPE console prints sizes from 1 MB in thousands of bytes and "
                                                "times to 4 digits: give its -o file (np.out) beside it (none of the "
                                                "-o files given has its rows)"))
    return measurements, refused


def _read(path: Path) -> tuple[str, dict]:
    """("console", {rows, options, trials, completed, provenance}) or ("table", {rows, provenance}),
    read a line at a time: a -o file's first line is a row of numbers, a console's is text."""
    source = InputFile(path)
    kind, rows, short, options, trials, clock, completed, first = None, [], None, {}, None, False, False, None
    for number, line in source.lines():
        line = ANSI.sub("", line)
        fields = line.split()
        if kind is None and fields:
            kind, first = "table" if starts_row(line.strip()) else "console", number
        if kind == "table" and fields:
            if short or len(fields) > len(OUT_COLUMNS):      # only a last row may be short: cut in two
                raise ImportFileError(path, NEITHER, short[0] if short else number)
            if len(fields) < len(OUT_COLUMNS):
                short = number, fields
                continue
            rows.append(source.values(number, fields, OUT_COLUMNS))
        elif kind == "console":
            if match := ROW.match(line):
                size, repeats, rate, time = source.values(
                    number, [match["size"], match["repeats"], match["rate"], match["time"]], CONSOLE_COLUMNS)
                rows.append([int(match["n"]), size * SCALE[match["size_unit"]], repeats,
                             rate * SCALE[match["rate_unit"]], time * SCALE[match["time_unit"]]])
            for pattern, option in OPTIONS:
                if found := re.search(pattern, line):
                    options[option] = found.group(1) if found.groups() else ""
            if found := re.search(r"Start testing with (\d+) trials", line):
                trials = trials if trials is not None else int(found.group(1))
            clock = clock or "Clock resolution" in line
            completed = completed or "Completed with" in line
    if kind == "table" and rows:      # less a last row cut in two: the console says how far the run got
        return "table", {"rows": np.array(rows), "provenance": source.provenance()}
    if kind == "console" and (rows or clock):
        return "console", {"rows": np.array(rows).reshape(-1, 5), "options": options, "trials": trials,
                           "completed": completed, "provenance": source.provenance()}
    raise ImportFileError(path, NEITHER, first)


def _same_run(table: np.ndarray, console: np.ndarray) -> bool:
    """Whether a -o file's rows are the console's: times and rates agree to the digits each prints,
    row by row, as far as both go (one of them may have been cut short)."""
    n = min(len(table), len(console))
    if n < min(2, max(len(table), len(console))):
        return False
    # The -o file prints times to 0.01 us and rates to 0.001 Gbps, the console four digits of each.
    return bool(np.allclose(table[:n, 4] * US, console[:n, 4], rtol=1e-3, atol=6e-9)
                and np.allclose(table[:n, 1] * 1e9, console[:n, 3], rtol=1e-3, atol=1e6))


def _measurement(path: Path, out: dict, console_path: Path, console: dict, nprocs: int,
                 partial: bool) -> Measurement:
    table = out["rows"]
    options = console["options"]
    if "--integrity" in options or "--workload" in options:
        option = "--integrity" if "--integrity" in options else "--workload"
        raise ImportFileError(console_path, f"a NetPIPE {option} run: no kernel of commlens measures it alike")
    mode = "stream" if "--stream" in options else "bidir" if "--bidir" in options else "ping-pong"
    directions = 2 if mode == "bidir" else 1
    sizes = (table[:, 0] / directions).astype(np.int64)
    # Throughput counts every pair: the -o file's rows say the pairs (the largest row, the most digits).
    big = int(np.argmax(table[:, 0]))
    pairs = max(1, round(table[big, 1] * 1e9 / 8 * table[big, 4] * US / table[big, 0]))
    if 2 * pairs != nprocs:
        raise ImportFileError(path, f"NetPIPE ran {pairs} pair{'s' if pairs > 1 else ''} ({2 * pairs} ranks: its "
                                    f"throughput over its time and bytes), but the placement has {nprocs} ranks; "
                                    f"name the placement it ran on")
    kernel = KERNELS.get((mode, pairs > 1))
    if kernel is None:
        raise ImportFileError(console_path, f"a NetPIPE {mode} run of {pairs} pairs: no kernel of commlens measures "
                                            f"it alike")
    why = ""
    if not console["completed"] or len(table) != len(console["rows"]):
        why = (f"truncated: the console has {len(console['rows'])} sizes"
               + ("" if console["completed"] else " and no 'Completed with' line (the run was cut short)")
               + f", the -o file {len(table)}")
        if not partial:
            raise ImportFileError(path, why + "; give --partial to import the sizes both hold, marked partial")
    n = min(len(table), len(console["rows"]))
    table, printed = table[:n], console["rows"][:n]
    if np.any(np.diff(sizes[:n]) <= 0):
        raise ImportFileError(path, "sizes do not increase row by row: not one run's table")
    gbps = 1e9 / 8
    reported = {"time_s": table[:, 4] * US, "throughput_avg_Bps": table[:, 1] * gbps,
                "throughput_min_Bps": table[:, 2] * gbps, "throughput_max_Bps": table[:, 3] * gbps,
                "console_time_s": printed[:, 4], "console_throughput_Bps": printed[:, 3] / 8}
    option_text = " ".join(f"{k} {v}".strip() for k, v in sorted(options.items()))
    return Measurement(
        path=path, suite=SUITE, benchmark="NPmpi", kernel=kernel,
        metric=f"NetPIPE NPmpi {mode}: {MEANS[mode]}; {DIFFERS[kernel]}", sizes=sizes[:n], reported=reported,
        sample="time_s", iterations=printed[:, 2].astype(np.int64), nprocs=2 * pairs,
        kind={"benchmark": "NPmpi", "mode": mode, "pairs": str(pairs), "options": option_text},
        partial=why,
        provenance={**out["provenance"], "suite": SUITE, "benchmark": f"NPmpi {mode}",
                    "version": "not printed (the five-column -o file is NetPIPE 5's)",
                    "console": console["provenance"], "options": sorted(options), "pairs": pairs,
                    "ranks_stated": 2 * pairs, "trials": console["trials"], "partial": why})
