"""commlens-kernels as an OSU Micro-Benchmarks user runs it: OSU's options (-m, -i, -x), a table on the
console, --osu timing as osu_latency and osu_bw time, every bad value refused by name, and help and
errors printed once however many ranks there are."""

import json
import statistics
import subprocess
from pathlib import Path

import pytest

from commlens.campaign import load_campaign
from commlens.launch.catalogue import launch_needs
from commlens.launch.preflight import check_kernels
from commlens.units import parse_size
from conftest import LIBRARIES, campaign_error, write_campaign
from test_harness import run_kernels

pytestmark = pytest.mark.mpi

SIZE_SYNTAX = "bytes: digits, optionally followed by k, M, G or Ki, Mi, Gi (x1024 each)"


def messages(stderr: str) -> list[str]:
    """commlens-kernels' own lines among the launcher's (Open MPI adds its own on a failed rank)."""
    return [line for line in stderr.splitlines() if line.startswith("commlens-kernels:")]


def table(stdout: str) -> tuple[list[str], list[list[str]]]:
    """The header lines (without '# ') and the rows (split on blanks) of a printed table."""
    lines = stdout.splitlines()
    return [line[2:] for line in lines if line.startswith("# ")], [line.split() for line in lines if line[:1].isdigit()]


OSU_7_4 = Path(__file__).parent / "data" / "osu-7.4"


def osu_lines(text: str) -> tuple[list[str], list[list[str]]]:
    """An OSU table's lines up to its column header, and its rows split on blanks."""
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("# Size"))
    return lines[:header + 1], [line.split() for line in lines[header + 1:] if line.strip()]


def as_osu_prints(row: list[str]) -> str:
    """A row as OSU 7.4 prints it: the size left in 10 columns, each number right in 18 with 2 decimals."""
    return f"{int(row[0]):<10}" + "".join(f"{float(x):>18.2f}" if x[0].isdigit() else f"{x:>18}" for x in row[1:])


@pytest.mark.parametrize("library", LIBRARIES)
def test_osu_timing_prints_osus_own_table_so_old_logs_diff_line_by_line(workspace, built, library):
    """--osu prints what osu_latency 7.4 prints: a blank line, a title, the datatype, OSU's column header
    to the character and rows in OSU's widths and decimals; only the title and the datatype say what ran."""
    proc = run_kernels(workspace, library, "pingpong.send", "-m", "1:1024", "-i", "1000", "-x", "100", "--osu")
    assert proc.returncode == 0, proc.stderr
    real = (OSU_7_4 / f"osu_latency-{library}-1N2P.txt").read_text()
    (blank, title, datatype, header), rows = osu_lines(proc.stdout)
    real_head, real_rows = osu_lines(real)
    assert blank == real_head[0] == "" and header == real_head[3] == "# Size       Avg Latency(us)"
    assert title == "# commlens-kernels pingpong.send, timed as OSU MPI Latency Test v7.4"
    assert real_head[1] == "# OSU MPI Latency Test v7.4" and datatype == "# Datatype: MPI_BYTE."
    assert [int(row[0]) for row in rows] == [2**k for k in range(11)] and all(float(row[1]) > 0 for row in rows)
    printed = [line for line in proc.stdout.splitlines()[4:] if line]
    assert printed == [as_osu_prints(row) for row in rows]
    assert [line for line in real.splitlines()[4:] if line] == [as_osu_prints(row) for row in real_rows]
    assert "{" not in proc.stdout and "pingpong.send 1 B" not in proc.stderr   # no JSON, no progress lines


def test_osu_timing_with_integrity_prints_osus_validation_column(workspace, built):
    """osu_latency -c adds a Validation column of Pass or Fail; --osu --integrity prints it, and a fault
    planted in every batch fails every size."""
    common = ["pingpong.send", "--sizes", "1,1000", "--osu", "--integrity", "-i", "20", "-x", "2"]
    for extra, verdict in (([], "Pass"), (["--inject-fault"], "Fail")):
        proc = run_kernels(workspace, LIBRARIES[0], *common, *extra)
        assert proc.returncode == 0, proc.stderr
        head, rows = osu_lines(proc.stdout)
        assert head[-1] == f"{'# Size':<10}{'Avg Latency(us)':>18}{'Validation':>18}"
        assert [row[2] for row in rows] == [verdict] * 2
        assert [line for line in proc.stdout.splitlines()[4:] if line] == [as_osu_prints(row) for row in rows]


def test_the_default_timing_prints_medians_and_json_only_on_request(workspace, built, tmp_path):
    proc = run_kernels(workspace, LIBRARIES[1], "pingpong.send", "--sizes", "8,4Ki", "-i", "200")
    header, rows = table(proc.stdout)
    assert proc.returncode == 0 and [row[0] for row in rows] == ["8", "4096"]
    assert header[2] == ("timing: precision: the median of 10 timed batches of 20 iterations (-i 200 in "
                         "--min-samples batches; --osu: OSU's mean of single iterations)")
    assert header[-1].split()[:4] == ["Size", "Median(us)", "Min(us)", "P99(us)"]
    assert all(row[4] == "10" for row in rows)

    proc = run_kernels(workspace, LIBRARIES[1], "pingpong.send", "--sizes", "8", "-i", "100", "--json")
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["record"] for r in records] == ["run", "mpi_t", "point", "end"]
    assert records[0]["args"]["timing"] == "precision"
    assert "pingpong.send 8 B: median " in proc.stderr and " us, min " in proc.stderr

    out = tmp_path / "run.jsonl"
    proc = run_kernels(workspace, LIBRARIES[1], "pingpong.send", "--sizes", "8", "-i", "100", "-o", str(out))
    assert proc.stdout == "" and len(out.read_text().splitlines()) == 4


def test_every_cell_of_the_default_table_is_one_word_for_awk(workspace, built):
    """A point that missed the precision target says so in its own column and its RSE in another: awk's
    fields are the header's columns on every row, numbers where the header says so."""
    proc = run_kernels(workspace, LIBRARIES[0], "pingpong.send", "--sizes", "0,8,4096", "--rse", "1e-9",
                       "--min-samples", "3", "--max-samples", "3", "--integrity")
    assert proc.returncode == 0, proc.stderr
    columns = table(proc.stdout)[0][-1].split()
    assert columns == ["Size", "Median(us)", "Min(us)", "P99(us)", "Samples", "Settled", "RSE(%)", "Errors"]
    fields = subprocess.run(["awk", "!/^#/ {print NF, $1, $2, $6, $7}"], input=proc.stdout, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    assert [line.split()[:2] for line in fields] == [[str(len(columns)), size] for size in ("0", "8", "4096")]
    for line in fields:
        _, _, median, settled, rse = line.split()
        assert float(median) > 0 and settled == "no" and float(rse) >= 0    # 3 samples never meet 1e-9


def test_latency_sizes_start_at_0_bytes_as_osu_latency_did_and_bandwidths_at_1(workspace, built):
    """Without -m's MIN, the powers schedule starts at 0 B for a kernel read as a time (a window of one message
    is one), at 1 B for one read as a bandwidth and for a collective; the other schedules keep their own; the
    catalogue tool, which checks a campaign's options, counts the same sizes."""
    def first(*args):
        proc = run_kernels(workspace, LIBRARIES[0], *args, "--print-sizes", nprocs=1)
        assert proc.returncode == 0, proc.stderr
        return [int(line) for line in proc.stdout.split()][:2]

    for kernel in ("pingpong.send", "exchange.sendrecv", "multipair.pingpong", "rma.pingpong"):
        assert first(kernel) == [0, 1], kernel
    for kernel in ("stream.uni", "stream.bi", "rma.put", "memcpy", "io.own_file", "coll.bcast", "coll.scan"):
        assert first(kernel) == [1, 2], kernel
    assert first("stream.uni", "--window", "1") == [0, 1] and first("rma.put", "--window", "1") == [0, 1]
    assert first("pingpong.send", "--schedule", "netpipe") == [1, 2] and first("pingpong.send", "-m", "1:") == [1, 2]
    assert first("pingpong.send", "--schedule", "small", "-m", ":100") == [4, 32]       # the small range's own MIN
    assert launch_needs(["pingpong.send"], 2)["sizes"] == 24 and launch_needs(["stream.uni"], 2)["sizes"] == 23
    proc = run_kernels(workspace, LIBRARIES[0], "stream.uni", "-m", ":0", "--print-sizes", nprocs=1)
    assert messages(proc.stderr) == [("commlens-kernels: -m :0: MAX (0) is below the default MIN of stream.uni on "
                                      "the powers schedule (1 B): give MIN too")]


@pytest.mark.parametrize("library", LIBRARIES)
def test_osu_timing_records_every_iteration_and_reports_their_mean(workspace, built, library):
    """Each timed iteration is a sample, so a point's mean is OSU's number: the half round trip's mean,
    and for a stream size / (mean time per message), osu_bw's bytes over total time."""
    for kernel, size, unit in (("pingpong.send", 8, "us"), ("stream.uni", 2**16, "MB/s")):
        proc = run_kernels(workspace, library, kernel, "--sizes", str(size), "--osu", "-i", "30", "-x", "3", "--json")
        assert proc.returncode == 0, proc.stderr
        run, _, point, _ = [json.loads(line) for line in proc.stdout.splitlines()]   # run, mpi_t, point, end
        assert run["args"]["timing"] == "osu" and run["args"]["iterations"] == run["args"]["iterations_large"] == 30
        assert run["args"]["warmup"] == 3 and run["args"]["large_above"] == 8192
        assert point["iters_per_sample"] == 1 and len(point["samples"]) == 30
        mean = statistics.fmean(point["samples"])
        expected = mean * 1e6 if unit == "us" else size / mean / 1e6
        printed = float(proc.stderr.split(": mean ")[1].split()[0])
        assert printed == pytest.approx(expected, abs=0.006), proc.stderr
        assert f" {unit}, " in proc.stderr and "30 iterations timed one by one" in proc.stderr


def test_osu_defaults_are_osu_7_4s_and_streams_read_in_mb_per_s(workspace, built, tmp_path):
    out = tmp_path / "run.jsonl"
    proc = run_kernels(workspace, LIBRARIES[0], "stream.uni", "--sizes", "64", "--osu", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    args = json.loads(out.read_text().splitlines()[0])["args"]
    assert (args["iterations"], args["warmup"], args["iterations_large"], args["warmup_large"]) == (100, 10, 20, 2)
    proc = run_kernels(workspace, LIBRARIES[0], "stream.uni", "--sizes", "64", "--osu", "-i", "5")
    head, rows = osu_lines(proc.stdout)
    assert head[1] == "# commlens-kernels stream.uni, timed as OSU MPI Bandwidth Test v7.4"
    assert head[-1] == osu_lines((OSU_7_4 / "osu_bw-mpich-5.0.2-1N2P.txt").read_text())[0][-1] \
        == "# Size      Bandwidth (MB/s)"
    assert rows[0][0] == "64" and float(rows[0][1]) > 0 and proc.stdout.splitlines()[-1] == as_osu_prints(rows[0])


@pytest.mark.parametrize("args, message", [
    (["-m", "1:4xyz"], f"-m 1:4xyz: MAX 4xyz is not a size ({SIZE_SYNTAX})"),
    (["-m", "x:8"], f"-m x:8: MIN x is not a size ({SIZE_SYNTAX})"),
    (["-m", "8:1"], "-m 8:1: MIN (8) must be <= MAX (1)"),
    (["-i", "abc"], "-i abc: not a whole number"),
    (["-i", "0"], "-i 0: must be at least 1"),
    (["-x", "-1"], "-x -1: must be at least 0"),
    (["-x", "1e3"], "-x 1e3: not a whole number"),
    (["--max-samples", "1e10"], "--max-samples 1e10: not a whole number"),
    (["--max-samples", "4294967496"], "--max-samples 4294967496: must be from 2 to 2147483647"),
    (["--max-samples", "99999999999999999999999"],
     "--max-samples 99999999999999999999999: must be from 2 to 2147483647"),
    (["--min-samples", "20", "--max-samples", "10"], "--min-samples 20 is more than --max-samples 10"),
    (["--rse", "nan"], "--rse nan: not a finite number"),
    (["--rse", "0"], "--rse 0: must be more than 0"),
    (["--max-point-time", "5s"], "--max-point-time 5s: not a finite number"),
    (["--window", "0"], "--window 0: must be from 1 to 1024"),
    (["--align", "4Ki"], "--align 4Ki: must be from 0 to 4095 B"),
    (["--sizes", "8,x"], f"--sizes 8,x: x is not a size ({SIZE_SYNTAX})"),
    (["--sizes", "3Gi"], "size 3221225472: 3221225472 elements of 1 B, more than an MPI count (an int: at most "
                         "2147483647) can say"),
    (["--timing", "fast"], "--timing fast: expects precision | osu"),
    (["--proc-grid", "2by2"], "--proc-grid 2by2: expects PXxPY, two whole numbers >= 1, e.g. 2x2"),
    (["--windw", "3"], "unknown option --windw (did you mean --window?)"),
    (["--osu=1"], "option --osu takes no value"),
    (["-q"], "unknown option -q (--help lists them)"),
    (["-W", "32"], "unknown option -W (OSU's window size is --window N here)"),
    (["-m"], "option -m needs a value (--help says which)"),
    (["-o", "x.jsonl", "--json"], "-o x.jsonl and --json: JSON Lines go to one place; give one"),
])
def test_each_bad_value_is_refused_once_naming_the_option_and_the_value(workspace, built, args, message):
    proc = run_kernels(workspace, LIBRARIES[0], "pingpong.send", *args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert messages(proc.stderr) == [f"commlens-kernels: {message}"]      # one line, from rank 0 alone


@pytest.mark.parametrize("args, message", [
    (["pingpong.sned"], "unknown kernel pingpong.sned (did you mean pingpong.send? --list lists them)"),
    (["osu_latency"], "unknown kernel osu_latency (--list lists them)"),
    ([], "no KERNEL given (commlens-kernels --list lists them)"),
])
def test_a_kernel_name_that_is_not_one_is_named_with_the_nearest(workspace, built, args, message):
    proc = run_kernels(workspace, LIBRARIES[1], *args)
    assert proc.returncode == 2 and messages(proc.stderr) == [f"commlens-kernels: {message}"]


def test_a_campaign_is_checked_with_the_same_strict_parser():
    """What commlens validate runs before any launch (the catalogue tool) refuses what the binary does."""
    with pytest.raises(ValueError, match="^--max-samples 4294967496: must be from 2 to 2147483647$"):
        launch_needs(["pingpong.send", "--max-samples", "4294967496"], 2)
    assert launch_needs(["pingpong.send", "-m", "1:4Mi"], 2)["largest"] == 4 * 2**20


@pytest.mark.parametrize("library", LIBRARIES)
def test_help_and_listings_are_printed_once_under_two_ranks(workspace, built, library):
    help_text = run_kernels(workspace, library, "--help").stdout
    assert help_text.count("usage:") == 1 and "--osu" in help_text and "4M = 4Mi = 4194304" in help_text
    listing = run_kernels(workspace, library, "--list").stdout.splitlines()
    described = [json.loads(line) for line in run_kernels(workspace, library, "--list", "--json").stdout.splitlines()]
    assert [line.split()[0] for line in listing] == [k["kernel"] for k in described]
    assert listing[0].split(None, 1)[1] == described[0]["metric"]


def test_sizes_are_written_as_in_a_campaign_file(workspace, built):
    def sizes(*args):
        proc = run_kernels(workspace, LIBRARIES[0], "pingpong.send", "--print-sizes", *args, nprocs=1)
        assert proc.returncode == 0, proc.stderr
        return [int(line) for line in proc.stdout.split()], proc.stderr

    texts = ["4Mi", "3M", "64Ki", "1k", "2 Gi", "16"]
    assert sizes("--sizes", ",".join(texts))[0] == [parse_size(text) for text in texts]
    assert sizes("-m", "1:4Mi")[0][-1] == 4 * 2**20
    assert sizes("-m", "64Ki")[0] == [0] + [2**k for k in range(17)]         # OSU's -m MAX; a latency from 0 B
    assert sizes("-m", "1Mi:")[0] == [2**20, 2**21, 2**22]                   # MIN: keeps the default MAX
    assert sizes("-m", "1:4M") == ([2**k for k in range(23)], "")             # 4M is 4 MiB, as OSU labels it


def test_a_campaign_entry_asks_for_osu_timing_by_key(tmp_path):
    text = """
        campaign: osu
        libraries: {mpich-5.0.2: {mpi: mpich-5.0.2}}
        placements: [{name: 1N2P, nodes: 1, ppn: 2}]
        kernels:
          pingpong.send: {sizes: {list: [8, 1Ki]}, timing: osu, iterations: 50}
          pingpong.ssend: {sizes: {list: [8]}}
    """
    campaign = load_campaign(write_campaign(tmp_path, text))
    check_kernels(campaign)      # the catalogue tool takes the options as the binary does
    osu, default = campaign.kernel_args("pingpong.send", 0), campaign.kernel_args("pingpong.ssend", 0)
    assert osu[osu.index("--osu") + 1:osu.index("--osu") + 3] == ["-i", "50"]
    assert "--osu" not in default and "-i" not in default
    message = campaign_error(tmp_path, text.replace("timing: osu", "timing: fast"))
    assert "kernels.pingpong.send.timing" in message and "precision" in message and "osu" in message


def test_a_kernel_that_times_every_pair_refuses_osu_timing(workspace, built):
    proc = run_kernels(workspace, LIBRARIES[0], "allpairs.shifted", "--osu")
    assert proc.returncode == 2 and messages(proc.stderr) == [
        "commlens-kernels: allpairs.shifted times every pair of ranks and has no OSU counterpart: measure it "
        "without --osu"]
