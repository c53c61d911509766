"""What users put next to OSU's numbers: the report's parameter table and `commlens summary`.

The table's regimes and its Hockney flag are checked on synthetic curves with known parameters;
the CLI's bandwidth and percentiles against the report's on a real campaign with bidirectional
kernels, run through the workflow."""

import hashlib
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from commlens import cli
from commlens.analysis import models
from commlens.data import synthetic as syn
from commlens import open_campaign
from commlens.report import ReportData
from commlens.data.imported import import_files
from commlens.interactive import append_to_campaign
from commlens.io.netcdf import write_dataset
from commlens.report.glance import at_a_glance
from commlens.report.methods import methods
from commlens.report.tables import performance_table

from commlens.units import format_mbps, format_number, format_us

from conftest import snakemake, write_campaign

HEAVY = dict(tail_df=3.0, outlier_fraction=0.02, outlier_scale=5.0)


def leading_number(cell: str) -> float:
    """The value of a '7.3 [7.2, 7.4]' cell."""
    return float(cell.split()[0])


def test_parameter_table_gives_each_regime_and_the_hockney_fit_only_where_it_fits():
    """A curve with an eager -> rendezvous switch at 16 KiB (7.3 us, then +6 us and 9 GB/s) and one
    without: the first gets its regimes and a flagged Hockney fit, the second keeps the fit."""
    grid = syn.netpipe(1, 4 * 2**20)
    noise = syn.Noise(0.01, launch_relative=0.002, **HEAVY)
    single = syn.generate(grid, syn.GroundTruth(2e-6, 5e9), noise, 30, 3, seed=1)
    switching = syn.generate(grid, syn.GroundTruth(7.3e-6, 5e9, switches=(syn.Switch(16384, 6e-6, 9e9),)), noise,
                             30, 3, seed=2)
    ds = syn.campaign_dataset({("single", "1N2P", "pingpong.send"): single,
                               ("switching", "1N2P", "pingpong.send"): switching})
    ds = ds.assign_coords(nodes=("placement", [1]), ppn=("placement", [2]), nprocs=("placement", [2]),
                          emulated=("placement", [False]))
    table = performance_table(ReportData(ds, n_boot=50))
    rows = table.frame.set_index("library")

    multi = rows.loc["switching"]
    assert leading_number(multi["latency, first regime (us) [95%]"]) == pytest.approx(7.3, rel=0.03)
    assert leading_number(multi["bandwidth, last regime (MB/s) [95%]"]) == pytest.approx(9000, rel=0.03)
    assert multi["regime switches"] == "between 16381 B and 16 KiB"
    assert multi["Hockney fit"].startswith("does not fit: ")
    assert multi["Hockney latency (us) [95%]"] == multi["Hockney bandwidth (MB/s) [95%]"] == "-"
    # The line the table no longer shows: its latency and bandwidth are no regime's.
    hockney = models.fit_hockney(switching.sizes, switching.times)
    assert hockney.latency_s > 1.05 * 7.3e-6 and 5.5e9 < hockney.bandwidth_Bps < 8.5e9

    one = rows.loc["single"]
    assert one["regime switches"] == "none" and one["Hockney fit"].startswith("fits: ")
    assert leading_number(one["Hockney latency (us) [95%]"]) == pytest.approx(2.0, rel=0.03)
    assert leading_number(one["Hockney bandwidth (MB/s) [95%]"]) == pytest.approx(5000, rel=0.03)
    assert leading_number(one["latency, first regime (us) [95%]"]) == pytest.approx(2.0, rel=0.03)
    # Percentiles at the smallest size, next to mean and median, ordered as percentiles are.
    p50, p90, p99 = (one[f"latency at 1 B (us): {name}"] for name in ("P50 (median)", "P90", "P99"))
    assert p50 == pytest.approx(2.0, rel=0.03) and p50 < p90
    assert np.isnan(p99)        # 30 samples a launch: too few to have a P99 (100), not shown
    assert "standard errors" in table.caption and "P99" in table.caption


BIDIRECTIONAL = """
    campaign: bidirectional
    libraries:
      mpich-5.0.2: {mpi: mpich-5.0.2}
    placements:
      - {name: 1N2P, nodes: 1, ppn: 2}
    kernels:
      pingpong.send: {sizes: {list: [0, 8, 1Ki, 64Ki]}}
      stream.bi: {sizes: {list: [0, 8, 1Ki, 64Ki]}}
      exchange.sendrecv: {sizes: {list: [0, 8, 1Ki, 64Ki]}}
    launches: 2
    precision: {rse: 0.05, min_samples: 5, max_samples: 100, max_point_time: 0.5}
    timeout: 120
"""


@pytest.fixture(scope="module")
def bidirectional(workspace, built):
    """A real campaign's dataset (the workflow's, report left out) with two bidirectional kernels, from 0 B."""
    campaign = write_campaign(workspace / "config" / "campaigns", BIDIRECTIONAL, "bidirectional.yaml")
    dataset = workspace / "results" / "bidirectional" / "bidirectional.nc"
    snakemake(workspace, str(dataset.relative_to(workspace)), "--configfile", str(campaign))
    return dataset


@pytest.mark.mpi
def test_cli_bandwidth_and_percentiles_are_the_reports(bidirectional, capsys):
    ds = open_campaign(bidirectional)
    points = ReportData(ds, n_boot=50).points
    summary = ds.commlens.summary(ci=False).sel(library="mpich-5.0.2", placement="1N2P", size=65536)
    table = performance_table(ReportData(ds, n_boot=50)).frame.iloc[0]
    printed = {kernel: line.split() for kernel, line in
               ((line.split()[2], line) for line in _table_lines(capsys, bidirectional))}
    for kernel in ("pingpong.send", "stream.bi", "exchange.sendrecv"):
        fields = printed[kernel]
        largest = points[(points["kernel"] == kernel) & (points["size"] == 65536)].iloc[0]
        assert fields[-3:] == ["64", "KiB", format_mbps(largest["bandwidth_Bps"])], fields
        # The time columns at 0 B: mean, P50, P90, P99 in microseconds, as the summary gives them and
        # written as every table writes them (commlens.units); a tail only from samples enough for it.
        smallest = ds.commlens.summary(ci=False).sel(library="mpich-5.0.2", placement="1N2P", kernel=kernel, size=0)
        fewest = int(ds["sample_count"].sel(library="mpich-5.0.2", placement="1N2P", kernel=kernel, size=0).min())
        tails = [format_us(float(smallest[name])) if fewest >= needed else "-"
                 for name, needed in (("p90", 10), ("p99", 100))]
        assert fields[3:9] == ["0", "B", format_us(float(smallest["mean"])), format_us(float(smallest["p50"])),
                               *tails], fields
        assert 0 < smallest["mean"] <= smallest["p99"]
    # Both directions count: stream.bi and the exchange move twice the message per timed unit.
    for kernel in ("stream.bi", "exchange.sendrecv"):
        one_way = 65536 / float(summary["median"].sel(kernel=kernel)) / 1e6
        assert float(printed[kernel][-1]) == pytest.approx(2 * one_way, rel=1e-3)
    assert printed["stream.bi"][-1] == table_cell(table, "stream.bi at 64 KiB (MB/s)")


@pytest.mark.mpi
def test_per_size_view_gives_every_size_from_0_bytes_and_says_which_tails_had_too_few_samples(bidirectional,
                                                                                               capsys):
    """`commlens summary --per-size`: per curve a row per size, 0 B included, with its samples, launches, the
    time's mean, P50, P90 and P99 as the summary gives them, and MB/s from the median (none at 0 B); a tail
    the launches took too few samples for is '-', and the row says how many they took."""
    ds = open_campaign(bidirectional)
    stats = ds.commlens.summary(ci=False)
    assert cli.main(["summary", str(bidirectional), "--per-size"]) == 0
    text = capsys.readouterr().out
    blocks = {block.split(",")[2].split(":")[0].strip(): block.splitlines()[1:] for block in text.split("\n\n")[1:]}
    assert set(blocks) == {"pingpong.send", "stream.bi", "exchange.sendrecv"}
    for kernel, lines in blocks.items():
        assert lines[0].split() == ["bytes", "samples", "launches", "mean", "P50", "P90", "P99", "MB/s"]
        assert [int(line.split()[0]) for line in lines[1:]] == [0, 8, 1024, 65536]
        for line in lines[1:]:
            size, samples, launches, mean, p50, p90, p99, mbps, *words = line.split()
            point = stats.sel(library="mpich-5.0.2", placement="1N2P", kernel=kernel, size=int(size))
            counts = ds["sample_count"].sel(library="mpich-5.0.2", placement="1N2P", kernel=kernel, size=int(size))
            assert (int(samples), int(launches)) == (int(counts.sum()), 2)
            assert [mean, p50] == [format_us(float(point["mean"])), format_us(float(point["p50"]))]
            assert mbps == ("-" if size == "0" else format_mbps(float(point["bandwidth"])))
            fewest, most = int(counts.min()), int(counts.max())
            had = f"{fewest} to {most}" if most != fewest else str(fewest)
            if fewest < 10:
                assert [p90, p99] == ["-", "-"]
                assert " ".join(words) == f"P90, P99 not shown: need 10 and 100 samples a launch, had {had}"
            elif fewest < 100:
                assert p90 == format_us(float(point["p90"])) and p99 == "-"
                assert " ".join(words) == f"P99 not shown: needs 100 samples a launch, had {had}"
            else:
                assert [p90, p99] == [format_us(float(point[name])) for name in ("p90", "p99")] and not words


def test_tail_percentiles_are_shown_only_from_samples_enough_to_have_a_tail(capsys):
    """One sample a launch has no tail: its mean, P50, P90 and P99 are the one value. P90 is shown from 10
    samples a launch, P99 from 100 (1 / (1 - q), so that one of them can lie beyond it; P90's is the report's
    own threshold for reading a launch's tail); fewer, and the summary says how many there were."""
    from commlens.cli.summary import TAILS, format_table, per_size_blocks, summary_rows
    from commlens.report.glance import TAIL_SAMPLES

    assert TAILS == {"p90": TAIL_SAMPLES, "p99": 100}
    noise = syn.Noise(0.05)
    ds = syn.campaign_dataset({(f"{n} a launch", "1N2P", "pingpong.send"): syn.generate(
        np.array([0, 8, 1024]), syn.GroundTruth(2e-6, 5e9), noise, n, 2, seed=n) for n in (1, 20, 30, 150)})
    ds["status"] = xr.full_like(ds["sample_count"].isel(size=0, drop=True), "ok", dtype=object)
    stats = ds.commlens.summary(ci=False)
    rows, notes = summary_rows(ds)
    cells = {row[0]: row[3:8] for row in rows}
    one = stats.sel(library="1 a launch", placement="1N2P", kernel="pingpong.send", size=0)
    assert float(one["mean"]) == float(one["p50"]) == float(one["p90"]) == float(one["p99"])   # what it would say
    assert cells["1 a launch"] == ["0 B", format_us(float(one["mean"])), format_us(float(one["p50"])), "-", "-"]
    assert cells["20 a launch"][-2] != "-" and cells["20 a launch"][-1] == "-"
    assert "-" not in cells["150 a launch"]
    # A curve's own words; curves that lack the same tails share a line (a campaign of many kernels).
    assert notes == [("1 a launch, 1N2P, pingpong.send at 0 B: P90, P99 not shown: need 10 and 100 samples a launch, "
                      "had 1"),
                     ("P99 not shown for 2 curves at their smallest size: needs 100 samples a launch, had 20 to 30 "
                      "(--per-size: each size's)")]
    assert "-" in format_table(rows)
    blocks = per_size_blocks(ds)
    assert [block.splitlines()[0].split(",")[0] for block in blocks] == ["1 a launch", "150 a launch", "20 a launch",
                                                                         "30 a launch"]
    one_rows = [line.split() for line in blocks[0].splitlines()[2:]]
    assert [row[:3] for row in one_rows] == [["0", "2", "2"], ["8", "2", "2"], ["1024", "2", "2"]]
    assert all(row[5:7] == ["-", "-"] and " ".join(row[8:]) == "P90, P99 not shown: need 10 and 100 samples a "
               "launch, had 1" for row in one_rows)


def table_cell(row, column: str) -> str:
    """A performance-table cell as the report shows it (Table.readable)."""
    from commlens.report.elements import readable

    return readable(row.to_frame().T.astype({column: float}))[column].iloc[0]


def _table_lines(capsys, dataset) -> list[str]:
    """The rows of `commlens summary`'s table (after its two header lines; before its legend lines and
    the lines that say which tails had too few samples)."""
    assert cli.main(["summary", str(dataset)]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("library"))
    return [line for line in lines[start + 1:] if line.strip() and not line.startswith("[")
            and " not shown" not in line]


OSU = Path(__file__).parent / "data" / "osu-7.4"
IMB = Path(__file__).parent / "data" / "imb" / "IMB-MPI1-mpich-5.0.2-np2.txt"
LONG = "mpich-5.0.2 (IMB-MPI1 2021.11, imported from an older run)"


@pytest.fixture(scope="module")
def old_results(tmp_path_factory) -> Path:
    """Old results brought in, as issue 29's user does: OSU 7.4's osu_latency -z and an osu_mbw_mr cut
    short (imported --partial), IMB-MPI1's seven benchmarks appended under a long row name, saved."""
    osu = import_files([OSU / "osu_latency-z-openmpi-5.0.11-1N2P.txt", OSU / "osu_mbw_mr-openmpi-5.0.11-1N2P.txt"],
                       "osu", "openmpi-5.0.11", "1N2P", partial=True)
    both = append_to_campaign(osu, import_files([IMB], "imb", "mpich-5.0.2", "1N2P"), library=LONG)
    path = tmp_path_factory.mktemp("old") / "old.nc"
    write_dataset(both, path, keep_previous=False)
    return path


def test_summary_marks_imported_and_partial_rows_and_says_what_they_are(old_results, capsys):
    assert cli.main(["summary", str(old_results)]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {(library, line.split()[len(library.split()) + 1]): line for line in lines
            for library in ("openmpi-5.0.11", LONG) if line.startswith(library + " ")}
    assert len(rows) == 2 + 7
    legends = {line.split("] ")[0] + "]": line.split("] ", 1)[1] for line in lines if line.startswith("[")}
    marks = {row: line.rsplit("  ", 1)[1] for row, line in rows.items()}

    latency = rows["openmpi-5.0.11", "pingpong.send"].split()
    z = file_rows(OSU / "osu_latency-z-openmpi-5.0.11-1N2P.txt")[0]      # 1 B: Avg, P50, P90, P99
    assert latency[3:9] == ["1", "B", *(format_us(v * 1e-6) for v in z[1:])]
    assert marks["openmpi-5.0.11", "pingpong.send"].startswith("imported [")
    assert legends[marks["openmpi-5.0.11", "pingpong.send"].split()[-1]] == (
        "imported from OSU Micro-Benchmarks 7.4: osu_latency -z; OSU's Avg Latency as reported, one value per "
        "size; P50, P90, P99 as reported; no interval")
    partial = marks["openmpi-5.0.11", "multipair.stream"]
    assert partial.startswith("imported, partial [")
    assert legends[partial.split()[-1]].startswith(
        "imported from OSU Micro-Benchmarks 7.4: osu_mbw_mr; the file's bandwidth column as reported, one value "
        "per size; no per-sample spread (no percentiles, no interval); partial (1 of 1 files): truncated: "
        "osu_mbw_mr (its default sizes) was to run 23 sizes")
    # IMB's t (PingPong, PingPing) and t_max (the others) are two kinds of number: two lines.
    imb = {kernel: mark.split()[-1] for (library, kernel), mark in marks.items() if library == LONG}
    assert imb["pingpong.send"] == imb["pingping"] != imb["coll.allreduce"] == imb["ring.waitall4"]
    assert "IMB's t[usec] as reported" in legends[imb["pingpong.send"]]
    assert legends[imb["coll.allreduce"]].startswith("imported from Intel MPI Benchmarks 2021.11: IMB-MPI1 Allreduce")
    assert "IMB's t_max[usec] as reported" in legends[imb["coll.allreduce"]]
    assert len(legends) == 4


def test_the_report_marks_imported_rows_and_names_their_files(old_results):
    ds = open_campaign(old_results)
    data = ReportData(ds, n_boot=20)
    glance = at_a_glance(data)
    sources = glance.headline.set_index("library")["source"]
    assert sources["openmpi-5.0.11"].startswith("imported [") and sources[LONG].startswith("imported [")
    lead = next(i for i, line in enumerate(glance.lines) if line.startswith("Rows whose source is imported [n]"))
    assert [line.split()[0] for line in glance.lines[lead + 1:]] == ["[1]", "[2]", "[3]", "[4]"]
    assert f"{sources['openmpi-5.0.11'].split()[-1]} imported from OSU Micro-Benchmarks 7.4: osu_latency -z" \
        in "\n".join(glance.lines)
    assert not any("met the precision target" in line for line in glance.lines + glance.warnings)   # none applied
    table = performance_table(data)
    assert table.frame["source"].tolist() == sources[table.frame["library"]].tolist()
    assert "Rows whose source is imported [n]" in table.caption
    section = next(s for s in methods(ds) if s.heading == "Imported rows")
    assert len(section.items) == 9 and "9 curves were not measured by commlens" in section.paragraphs[0]
    latency = next(item for item in section.items if item.startswith("openmpi-5.0.11, 1N2P, pingpong.send: "))
    path = OSU / "osu_latency-z-openmpi-5.0.11-1N2P.txt"
    assert f"{path.resolve()} (sha256 {hashlib.sha256(path.read_bytes()).hexdigest()[:12]}, ranks stated: 2)" in latency
    assert "As the suite measured it: osu_latency: half round trip" in latency
    assert sum("partial (1 of 1 files): truncated" in item for item in section.items) == 1


def file_rows(path: Path) -> np.ndarray:
    """The numbers of an OSU output, read from its lines of numbers alone."""
    return np.array([[float(x) for x in line.split()] for line in path.read_text().splitlines()
                     if line[:1].isdigit()])


@pytest.mark.parametrize("value, text", [(0.35312, "0.3531"), (12.4712, "12.47"), (1590.4, "1590"),
                                         (10680.2, "10680"), (-0.05526, "-0.05526"), (float("nan"), ""),
                                         (float("inf"), "")])
def test_every_table_writes_numbers_alike(value, text):
    """Four significant figures, whole numbers from 1000 up, never an exponent: '10680' beside '1590'."""
    assert format_number(value) == text
