"""OSU Micro-Benchmarks console output (any version that prints `# OSU MPI ... Test vX.Y`).

A file is one benchmark's run: its title line, `# Datatype`, osu_mbw_mr's `[ pairs: N ]
[ window size: W ]`, the column header after `# Size`, then one row per size. Times are in
microseconds, bandwidths in MB/s (1e6 B/s); a bandwidth row's time per message is derived, when the
dataset is made, with the bytes factor the report's bandwidth divides by, so that the report gives
back OSU's figure.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from commbench.io.importers.common import MB, US, ImportFileError, Measurement, check_kernel, file_provenance

SUITE = "OSU Micro-Benchmarks"
# Title (between "OSU MPI" and "Test") -> (program, commbench kernel, metric).
BENCHMARKS = {
    "Latency": ("osu_latency", "pingpong.send",
                "osu_latency: half round trip of MPI_Send/MPI_Recv between two ranks, averaged over OSU's "
                "timed loop"),
    "Bandwidth": ("osu_bw", "stream.uni",
                  "osu_bw: seconds per message of windows of MPI_Isend from rank 0 to rank 1 on one buffer, "
                  "from OSU's MB/s (time = size / bandwidth)"),
    "Bi-Directional Bandwidth": ("osu_bibw", "stream.bi",
                                 "osu_bibw: seconds per message in each direction of windows of MPI_Isend both "
                                 "ways, from OSU's MB/s (time = 2 size / bandwidth)"),
    "Multiple Bandwidth / Message Rate": ("osu_mbw_mr", "multipair.stream",
                                          "osu_mbw_mr: seconds per message of windows of MPI_Isend in every pair "
                                          "at once, from OSU's aggregate MB/s (time = pairs x size / bandwidth)"),
    "Broadcast Latency": ("osu_bcast", "coll.bcast",
                          "osu_bcast: MPI_Bcast time per call, calls back to back, averaged over the ranks (OSU's "
                          "method, not coll.bcast's --method accurate)"),
}
# The two-rank benchmarks: OSU refuses to run them on any other number of processes.
TWO_RANKS = ("osu_latency", "osu_bw", "osu_bibw")
TITLE = re.compile(r"^#\s*OSU MPI (?P<name>.+?) Test v?(?P<version>\d[\w.]*)\s*$")
# Columns after "# Size": (pattern, key, name in messages); key "" for columns read for nothing
# (derived from another, or per rank).
COLUMNS = [
    (r"Avg Latency\s*\(us\)", "latency_us", "Avg Latency(us)"),
    (r"Latency\s*\(us\)", "latency_us", "Latency (us)"),                      # OSU 5 and older
    (r"P(?P<p>50|90|99) Tail Lat\s*\(us\)", "p_us", "PNN Tail Lat(us)"),       # -z
    (r"Min Latency\s*\(us\)", "", "Min Latency(us)"),                          # -f: over ranks
    (r"Max Latency\s*\(us\)", "", "Max Latency(us)"),
    (r"Iterations", "iterations", "Iterations"),                                 # -f
    (r"Bandwidth\s*\(MB/s\)", "MBps", "Bandwidth (MB/s)"),
    (r"MB/s", "MBps", "MB/s"),
    (r"Messages/s", "", "Messages/s"),                                           # osu_mbw_mr: MB/s / size
    (r"P(?:50|90|99) Tail BW\s*\(MB/s\)", "", "PNN Tail BW(MB/s)"),            # -z on bandwidth tests
    (r"Validation", "validation", "Validation"),                                 # -c: Pass or Fail
]
OPTIONS_OF_COLUMNS = {"p_us": "-z", "iterations": "-f", "validation": "-c"}


def known() -> str:
    return ", ".join(f"{program} ('OSU MPI {title} Test')" for title, (program, _, _) in BENCHMARKS.items())


def read_osu(path, kernel: str | None = None) -> Measurement:
    """The benchmark table of one OSU output file; `kernel` relabels its rows (it must be the
    kernel the benchmark measures like, optionally with an @label)."""
    path = Path(path)
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as error:
        raise ImportFileError(path, f"cannot be read: {error.strerror or error}") from None
    titles = [(number, TITLE.match(line.strip())) for number, line in enumerate(lines, 1)]
    titles = [(number, match) for number, match in titles if match]
    if not titles:
        first = next((line.strip() for line in lines if line.strip()), "")
        raise ImportFileError(path, f"not an OSU Micro-Benchmarks output: no '# OSU MPI ... Test vX.Y' title line "
                                    f"(first line: {first[:120]!r}); known benchmarks: {known()}")
    if len(titles) > 1:
        raise ImportFileError(path, f"holds {len(titles)} OSU outputs (titles at lines "
                                    f"{', '.join(str(n) for n, _ in titles)}); give each run its own file",
                              titles[1][0])
    title_line, title = titles[0]
    if title["name"] not in BENCHMARKS:
        raise ImportFileError(path, f"'OSU MPI {title['name']} Test' is not a benchmark commbench imports; known: "
                                    f"{known()}", title_line)
    program, measured_as, metric = BENCHMARKS[title["name"]]
    label = check_kernel(path, program, measured_as, kernel)
    provenance = {**file_provenance(path), "suite": SUITE, "benchmark": program, "version": title["version"],
                  "title": lines[title_line - 1].strip().lstrip("# ")}
    header_line, columns = _header(path, lines, title_line)
    for number, line in enumerate(lines[title_line:header_line - 1], title_line + 1):
        if match := re.match(r"^#\s*Datatype:\s*(\S+?)\.?\s*$", line):
            provenance["datatype"] = match.group(1)
        if match := re.search(r"pairs:\s*(\d+)", line):
            provenance["pairs"] = int(match.group(1))
        if match := re.search(r"window size:\s*(\d+)", line):
            provenance["window"] = int(match.group(1))
    rows = _rows(path, lines, header_line, columns)
    keys = [key for key, _ in columns]
    provenance["columns"] = [name for _, name in columns]
    provenance["options"] = sorted({OPTIONS_OF_COLUMNS[k.split(":")[0]] for k in keys
                                    if k.split(":")[0] in OPTIONS_OF_COLUMNS})
    provenance["not_imported"] = [f"column {name!r}" for key, name in columns if not key]
    sizes = rows[:, 0].astype(np.int64)
    values = {key: rows[:, i + 1] for i, key in enumerate(keys) if key}
    nprocs = 2 if program in TWO_RANKS else (2 * provenance["pairs"] if "pairs" in provenance else None)
    if "latency_us" in values:
        time_s = values["latency_us"] * US
    elif "MBps" in values:
        if (values["MBps"] <= 0).any():
            bad = int(sizes[np.flatnonzero(values["MBps"] <= 0)[0]])
            raise ImportFileError(path, f"{program} reports no bandwidth at size {bad}: a time per message cannot "
                                        f"be derived from it", header_line)
        time_s = None   # from the rate, with the kernel's bytes factor (commbench.data.imported)
    else:
        raise ImportFileError(path, f"{program}: no time or bandwidth column among {provenance['columns']}",
                              header_line)
    percentiles = {int(key.split(":")[1]) / 100: column * US for key, column in values.items()
                   if key.startswith("p_us:")}
    if percentiles and 0.5 not in percentiles:
        raise ImportFileError(path, "percentile columns without the P50", header_line)
    return Measurement(path=path, benchmark=program, kernel=label, metric=metric, sizes=sizes, time_s=time_s,
                       percentiles=percentiles, iterations=values["iterations"].astype(np.int64)
                       if "iterations" in values else None,
                       errors=values.get("validation"), nprocs=nprocs,
                       bandwidth_Bps=values["MBps"] * MB if "MBps" in values else None,
                       window=provenance.get("window"),     # printed by osu_mbw_mr only
                       provenance=provenance)


def _header(path: Path, lines: list[str], title_line: int) -> tuple[int, list[tuple[str, str]]]:
    """The `# Size ...` line after the title: its number and its columns as (key, name)."""
    for number in range(title_line, len(lines)):
        line = lines[number].strip()
        if re.match(r"^#\s*Size\b", line):
            return number + 1, _columns(path, number + 1, re.sub(r"^#\s*Size\s*", "", line))
        if line and not line.startswith("#"):
            break
    raise ImportFileError(path, "no '# Size ...' column header after the title line", title_line)


def _columns(path: Path, number: int, text: str) -> list[tuple[str, str]]:
    columns = []
    rest = text.strip()
    while rest:
        for pattern, key, _ in COLUMNS:
            match = re.match(pattern, rest)
            if match:
                if key == "p_us":
                    key = f"p_us:{match['p']}"
                columns.append((key, match.group(0)))
                rest = rest[match.end():].strip()
                break
        else:
            allowed = ", ".join(name for _, _, name in COLUMNS)
            raise ImportFileError(path, f"unknown column {rest[:40]!r}; known columns: {allowed}", number)
    return columns


def _rows(path: Path, lines: list[str], header_line: int, columns: list) -> np.ndarray:
    """The numeric rows after the header, as (size, column...) floats; Pass/Fail as 0/1 errors.
    Lines that are not rows (blank, comments, an MPI library's warnings) are passed over."""
    rows = []
    for number, line in enumerate(lines[header_line:], header_line + 1):
        fields = line.split()
        if not fields or not fields[0].isdigit():
            continue
        if len(fields) != len(columns) + 1:
            raise ImportFileError(path, f"a row of {len(fields)} fields where the header has {len(columns) + 1} "
                                        f"(Size, {', '.join(name for _, name in columns)}): {line.strip()!r}", number)
        try:
            rows.append([float({"Pass": 0, "Fail": 1}.get(value, value)) for value in fields])
        except ValueError:
            raise ImportFileError(path, f"not a number in row {line.strip()!r}", number) from None
    if not rows:
        raise ImportFileError(path, "an OSU header without a single measured row (did the run fail?)", header_line)
    table = np.array(rows)
    if np.any(np.diff(table[:, 0]) <= 0):
        raise ImportFileError(path, "sizes do not increase row by row: not one run's table", header_line)
    return table
