"""Importing other suites' outputs: the real OSU Micro-Benchmarks 7.4 runs in tests/data/osu-7.4/
(both libraries, every benchmark) and a constructed IMB-MPI1 output in tests/data/imb/ become
datasets that the summary, the figures and compare read like a campaign's."""

import hashlib
import json
from pathlib import Path

import holoviews as hv
import numpy as np
import pytest

from commbench import cli
from commbench.data import synthetic as syn
from commbench.analysis.compare import across
from commbench import open_campaign
from commbench.report import ReportData
from commbench.report.figures import library_comparison
from commbench.data.imported import import_files, write
from commbench.io.importers import ImportFileError, read_osu
from commbench.interactive import append_to_campaign
from commbench.report.backends import build_with
from commbench.data.samples import QUANTILES

DATA = Path(__file__).parent / "data"
OSU = DATA / "osu-7.4"
IMB = DATA / "imb" / "IMB-MPI1-2021.7-np4.txt"
# The file MPICH's mpiexec wrote when it refused --oversubscribe: no measurement in it.
NOT_OSU = OSU / "osu_bcast-mpich-5.0.2-1N4P.txt"
KERNELS = {"osu_latency": "pingpong.send", "osu_latency-z": "pingpong.send", "osu_bw": "stream.uni",
           "osu_bibw": "stream.bi", "osu_mbw_mr": "multipair.stream", "osu_bcast": "coll.bcast"}
OUTPUTS = sorted(path for path in OSU.glob("*.txt") if path != NOT_OSU)


def table(path: Path) -> np.ndarray:
    """The numbers of an OSU file, read independently of the importer."""
    return np.loadtxt(path, comments="#", ndmin=2)


def benchmark(path: Path) -> str:
    return path.name.rsplit("-", 3)[0]


def placement(path: Path) -> str:
    return path.stem.rsplit("-", 1)[1]


def one_row(ds, name):
    return ds[name].isel(library=0, placement=0, kernel=0, launch=0).values


def test_there_is_a_real_output_of_every_benchmark_for_both_libraries():
    names = {(benchmark(path), "openmpi" in path.name) for path in OUTPUTS}
    assert {b for b, _ in names} == set(KERNELS)
    assert len(OUTPUTS) == 11     # all but MPICH's osu_bcast, whose launch failed


@pytest.mark.parametrize("path", OUTPUTS, ids=lambda p: p.stem)
def test_every_real_osu_output_imports_with_its_numbers(path, tmp_path):
    ds = open_campaign(write(import_files([path], "osu", "lib", placement(path)), tmp_path / "osu.nc"))
    numbers = table(path)
    sizes = numbers[:, 0].astype(int)
    assert ds["kernel"].values.tolist() == [KERNELS[benchmark(path)]]
    assert ds["size"].values.tolist() == sizes.tolist()
    assert (one_row(ds, "sample_count") == 1).all()       # one value per size: OSU's, no invented samples
    summary = ds.commbench.summary(ci=False).isel(library=0, placement=0, kernel=0)
    if benchmark(path) in ("osu_bw", "osu_bibw", "osu_mbw_mr"):
        # The report's bandwidth (bytes factor x size / time) gives back OSU's MB/s.
        np.testing.assert_allclose(summary["bandwidth"].values / 1e6, numbers[:, 1], rtol=1e-12)
    else:
        np.testing.assert_allclose(one_row(ds, "mean"), numbers[:, 1] * 1e-6, rtol=1e-12)
    if benchmark(path) == "osu_latency-z":
        for column, q in zip((2, 3, 4), (0.5, 0.9, 0.99)):
            np.testing.assert_allclose(one_row(ds, "quantiles")[:, QUANTILES.index(q)], numbers[:, column] * 1e-6)
        np.testing.assert_allclose(summary["median"], numbers[:, 2] * 1e-6)      # the median is OSU's P50
        np.testing.assert_allclose(summary["p99"], numbers[:, 4] * 1e-6)
        assert np.isnan(one_row(ds, "min")).all()     # not in the file: the average is no minimum
    else:
        np.testing.assert_allclose(summary["median"], one_row(ds, "mean"))
        assert np.isnan(one_row(ds, "quantiles")).all() and np.isnan(one_row(ds, "median_ci")).all()
    assert bool(ds["imported"].values[0]) and "osu_" in str(ds["source"].values[0])
    record = json.loads(str(ds["kernel_info"].values.ravel()[0]))
    assert record["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert record["version"] == "7.4" and record["file"] == str(path.resolve())
    assert record["options"] == (["-z"] if "-z-" in path.name else [])
    # Nothing of the machine that imported it is recorded as where it was measured.
    assert not {"cpu_model", "os", "hosts", "kernel_source_hash"} & set(ds.attrs)


def test_osu_mbw_mr_pairs_and_window_are_kept_and_the_placement_must_match_them(tmp_path):
    path = OSU / "osu_mbw_mr-openmpi-5.0.11-1N2P.txt"
    ds = import_files([path], "osu", "lib", "1N2P")
    record = json.loads(str(ds["kernel_info"].values.ravel()[0]))
    assert (record["pairs"], record["window"]) == (1, 64)
    assert ds["window_buffers"].values.tolist() == ["shared"]
    with pytest.raises(ImportFileError, match=r"osu_mbw_mr ran on 2 processes, but placement 2N2P has 4"):
        import_files([path], "osu", "lib", "2N2P")


def test_files_of_one_benchmark_are_launches_of_one_row():
    paths = [OSU / "osu_latency-mpich-5.0.2-1N2P.txt", OSU / "osu_latency-z-mpich-5.0.2-1N2P.txt"]
    ds = import_files(paths, "osu", "mpich-5.0.2", "1N2P")
    assert ds.sizes["launch"] == 2 and ds["kernel"].values.tolist() == ["pingpong.send"]
    expected = np.median([table(paths[0])[:, 1], table(paths[1])[:, 2]], axis=0) * 1e-6
    np.testing.assert_allclose(ds.commbench.summary(ci=False)["median"].values.ravel(), expected)


def test_different_benchmarks_are_kernels_and_cells_without_a_file_are_skipped():
    paths = [OSU / "osu_latency-mpich-5.0.2-1N2P.txt", OSU / "osu_latency-z-mpich-5.0.2-1N2P.txt",
             OSU / "osu_bw-mpich-5.0.2-1N2P.txt"]
    ds = import_files(paths, "osu", "mpich-5.0.2", "1N2P")
    assert ds["kernel"].values.tolist() == ["pingpong.send", "stream.uni"]
    assert ds["status"].sel(kernel="stream.uni").values.ravel().tolist() == ["ok", "skipped"]
    assert ds.commbench.failed_runs().empty


def test_a_file_that_is_not_an_osu_output_is_refused_naming_it_and_what_is_known(tmp_path, capsys):
    code = cli.main(["import-osu", str(NOT_OSU), "--library", "mpich-5.0.2", "--placement", "1N4P",
                     "--output", str(tmp_path / "x.nc")])
    message = capsys.readouterr().err
    assert code == 2 and str(NOT_OSU) in message and "not an OSU Micro-Benchmarks output" in message
    assert "unrecognized argument oversubscribe" in message       # what the file holds instead
    assert "osu_latency" in message and "osu_mbw_mr" in message
    assert not (tmp_path / "x.nc").exists()


def test_an_unknown_benchmark_is_refused_with_the_known_ones(tmp_path):
    text = (OSU / "osu_bcast-openmpi-5.0.11-1N4P.txt").read_text()
    path = tmp_path / "osu_allreduce.txt"
    path.write_text(text.replace("OSU MPI Broadcast Latency Test", "OSU MPI Allreduce Latency Test"))
    with pytest.raises(ImportFileError) as info:
        read_osu(path)
    message = str(info.value)
    assert message.startswith(f"{path}:2:") and "'OSU MPI Allreduce Latency Test'" in message
    assert "osu_bcast ('OSU MPI Broadcast Latency Test')" in message


def test_kernel_must_be_the_benchmarks_own_or_a_label_of_it(tmp_path):
    path = OSU / "osu_latency-openmpi-5.0.11-1N2P.txt"
    with pytest.raises(ImportFileError) as info:
        read_osu(path, kernel="stream.uni")
    assert str(path) in str(info.value) and "allowed: pingpong.send, or pingpong.send@LABEL" in str(info.value)
    ds = import_files([path], "osu", "openmpi-5.0.11", "1N2P", kernel="pingpong.send@osu")
    assert ds["kernel"].values.tolist() == ["pingpong.send@osu"]


def test_placement_shape_comes_from_its_name_or_the_options():
    path = OSU / "osu_latency-openmpi-5.0.11-1N2P.txt"
    with pytest.raises(ValueError, match=r"--placement shm: give --nodes and --ppn"):
        import_files([path], "osu", "openmpi-5.0.11", "shm")
    ds = import_files([path], "osu", "openmpi-5.0.11", "shm", nodes=1, ppn=2)
    assert (int(ds["nodes"][0]), int(ds["ppn"][0]), int(ds["nprocs"][0])) == (1, 2, 2)
    with pytest.raises(ImportFileError, match="osu_latency ran on 2 processes, but placement 2N2P has 4"):
        import_files([path], "osu", "openmpi-5.0.11", "2N2P")


@pytest.mark.parametrize("damage, expected", [
    (lambda text: text.split("1    ")[0], "without a single measured row"),
    (lambda text: text.replace("1.50\n", "1.50 7\n", 1), r":5: a row of 3 fields where the header has 2"),
    (lambda text: text.replace("Avg Latency(us)", "Avg Latency(us)  Spread(us)"),
     r"unknown column 'Spread\(us\)'; known columns: Avg Latency"),
    (lambda text: text + text, "holds 2 OSU outputs"),
])
def test_damaged_osu_files_are_refused_naming_file_and_line(tmp_path, damage, expected):
    path = tmp_path / "osu_latency.txt"
    path.write_text(damage((OSU / "osu_latency-mpich-5.0.2-1N2P.txt").read_text()))
    with pytest.raises(ImportFileError, match=expected) as info:
        read_osu(path)
    assert str(info.value).startswith(str(path))


def imb_columns(name: str, processes: int) -> np.ndarray:
    """The rows of one table of the IMB fixture, read independently of the importer."""
    lines = IMB.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"# Benchmarking {name} ")
                 and lines[i + 1].startswith(f"# #processes = {processes} "))
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("# Benchmarking"):
            break
        if line.split() and line.split()[0].isdigit():
            rows.append([float(v) for v in line.split()])
    return np.array(rows)


def test_imb_tables_that_ran_on_the_placements_ranks_are_imported(tmp_path):
    ds = open_campaign(write(import_files([IMB], "imb", "mpich-5.0.2", "1N4P"), tmp_path / "imb.nc"))
    assert ds["kernel"].values.tolist() == ["pingpong.send", "pingping", "exchange.sendrecv", "coll.bcast"]
    summary = ds.commbench.summary(ci=False).isel(library=0, placement=0)
    for kernel, name, processes, time_column in [("pingpong.send", "PingPong", 2, 2), ("pingping", "PingPing", 2, 2),
                                                 ("exchange.sendrecv", "Sendrecv", 4, 3),
                                                 ("coll.bcast", "Bcast", 4, 3)]:
        rows = imb_columns(name, processes)
        np.testing.assert_allclose(summary["median"].sel(kernel=kernel), rows[:, time_column] * 1e-6)
        assert (ds["iters_per_sample"].sel(kernel=kernel).isel(launch=0) == rows[:, 1]).all()
    # IMB's Mbytes/sec divides by the unrounded time: the report's bandwidth from the printed one
    # agrees to within that rounding (0.005 us).
    for kernel, name, processes, time_column in [("pingpong.send", "PingPong", 2, 2),
                                                 ("exchange.sendrecv", "Sendrecv", 4, 3)]:
        rows = imb_columns(name, processes)[1:]          # size 0 moves nothing
        ours = summary["bandwidth"].sel(kernel=kernel).values[1:] / 1e6
        tolerance = rows[:, -1] * 0.005 / (rows[:, time_column] - 0.005) + 0.005
        assert (np.abs(ours - rows[:, -1]) <= tolerance).all()
    record = json.loads(str(ds["kernel_info"].sel(kernel="coll.bcast").values.ravel()[0]))
    assert record["version"] == "2021.7" and "PingPong PingPing Sendrecv Exchange Bcast" in record["command"]
    assert "Exchange on 4 processes (no commbench kernel measures it)" in record["not_imported"]
    assert "Bcast on 2 processes (the placement has 4 ranks)" in record["not_imported"]


def test_an_imb_output_without_a_table_for_the_placement_is_refused():
    with pytest.raises(ImportFileError) as info:
        import_files([IMB], "imb", "mpich-5.0.2", "1N2P")
    message = str(info.value)
    assert message.startswith(str(IMB)) and "no table to import for 2 ranks" in message
    assert "Bcast on 4+0 processes" in message and "PingPong, PingPing, Sendrecv, Bcast" in message
    with pytest.raises(ImportFileError, match="not an IMB output"):
        import_files([OSU / "osu_bw-mpich-5.0.2-1N2P.txt"], "imb", "mpich-5.0.2", "1N2P")


def test_import_then_summary_and_export_from_the_command_line(tmp_path, capsys):
    paths = [str(OSU / f"{name}-openmpi-5.0.11-1N2P.txt") for name in ("osu_latency", "osu_bw", "osu_bibw")]
    output = tmp_path / "osu" / "osu.nc"
    assert cli.main(["import-osu", *paths, "--library", "openmpi-5.0.11", "--placement", "1N2P",
                     "--output", str(output)]) == 0
    printed = capsys.readouterr().out
    assert "library row openmpi-5.0.11 (imported)" in printed and "stream.bi: 1 launch, 23 sizes" in printed
    assert cli.main(["summary", str(output)]) == 0
    rows = {line.split()[2]: line.split() for line in capsys.readouterr().out.splitlines() if "openmpi-5.0.11" in line}
    assert "0.440" in rows["pingpong.send"]                       # osu_latency's 1-byte average, in us
    assert float(rows["stream.bi"][-1]) == pytest.approx(19994.65, abs=0.06)    # osu_bibw's MB/s at 4 MiB
    assert cli.main(["export", str(output), "--format", "parquet"]) == 0
    import pandas as pd

    exported = pd.read_parquet(output.with_suffix(".parquet"))
    bw = exported[exported["kernel"] == "stream.uni"]
    np.testing.assert_allclose(bw["bandwidth_MBps"], table(Path(paths[1]))[:, 1], rtol=1e-12)
    assert exported["imported"].all() and (exported["count"] == 1).all()


# ---------------------------------------------------------------------------- beside a campaign

def campaign_like(osu_path: Path, factor: dict, launches: int = 1, seed: int = 0):
    """A campaign-shaped dataset (known ground truth) whose pingpong.send times are OSU's averages
    times `factor[size range]`, 200 samples a launch with 0.5% noise, named as the import's row."""
    numbers = table(osu_path)
    sizes, truth = numbers[:, 0].astype(int), numbers[:, 1] * 1e-6
    scale = np.array([next(f for (low, high), f in factor.items() if low <= s <= high) for s in sizes])
    rng = np.random.default_rng(seed)
    times = (truth * scale)[:, None, None] * (1 + 0.005 * rng.standard_normal((len(sizes), launches, 200)))
    return syn.dataset_from_cubes({("openmpi-5.0.11", "1N2P", "pingpong.send"): (sizes, times)})


def test_compare_of_a_one_launch_campaign_and_an_import_follows_the_one_launch_rule():
    """One launch each: a verdict only where the change is over 50% and dwarfs the campaign's
    within-launch spread (the import has none); 3x slower below 1 KiB is found, 20% above is not."""
    path = OSU / "osu_latency-openmpi-5.0.11-1N2P.txt"
    imported = import_files([path], "osu", "openmpi-5.0.11", "1N2P")
    baseline = campaign_like(path, {(0, 1024): 3.0, (2048, 2**30): 1.2})
    result = across(baseline, imported).squeeze()
    assert set(result["basis"].values.tolist()) == {"one launch"}
    small = result["size"] <= 1024
    assert (result["verdict"].where(small, drop=True) == "improved").all()        # the import is 3x faster
    np.testing.assert_allclose(result["ratio"].where(small, drop=True), 1 / 3, rtol=0.01)
    assert (result["verdict"].where(~small, drop=True) == "inconclusive").all()


def test_compare_of_a_campaign_with_launches_and_an_import_uses_the_launch_spread():
    path = OSU / "osu_latency-openmpi-5.0.11-1N2P.txt"
    imported = import_files([path], "osu", "openmpi-5.0.11", "1N2P")
    result = across(campaign_like(path, {(0, 2**30): 1.2}, launches=3), imported).squeeze()
    assert set(result["basis"].values.tolist()) == {"launches"}
    np.testing.assert_allclose(result["ratio"], 1 / 1.2, rtol=0.01)
    assert (result["verdict"] == "improved").all()


def test_an_imported_row_is_summarised_and_drawn_beside_other_rows():
    mpich = import_files([OSU / "osu_latency-mpich-5.0.2-1N2P.txt"], "osu", "mpich-5.0.2", "1N2P")
    openmpi = import_files([OSU / "osu_latency-z-openmpi-5.0.11-1N2P.txt"], "osu", "openmpi-5.0.11", "1N2P")
    both = append_to_campaign(mpich, openmpi, library="openmpi-5.0.11")
    summary = both.commbench.summary(ci=False).sel(placement="1N2P", kernel="pingpong.send")
    np.testing.assert_allclose(summary["median"].sel(library="mpich-5.0.2"),
                               table(OSU / "osu_latency-mpich-5.0.2-1N2P.txt")[:, 1] * 1e-6)
    np.testing.assert_allclose(summary["p90"].sel(library="openmpi-5.0.11"),
                               table(OSU / "osu_latency-z-openmpi-5.0.11-1N2P.txt")[:, 3] * 1e-6)
    figure = library_comparison(ReportData(both, n_boot=20))[0]
    drawn = build_with("bokeh", figure).traverse(lambda element: element, [hv.Curve])
    assert {curve.label for curve in drawn} == {"mpich-5.0.2", "openmpi-5.0.11"}
    latency = next(curve for curve in drawn if curve.label == "mpich-5.0.2" and "time_us" in curve.vdims[0].name)
    np.testing.assert_allclose(latency.dimension_values("time_us"),
                               table(OSU / "osu_latency-mpich-5.0.2-1N2P.txt")[:, 1])


@pytest.mark.mpi
def test_an_imported_osu_latency_row_beside_a_campaigns_rows(workspace, tiny_campaign, tmp_path, capsys):
    """The tiny campaign (the quick campaign's libraries and placements, pingpong.send at 5 sizes,
    2 launches) and MPICH's osu_latency: summarised and drawn together, and compared."""
    campaign = workspace / "results" / "tiny" / "tiny.nc"
    path = OSU / "osu_latency-mpich-5.0.2-1N2P.txt"
    imported = tmp_path / "osu" / "osu.nc"
    assert cli.main(["import-osu", str(path), "--library", "mpich-5.0.2", "--placement", "1N2P",
                     "--output", str(imported)]) == 0
    tiny, osu = open_campaign(campaign), open_campaign(imported)
    both = append_to_campaign(tiny, osu, library="mpich-5.0.2 (OSU)")
    summary = both.commbench.summary(ci=False).sel(placement="1N2P", kernel="pingpong.send")
    osu_times = dict(zip(table(path)[:, 0].astype(int), table(path)[:, 1] * 1e-6))
    for size in tiny["size"].values:
        assert float(summary["median"].sel(library="mpich-5.0.2 (OSU)", size=size)) == pytest.approx(osu_times[size])
        assert np.isfinite(summary["median"].sel(library="mpich-5.0.2", size=size))
    figures = {figure.name: figure for figure in library_comparison(ReportData(both, n_boot=20))}
    drawn = build_with("bokeh", figures["library-comparison-1N2P"]).traverse(lambda element: element, [hv.Curve])
    assert {curve.label for curve in drawn} == {"mpich-5.0.2", "openmpi-5.0.11", "mpich-5.0.2 (OSU)"}
    capsys.readouterr()
    # Against the campaign's two launches the import's one is compared with the launches' spread ...
    assert cli.main(["compare", str(campaign), str(imported)]) == 0
    printed = capsys.readouterr()
    assert "library rows matched: by name" in printed.out and "cells:" in printed.out
    assert "the candidate holds rows measured by another suite" in printed.err
    result = across(tiny, osu)
    assert set(result["basis"].values.ravel().tolist()) == {"launches"}
    # ... and against one launch, by the one-launch rule: no verdict under a 50% change.
    one = across(tiny.isel(launch=[0]), osu).squeeze()
    assert set(one["basis"].values.tolist()) == {"one launch"}
    small_change = np.abs(np.log(one["ratio"])) < np.log(1.5)
    assert (one["verdict"].where(small_change, drop=True) == "inconclusive").all()
