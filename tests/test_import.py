"""Importing other suites' outputs: real OSU Micro-Benchmarks 7.4, IMB-MPI1 2021.11 and NetPIPE 5
runs (tests/data/<suite>/, their README says how each was made) become datasets that the summary,
the figures and compare read like a campaign's, with every number of every file."""

import hashlib
import json
import os
import re
import tracemalloc
from pathlib import Path

import holoviews as hv
import numpy as np
import pytest

from commlens import cli, open_campaign
from commlens.analysis.compare import across
from commlens.data import synthetic as syn
from commlens.data.imported import ImportRefused, import_files, write
from commlens.interactive import append_to_campaign
from commlens.io.importers import ImportFileError, read_batch, read_osu
from commlens.io.importers.common import MAX_FILE_BYTES, MAX_ROWS
from commlens.io.netcdf import write_dataset
from commlens.report import ReportData
from commlens.report.backends import build_with
from commlens.report.figures import library_comparison
from commlens.report.plotting import FIT_LABEL

DATA = Path(__file__).parent / "data"
OSU2 = sorted((DATA / "osu" / "openmpi-5.0.11-1N2P").glob("*.txt"))
OSU4 = sorted((DATA / "osu" / "openmpi-5.0.11-1N4P").glob("*.txt"))
CUT = DATA / "osu" / "truncated"
OLD_OSU = DATA / "osu-7.4"
IMB2 = DATA / "imb" / "IMB-MPI1-mpich-5.0.2-np2.txt"
IMB4 = DATA / "imb" / "IMB-MPI1-openmpi-5.0.11-np4.txt"
NETPIPE = DATA / "netpipe"
US, MB = 1e-6, 1e6

# What a user relies on: each OSU benchmark, the kernel measuring the same thing, and the columns
# its file prints, as the dataset's `reported` names them.
OSU_KERNELS = {
    "osu_latency": "pingpong.send", "osu_bw": "stream.uni", "osu_bibw": "stream.bi", "osu_mbw_mr": "multipair.stream",
    "osu_multi_lat": "multipair.pingpong", "osu_put_latency": "rma.put", "osu_get_latency": "rma.get",
    "osu_put_bw": "rma.put", "osu_get_bw": "rma.get", "osu_bcast": "coll.bcast", "osu_scatter": "coll.scatter",
    "osu_scatterv": "coll.scatterv", "osu_reduce": "coll.reduce", "osu_gather": "coll.gather",
    "osu_gatherv": "coll.gatherv", "osu_allreduce": "coll.allreduce", "osu_allgather": "coll.allgather",
    "osu_allgatherv": "coll.allgatherv", "osu_alltoall": "coll.alltoall", "osu_alltoallv": "coll.alltoallv",
    "osu_reduce_scatter": "coll.reduce_scatter", "osu_barrier": "coll.barrier"}
LATENCY = ["avg_latency_s"]
BANDWIDTH = ["bandwidth_Bps"]
PERCENTILES = {"latency": ["avg_latency_s", "p50_latency_s", "p90_latency_s", "p99_latency_s"],
               "bandwidth": ["bandwidth_Bps", "p50_bandwidth_Bps", "p90_bandwidth_Bps", "p99_bandwidth_Bps"]}


def benchmark(path: Path) -> str:
    return re.sub(r"-(z|f|m1-65536)$", "", path.stem)


def columns_of(path: Path) -> list[str]:
    """The `reported` columns the file's header prints, in its order (Iterations: iters_per_sample)."""
    if path.stem.endswith("-z"):
        return PERCENTILES["bandwidth" if benchmark(path) == "osu_bw" else "latency"]
    if path.stem.endswith("-f"):
        return ["avg_latency_s", "min_latency_s", "max_latency_s", "iterations"]
    if benchmark(path) == "osu_mbw_mr":
        return ["bandwidth_Bps", "message_rate_per_s"]
    return BANDWIDTH if benchmark(path).endswith(("bw", "bibw")) else LATENCY


def osu_rows(path: Path) -> np.ndarray:
    """The numbers of an OSU file, read independently of the importer: its lines of numbers only
    (the MPI library's warnings between them are not); osu_barrier's one number at size 0."""
    rows = [line.split() for line in path.read_text().splitlines() if re.match(r"^\s*\d", line)]
    return np.array([[0.0, *map(float, row)] if benchmark(path) == "osu_barrier" else list(map(float, row))
                     for row in rows])


def point(ds, name: str, kernel: str, launch: int = 0):
    return ds[name].sel(kernel=kernel).isel(library=0, placement=0, launch=launch)


def launch_of(ds, path: Path) -> tuple[str, int]:
    """The kernel and launch whose kernel_info names the file."""
    info = ds["kernel_info"].isel(library=0, placement=0)
    for kernel in ds["kernel"].values:
        for launch in ds["launch"].values:
            text = str(info.sel(kernel=kernel, launch=launch).values)
            if text and json.loads(text)["file"] == str(path.resolve()):
                return str(kernel), int(launch)
    raise AssertionError(f"{path} is no launch of the dataset")


def assert_osu_file_in(ds, path: Path, nprocs: int) -> None:
    """Every number of `path` is in the dataset: its columns in `reported` (SI units), its sample
    the point's mean (a bandwidth's through the report's bytes factor), -z's P50 the median."""
    kernel, launch = launch_of(ds, path)
    assert kernel.split("@")[0] == OSU_KERNELS[benchmark(path)]
    rows = osu_rows(path)
    sizes = rows[:, 0].astype(int)
    if benchmark(path) == "osu_reduce_scatter":        # OSU's size is the whole vector, commlens's per rank
        keep = sizes % nprocs == 0
        rows, sizes = rows[keep], sizes[keep] // nprocs
    reported = point(ds, "reported", kernel, launch).sel(size=sizes)
    for i, column in enumerate(columns_of(path), start=1):
        if column == "iterations":
            np.testing.assert_array_equal(point(ds, "iters_per_sample", kernel, launch).sel(size=sizes), rows[:, i])
            continue
        unit = MB if column.endswith("Bps") else 1.0 if column.endswith("per_s") else US
        np.testing.assert_array_equal(reported.sel(reported_column=column).values, rows[:, i] * unit)
    at = {"size": sizes}
    assert (point(ds, "sample_count", kernel, launch).sel(at) == 1).all()     # one value per size, no invented samples
    assert np.isnan(point(ds, "min", kernel, launch).sel(at)).all()           # no single iteration's time is known
    if columns_of(path)[0] == "avg_latency_s":
        np.testing.assert_allclose(point(ds, "mean", kernel, launch).sel(at), rows[:, 1] * US, rtol=1e-15)
    else:
        summary = ds.commlens.summary(ci=False).sel(kernel=kernel).isel(library=0, placement=0)
        np.testing.assert_allclose(summary["bandwidth"].sel(at), rows[:, 1] * MB, rtol=1e-12)
    if path.stem.endswith("-z") and benchmark(path) != "osu_bw":
        np.testing.assert_allclose(point(ds, "median", kernel, launch).sel(at), rows[:, 2] * US, rtol=1e-15)
        np99 = point(ds, "quantiles", kernel, launch).sel(size=sizes, quantile=0.99)
        np.testing.assert_allclose(np99, rows[:, 4] * US)


def test_there_is_a_real_output_of_every_supported_osu_benchmark():
    assert {benchmark(path) for path in OSU2} == set(OSU_KERNELS)
    assert {benchmark(path) for path in OSU4} == {b for b, k in OSU_KERNELS.items()
                                                  if k.startswith(("coll.", "multipair."))}


def test_every_osu_output_imports_in_one_command_with_every_number(tmp_path, capsys):
    output = tmp_path / "osu.nc"
    assert cli.main(["import-osu", *map(str, OSU2), "--library", "openmpi-5.0.11", "--placement", "1N2P",
                     "-o", str(output)]) == 0
    printed = capsys.readouterr().out
    assert "library row openmpi-5.0.11 (imported)" in printed and "coll.barrier: 1 launch, 1 size (0 to 0 B)" in printed
    ds = open_campaign(output)
    assert ds.sizes["launch"] == 1 and len(ds["kernel"]) == len(OSU2)      # every file a row of its own here
    for path in OSU2:
        assert_osu_file_in(ds, path, 2)
        record = json.loads(str(point(ds, "kernel_info", launch_of(ds, path)[0]).values))
        assert record["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest() and record["version"] == "7.4"
    assert bool(ds["imported"].values[0]) and "osu_mbw_mr" in str(ds["source"].values[0])
    assert "averaged over the ranks" in str(ds["suite_metric"].sel(kernel="coll.bcast").values[0])
    assert not {"cpu_model", "os", "hosts", "kernel_source_hash"} & set(ds.attrs)   # not measured here
    # The one-sided tests say their window creation and synchronisation; latency is a window of one.
    put = json.loads(str(point(ds, "kernel_info", "rma.put@osu-put-latency").values))
    assert (put["window_creation"], put["synchronization"]) == ("MPI_Win_allocate", "MPI_Win_flush")
    assert json.loads(ds.attrs["campaign_config"])["kernels"]["rma.put@osu-put-latency"]["window"] == 1


def test_collectives_on_four_ranks_and_the_range_a_run_was_given(tmp_path):
    ranged = next(path for path in OSU4 if "-m1-65536" in path.name)
    others = [path for path in OSU4 if path != ranged]
    ds = import_files(others, "osu", "openmpi-5.0.11", "1N4P")
    for path in others:
        assert_osu_file_in(ds, path, 4)
    assert json.loads(str(point(ds, "kernel_info", "multipair.stream").values))["pairs"] == 2
    # OSU does not print its -m: checked against the default range, the -m 1:65536 run looks cut short ...
    with pytest.raises(ImportRefused, match=r"(?s)1 of 1 files refused.*osu_allreduce \(its default sizes\) was to run "
                                            r"21 sizes, 1 to 1048576 B; the file has 17 and stops at 65536 B"):
        import_files([ranged], "osu", "openmpi-5.0.11", "1N4P")
    # ... and imports whole when the range it was given is said.
    ds = import_files([ranged], "osu", "openmpi-5.0.11", "1N4P", osu_sizes=(1, 65536))
    assert_osu_file_in(ds, ranged, 4)
    assert not ds["partial"].any()


def test_plain_and_z_runs_are_never_launches_of_one_row():
    paths = [path for path in OSU2 if benchmark(path) == "osu_latency"]
    ds = import_files(paths, "osu", "openmpi-5.0.11", "1N2P")
    assert ds["kernel"].values.tolist() == ["pingpong.send", "pingpong.send@z"]
    summary = ds.commlens.summary(ci=False).isel(library=0, placement=0)
    plain, z = (osu_rows(path) for path in sorted(paths, key=lambda p: "-z" in p.name))
    np.testing.assert_allclose(summary["mean"].sel(kernel="pingpong.send"), plain[:, 1] * US)   # OSU's Avg
    np.testing.assert_allclose(summary["median"].sel(kernel="pingpong.send@z"), z[:, 2] * US)   # OSU's P50
    assert "files of different kinds are rows of their own" in ds.attrs["import_notes"]


def test_files_of_one_kind_are_launches_of_one_row():
    paths = [OLD_OSU / "osu_latency-openmpi-5.0.11-1N2P.txt", DATA / "osu" / "openmpi-5.0.11-1N2P" / "osu_latency.txt"]
    ds = import_files(paths, "osu", "openmpi-5.0.11", "1N2P")
    assert ds["kernel"].values.tolist() == ["pingpong.send"] and ds.sizes["launch"] == 2
    expected = np.median([osu_rows(p)[:, 1] for p in paths], axis=0) * US
    np.testing.assert_allclose(ds.commlens.summary(ci=False)["median"].values.ravel(), expected)


@pytest.mark.parametrize("path, placement, message", [
    (OSU2[0].with_name("osu_latency.txt"), "1N4P", "osu_latency runs on 2 ranks, but the placement has 4"),
    (OSU4[0].with_name("osu_mbw_mr.txt"), "1N2P", r"osu_mbw_mr ran 2 pairs \(4 ranks, the file's '\[ pairs: 2 \]'\)"),
    (IMB2, "1N4P", "ran on 2 ranks"),
])
def test_a_placement_that_contradicts_the_files_ranks_is_refused(path, placement, message):
    suite = "imb" if "IMB" in path.name else "osu"
    with pytest.raises(ImportRefused, match=message) as info:
        import_files([path], suite, "lib", placement)
    assert str(path) in str(info.value)


def test_a_collective_does_not_state_its_ranks_and_the_import_says_so(capsys, tmp_path):
    path = OSU2[0].with_name("osu_bcast.txt")
    assert cli.main(["import-osu", str(path), "--library", "l", "--placement", "1N4P", "-o",
                     str(tmp_path / "x.nc")]) == 0
    assert "ranks: osu_bcast do not state theirs; the placement's 4 are assumed" in capsys.readouterr().out
    record = json.loads(str(open_campaign(tmp_path / "x.nc")["kernel_info"].values.ravel()[0]))
    assert record["ranks_stated"].startswith("unknown")


@pytest.mark.parametrize("name, placement, message, whole_rows", [
    ("osu_latency-cut.txt", "1N2P", r"truncated: osu_latency \(its default sizes\) was to run 23 sizes, 1 to "
                                    r"4194304 B; the file has 11 and stops at 1024 B", 11),
    ("osu_bw-cut-in-row.txt", "1N2P", r":21: truncated: the last row is incomplete \(a row of 1 fields where the "
                                      r"header has 2: '65536'\)", 16),
    ("osu_bcast-1N4P-cut.txt", "1N4P", r"truncated: osu_bcast \(its default sizes\) was to run 21 sizes, 1 to "
                                       r"1048576 B; the file has 10 and stops at 512 B", 10),
])
def test_a_truncated_osu_file_is_refused_or_imported_marked_partial(name, placement, message, whole_rows, tmp_path,
                                                                     capsys):
    path = CUT / name
    with pytest.raises(ImportRefused, match=message):
        import_files([path], "osu", "openmpi-5.0.11", placement)
    assert cli.main(["import-osu", str(path), "--library", "l", "--placement", placement, "--partial",
                     "-o", str(tmp_path / "x.nc")]) == 0
    assert f"partial: {name}: truncated" in capsys.readouterr().out
    ds = open_campaign(tmp_path / "x.nc")
    assert ds["partial"].values.ravel().tolist() == [True]
    assert ds.sizes["size"] == whole_rows          # what the file has, less a row cut in two
    assert "truncated" in json.loads(str(ds["kernel_info"].values.ravel()[0]))["partial"]


def test_a_batch_tries_every_file_lists_every_refusal_and_writes_only_when_told(tmp_path, capsys):
    good = [OSU2[0].with_name(name) for name in ("osu_latency.txt", "osu_bw.txt")]
    bad = [OLD_OSU / "osu_bcast-mpich-5.0.2-1N4P.txt", CUT / "osu_latency-cut.txt", IMB2]
    output = tmp_path / "x.nc"
    args = ["import-osu", *map(str, good + bad), "--library", "l", "--placement", "1N2P", "-o", str(output)]
    assert cli.main(args) == 2
    error = capsys.readouterr().err
    assert "3 of 5 files refused; nothing written (give --skip-bad to import the other 2)" in error
    assert f"{bad[0]}: not an OSU Micro-Benchmarks output" in error and "unrecognized argument oversubscribe" in error
    assert f"{bad[1]}: truncated" in error and f"{bad[2]}: not an OSU Micro-Benchmarks output" in error
    assert not output.exists()
    assert cli.main(args + ["--skip-bad"]) == 0
    printed = capsys.readouterr().out
    assert all(f"refused: {path}" in printed for path in bad)
    ds = open_campaign(output)
    assert ds["kernel"].values.tolist() == ["pingpong.send", "stream.uni"]
    assert len(json.loads(ds.attrs["refused_files"])) == 3


def test_an_unknown_or_device_benchmark_is_refused_with_the_known_ones(tmp_path):
    text = OSU2[0].with_name("osu_bcast.txt").read_text()
    for title, expected in [("OSU MPI Non-blocking Broadcast Latency Test", "is not a benchmark a commlens kernel "
                                                                            "measures alike; imported: osu_latency"),
                            ("OSU MPI-CUDA Broadcast Latency Test", "an OSU CUDA run (device buffers)")]:
        path = tmp_path / "osu.txt"
        path.write_text(text.replace("OSU MPI Broadcast Latency Test", title))
        with pytest.raises(ImportFileError, match=re.escape(expected)) as info:
            read_osu(path, 2)
        assert str(info.value).startswith(f"{path}:2:")


def test_kernel_must_be_the_benchmarks_own_or_a_label_of_it():
    path = OSU2[0].with_name("osu_latency.txt")
    with pytest.raises(ImportRefused, match=r"allowed: pingpong.send, or pingpong.send@LABEL"):
        import_files([path], "osu", "openmpi-5.0.11", "1N2P", kernel="stream.uni")
    ds = import_files([path], "osu", "openmpi-5.0.11", "1N2P", kernel="pingpong.send@osu")
    assert ds["kernel"].values.tolist() == ["pingpong.send@osu"]


def test_placement_shape_comes_from_its_name_or_the_options():
    path = OSU2[0].with_name("osu_latency.txt")
    with pytest.raises(ValueError, match=r"--placement shm: give --nodes and --ppn"):
        import_files([path], "osu", "openmpi-5.0.11", "shm")
    ds = import_files([path], "osu", "openmpi-5.0.11", "shm", nodes=1, ppn=2)
    assert (int(ds["nodes"][0]), int(ds["ppn"][0]), int(ds["nprocs"][0])) == (1, 2, 2)


# ---------------------------------------------------------------------------- IMB

def imb_table(path: Path, name: str, processes: int) -> np.ndarray:
    """The rows of one IMB table, read independently of the importer."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"# Benchmarking {name} ")
                 and lines[i + 1].startswith(f"# #processes = {processes} "))
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("# Benchmarking"):
            break
        if line.split() and line.split()[0].isdigit() and "time-out" not in line:
            rows.append([float(v) for v in line.split()])
    return np.array(rows)


IMB_KERNELS = {"PingPong": "pingpong.send", "PingPing": "pingping", "Sendrecv": "exchange.sendrecv",
               "Exchange": "ring.waitall4", "Bcast": "coll.bcast", "Allreduce": "coll.allreduce",
               "Alltoall": "coll.alltoall", "Reduce": "coll.reduce", "Allgather": "coll.allgather",
               "Gather": "coll.gather", "Scatter": "coll.scatter", "Barrier": "coll.barrier",
               "Allgatherv": "coll.allgatherv", "Gatherv": "coll.gatherv", "Scatterv": "coll.scatterv",
               "Alltoallv": "coll.alltoallv"}


@pytest.mark.parametrize("path, nprocs, names", [
    (IMB2, 2, ["PingPong", "PingPing", "Sendrecv", "Exchange", "Bcast", "Allreduce", "Alltoall"]),
    (IMB4, 4, list(IMB_KERNELS)),
])
def test_every_number_of_a_real_imb_run_is_imported(path, nprocs, names, tmp_path):
    output = tmp_path / "imb.nc"
    assert cli.main(["import-imb", str(path), "--library", "l", "--placement", f"1N{nprocs}P", "-o", str(output)]) == 0
    ds = open_campaign(output)
    assert sorted(ds["kernel"].values.tolist()) == sorted(IMB_KERNELS[name] for name in names)
    for name in names:
        kernel = IMB_KERNELS[name]
        table = imb_table(path, name, 2 if name in ("PingPong", "PingPing") else nprocs)
        table = np.column_stack([np.zeros(len(table)), table]) if name == "Barrier" else table
        sizes = table[:, 0].astype(int)
        reported = point(ds, "reported", kernel).sel(size=sizes)
        np.testing.assert_array_equal(point(ds, "iters_per_sample", kernel).sel(size=sizes), table[:, 1])
        if name in ("PingPong", "PingPing"):
            np.testing.assert_array_equal(reported.sel(reported_column="t_s"), table[:, 2] * US)
            sample = table[:, 2]
        else:   # t_min, t_max and t_avg each in its own column; the sample is t_max
            for i, column in enumerate(["t_min_s", "t_max_s", "t_avg_s"], start=2):
                np.testing.assert_array_equal(reported.sel(reported_column=column), table[:, i] * US)
            sample = table[:, 3]
        if table.shape[1] > 5 or name in ("PingPong", "PingPing"):
            np.testing.assert_array_equal(reported.sel(reported_column="bandwidth_Bps"), table[:, -1] * MB)
        np.testing.assert_allclose(point(ds, "mean", kernel).sel(size=sizes), sample * US, rtol=1e-15)
        assert np.isnan(point(ds, "min", kernel).sel(size=sizes)).all()     # t_max is no minimum
    if nprocs == 4:
        record = json.loads(str(point(ds, "kernel_info", "coll.bcast").values))
        assert "Bcast on 2 processes (the placement has 4 ranks)" in record["not_imported"]
        assert record["version"] == "2021.11" and record["max_size"] == 65536


@pytest.mark.parametrize("name, message", [
    ("IMB-MPI1-mpich-5.0.2-np2-cut.txt", r"no '# All processes entering MPI_Finalize' line: the run was cut short "
                                         r"\(in PingPong on 2 processes\)"),
    ("IMB-MPI1-mpich-5.0.2-np4-killed.txt", r"cut short \(in Allreduce on 4 processes\)"),
])
def test_a_truncated_imb_run_is_refused_or_imports_its_whole_tables(name, message):
    path = DATA / "imb" / name
    with pytest.raises(ImportRefused, match=message):
        import_files([path], "imb", "mpich-5.0.2", "1N2P" if "np2" in name else "1N4P")
    if "cut" in name:      # with --partial: the ten rows PingPong had, marked partial
        ds = import_files([path], "imb", "mpich-5.0.2", "1N2P", partial=True)
        assert ds["kernel"].values.tolist() == ["pingpong.send"] and ds["partial"].all()
        np.testing.assert_array_equal(point(ds, "mean", "pingpong.send").dropna("size"),
                                      imb_table(path, "PingPong", 2)[:, 2] * US)
    if "killed" in name:
        ds = import_files([path], "imb", "mpich-5.0.2", "1N4P", partial=True)
        # Every table it has, the one being written when the run was cut too, each marked partial.
        assert ds["kernel"].values.tolist() == sorted(["pingpong.send", "pingping", "exchange.sendrecv",
                                                       "ring.waitall4", "coll.bcast", "coll.allreduce"])
        assert ds["partial"].all()
        for name, processes, rows in [("PingPong", 2, 18), ("Sendrecv", 4, 18), ("Bcast", 4, 6), ("Allreduce", 4, 7)]:
            counts = point(ds, "sample_count", IMB_KERNELS[name]).sum("size")
            assert counts == len(imb_table(path, name, processes)) == rows
        # IMB stopped Bcast at a time-out on 32 B: listed, and no size after it was to run.
        record = json.loads(str(point(ds, "kernel_info", "coll.bcast").values))
        assert record["rows_not_measured"] == ["32 B (time-out.; Time limit (secs_per_sample * msg_sizes_list_len))"]


# ---------------------------------------------------------------------------- NetPIPE

def netpipe_rows(path: Path) -> np.ndarray:
    return np.loadtxt(path, ndmin=2)


@pytest.mark.parametrize("run, kernel, directions", [
    ("np-mpich-5.0.2", "pingpong.irecv", 1), ("np-mpich-5.0.2-bidir", "pingping", 2),
    ("np-mpich-5.0.2-stream", "stream.uni", 1)])
def test_a_netpipe_run_imports_from_its_o_file_and_console(run, kernel, directions, tmp_path):
    out, console = NETPIPE / f"{run}.out", NETPIPE / f"{run}.console.txt"
    output = tmp_path / "np.nc"
    assert cli.main(["import-netpipe", str(console), str(out), "--library", "mpich-5.0.2", "--placement", "1N2P",
                     "-o", str(output)]) == 0
    ds = open_campaign(output)
    assert ds["kernel"].values.tolist() == [kernel]
    rows = netpipe_rows(out)
    sizes = (rows[:, 0] / directions).astype(int)
    reported = point(ds, "reported", kernel).sel(size=sizes)
    np.testing.assert_array_equal(reported.sel(reported_column="time_s"), rows[:, 4] * US)
    for i, column in enumerate(["throughput_avg_Bps", "throughput_min_Bps", "throughput_max_Bps"], start=1):
        np.testing.assert_array_equal(reported.sel(reported_column=column), rows[:, i] * 1e9 / 8)
    np.testing.assert_allclose(point(ds, "mean", kernel).sel(size=sizes), rows[:, 4] * US, rtol=1e-15)
    repeats = [int(m.group(1)) for m in re.finditer(r"(\d+) times -->", console.read_text())]
    np.testing.assert_array_equal(point(ds, "iters_per_sample", kernel).sel(size=sizes), repeats)


def test_a_netpipe_file_alone_or_cut_short_is_refused(tmp_path):
    out, console = NETPIPE / "np-mpich-5.0.2.out", NETPIPE / "np-mpich-5.0.2.console.txt"
    with pytest.raises(ImportRefused, match="does not say how it was run"):
        import_files([out], "netpipe", "l", "1N2P")
    with pytest.raises(ImportRefused, match="give its -o file"):
        import_files([console], "netpipe", "l", "1N2P")
    cut = [NETPIPE / "truncated" / "np-mpich-5.0.2-cut.out", NETPIPE / "truncated" / "np-mpich-5.0.2-cut.console.txt"]
    with pytest.raises(ImportRefused, match=r"truncated: the console has \d+ sizes and no 'Completed with' line"):
        import_files(cut, "netpipe", "l", "1N2P")
    ds = import_files(cut, "netpipe", "l", "1N2P", partial=True)
    assert ds["partial"].all() and ds.sizes["size"] == len(netpipe_rows(cut[0]))
    with pytest.raises(ImportRefused, match="NetPIPE ran 1 pair"):
        import_files([out, console], "netpipe", "l", "1N4P")
    # A -o file cut inside its 32nd row, beside the whole run's console.
    cut_out = tmp_path / "np.out"
    cut_out.write_bytes(out.read_bytes()[:1500])
    with pytest.raises(ImportRefused, match=r"1 of 2 files refused.*\n.*truncated: the console has 124 sizes, "
                                            r"the -o file 31"):
        import_files([cut_out, console], "netpipe", "l", "1N2P")
    assert import_files([cut_out, console], "netpipe", "l", "1N2P", partial=True).sizes["size"] == 31


# -------------------------------------------------------------------- numbers no run prints, files no run writes

def edited(path: Path, directory: Path, starts: str, row: str) -> tuple[Path, int]:
    """A copy of `path` in `directory` whose first line starting with `starts` (less its indent) is
    `row`, and that line's number."""
    lines = path.read_text().splitlines()
    number = next(i for i, line in enumerate(lines, 1) if line.strip().startswith(starts))
    lines[number - 1] = row
    copy = directory / path.name
    copy.write_text("\n".join(lines) + "\n")
    return copy, number


def refusal(suite: str, path: Path) -> str:
    """Why the import of `path` (a NetPIPE -o file with its console) is refused."""
    paths = [path, NETPIPE / "np-mpich-5.0.2.console.txt"] if suite == "netpipe" else [path]
    with pytest.raises(ImportRefused) as info:
        import_files(paths, suite, "l", "1N2P")
    return str(info.value)


# A time of each suite, as its row prints it ({} the value): (suite, file, row's start, row, column).
TIMES = [("osu", OSU2[0].with_name("osu_latency.txt"), "1048576 ", "1048576  {}", "Avg Latency(us)"),
         ("imb", IMB2, "1048576 ", "1048576  40  {}  4781.93", "t[usec]"),
         ("netpipe", NETPIPE / "np-mpich-5.0.2.out", "3 ", "3  0.003  0.002  0.004  {}", "time (us)")]


@pytest.mark.parametrize("value", ["-97.64", "0.00", "inf", "nan"])
@pytest.mark.parametrize("suite, path, starts, row, column", TIMES, ids=["osu", "imb", "netpipe"])
def test_a_time_that_is_no_time_is_refused_with_its_line_and_value(suite, path, starts, row, column, value, tmp_path):
    bad, number = edited(path, tmp_path, starts, row.format(value))
    why = refusal(suite, bad)
    assert f"{bad}:{number}: {column} {value}: must be a finite number above 0" in why
    if value == "0.00":
        assert "no operation takes no time" in why


@pytest.mark.parametrize("suite, path, starts, row, message", [
    ("osu", OSU2[0].with_name("osu_latency.txt"), "1024 ", "1024.5  0.76", "Size 1024.5: must be a whole number of "
                                                                           "bytes, 0 or more"),
    ("osu", OSU2[0].with_name("osu_latency.txt"), "1024 ", "-1024  0.76", "Size -1024: must be a whole number"),
    ("osu", OSU2[0].with_name("osu_bw.txt"), "65536 ", "65536  -0.01", "Bandwidth (MB/s) -0.01: must be a finite "
                                                                       "number, 0 or more"),
    ("imb", IMB2, "1048576 ", "1048576.5  40  219.28  4781.93", "#bytes 1048576.5: must be a whole number of bytes"),
    ("imb", IMB2, "1048576 ", "-1048576  40  219.28  4781.93", "#bytes -1048576: must be a whole number of bytes"),
    ("imb", IMB2, "1048576 ", "1048576  0  219.28  4781.93", "#repetitions 0: must be a whole number above 0"),
    ("imb", IMB2, "1048576 ", "1048576  40  219.28  inf", "Mbytes/sec inf: must be a finite number, 0 or more"),
    ("netpipe", NETPIPE / "np-mpich-5.0.2.out", "3 ", "-3  0.003  0.002  0.004  8.05", "bytes -3: must be a whole "
                                                                                      "number of bytes"),
    ("netpipe", NETPIPE / "np-mpich-5.0.2.out", "3 ", "3  nan  0.002  0.004  8.05", "average Gbps nan: must be"),
], ids=["osu-fraction", "osu-negative", "osu-rate", "imb-fraction", "imb-negative", "imb-repetitions", "imb-rate",
        "netpipe-negative", "netpipe-rate"])
def test_a_size_count_or_rate_no_run_prints_is_refused_with_its_line(suite, path, starts, row, message, tmp_path):
    bad, number = edited(path, tmp_path, starts, row)
    assert f"{bad}:{number}: {message}" in refusal(suite, bad)


def peak_memory(action) -> tuple[object, int]:
    """What `action()` returns and the most memory it held at once."""
    tracemalloc.start()
    try:
        return action(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("suite", ["osu", "imb", "netpipe"])
def test_a_file_over_the_size_limit_is_refused_from_its_size_unread(suite, tmp_path):
    path = tmp_path / "huge.txt"
    path.write_text("# OSU MPI Latency Test v7.4\n")
    os.truncate(path, MAX_FILE_BYTES + 1)            # sparse: made at once; reading it would take 64 MiB
    (_, refusals), peak = peak_memory(lambda: read_batch([path], suite, 2))
    assert peak < 2**20                              # not a MiB of it was read
    assert [str(r) for r in refusals] == [f"{path}: {MAX_FILE_BYTES + 1} bytes (64.0 MiB), over the limit of "
                                          f"{MAX_FILE_BYTES} bytes (64 MiB) for one file: an OSU, IMB or NetPIPE "
                                          f"output is a few hundred KB"]


FILLER = 20 * 2**20            # bytes of the large files below: memory held must stay far below it
TITLE, HEADER = b"# OSU MPI Latency Test v7.4\n", b"# Datatype: MPI_CHAR.\n# Size       Avg Latency(us)\n"


def warnings_between_rows() -> bytes:
    """The real osu_latency run with an MPI library's warning repeated between its lines, FILLER bytes."""
    lines = OSU2[0].with_name("osu_latency.txt").read_bytes().splitlines(keepends=True)
    warning = b"[node1:12345] mca_btl_tcp: warning: interface eth1 unreachable, connections to it are slow " * 2 + b"\n"
    return b"".join(line + warning * (FILLER // len(warning) // len(lines)) for line in lines)


def repeated(row: bytes) -> bytes:
    return row * (FILLER // len(row))


@pytest.mark.parametrize("suite, make, refused", [
    ("osu", warnings_between_rows, None),
    ("osu", lambda: repeated(b"1  1.50\n"), "not an OSU Micro-Benchmarks output: no '# OSU ... Test' title line "
                                            "before its first row of numbers (line 1: '1  1.50')"),
    ("osu", lambda: TITLE + repeated(b"1  1.50\n"), ":2: a row of numbers before any column header"),
    ("osu", lambda: TITLE + HEADER + repeated(b"1  1.50\n"), ":5: size 1 after 1: sizes do not increase"),
    ("osu", lambda: TITLE + HEADER + b"".join(b"%07d  1.50\n" % size for size in range(1, FILLER // 13)),
     f":{MAX_ROWS + 4}: more than {MAX_ROWS} rows of numbers"),
    ("imb", lambda: repeated(b"1  1000  1.50  0.67\n"), "not an IMB output: no 'Intel(R) MPI Benchmarks <version>, "
                                                        "MPI-1 part' banner before its first row of numbers (line 1"),
    ("netpipe", lambda: repeated(b"1  1.50\n"), ":1: neither a NetPIPE 5 -o file"),
], ids=["osu-warnings-between-rows", "osu-no-title", "osu-no-header", "osu-one-size-over-and-over",
        "osu-more-rows-than-a-run-prints", "imb-no-banner", "netpipe-two-columns"])
def test_a_large_file_is_read_a_line_at_a_time_and_refused_at_its_first_wrong_line(suite, make, refused, tmp_path):
    path = tmp_path / "run.txt"
    path.write_bytes(make())
    assert path.stat().st_size > FILLER * 0.95
    (found, refusals), peak = peak_memory(lambda: read_batch([path], suite, 2))
    assert peak < FILLER / 8                    # a line at a time, and at most MAX_ROWS rows kept, whatever the size
    if refused is None:                         # every number of the run, passed over the warnings
        measurement, = found
        np.testing.assert_array_equal(measurement.reported["avg_latency_s"],
                                      osu_rows(OSU2[0].with_name("osu_latency.txt"))[:, 1] * US)
        assert measurement.provenance["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    else:
        assert len(refusals) == 1 and refused in str(refusals[0]), refusals


# ---------------------------------------------------------------------------- beside a campaign

def test_appending_long_row_names_saves_and_opens_them_intact(tmp_path, capsys):
    short = write(import_files([OSU2[0].with_name("osu_latency.txt")], "osu", "openmpi-5.0.11", "1N2P"),
                  tmp_path / "a.nc")
    other = write(import_files([OLD_OSU / "osu_latency-mpich-5.0.2-1N2P.txt"], "osu", "mpich", "1N2P"),
                  tmp_path / "b.nc")
    label = "openmpi-5.0.11 (OSU 7.4, imported from an older run)"
    both = append_to_campaign(open_campaign(short), open_campaign(other), library=label)
    write_dataset(both, tmp_path / "both.nc", keep_previous=False)
    back = open_campaign(tmp_path / "both.nc")
    assert back["library"].values.tolist() == ["openmpi-5.0.11", label]
    np.testing.assert_allclose(back["mean"].sel(library=label).squeeze(),
                               osu_rows(OLD_OSU / "osu_latency-mpich-5.0.2-1N2P.txt")[:, 1] * US)
    capsys.readouterr()
    assert cli.main(["summary", str(tmp_path / "both.nc"), "--check"]) == 0     # no cell taken for a missing launch
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if line.startswith(("openmpi-5.0.11 ", label + " "))]
    assert len(rows) == 2 and rows[1].startswith(label + "  ") and all(row.endswith("imported [1]") for row in rows)
    assert lines[-1].startswith("[1] imported from OSU Micro-Benchmarks 7.4: osu_latency; OSU's Avg Latency as "
                                "reported")


def campaign_like(osu_path: Path, factor: dict, launches: int = 1, seed: int = 0):
    """A campaign-shaped dataset (known ground truth) whose pingpong.send times are OSU's averages
    times `factor[size range]`, 200 samples a launch with 0.5% noise, named as the import's row."""
    numbers = osu_rows(osu_path)
    sizes, truth = numbers[:, 0].astype(int), numbers[:, 1] * US
    scale = np.array([next(f for (low, high), f in factor.items() if low <= s <= high) for s in sizes])
    rng = np.random.default_rng(seed)
    times = (truth * scale)[:, None, None] * (1 + 0.005 * rng.standard_normal((len(sizes), launches, 200)))
    return syn.dataset_from_cubes({("openmpi-5.0.11", "1N2P", "pingpong.send"): (sizes, times)})


def test_an_import_appended_to_a_campaign_keeps_its_reported_columns():
    path = OSU2[0].with_name("osu_latency-z.txt")
    campaign = campaign_like(path, {(0, 2**30): 1.0})
    both = append_to_campaign(campaign, import_files([path], "osu", "openmpi-5.0.11", "1N2P"), library="osu -z")
    reported = both["reported"].sel(placement="1N2P", launch=0)
    assert np.isnan(reported.sel(library="openmpi-5.0.11")).all()
    np.testing.assert_array_equal(reported.sel(library="osu -z", kernel="pingpong.send",
                                               reported_column="p99_latency_s"), osu_rows(path)[:, 4] * US)
    assert both["suite_metric"].sel(library="openmpi-5.0.11").values.tolist() == [""] * both.sizes["kernel"]
    assert not both["partial"].any()


def test_compare_of_a_campaign_with_launches_and_an_import_uses_the_launch_spread():
    path = OSU2[0].with_name("osu_latency.txt")
    imported = import_files([path], "osu", "openmpi-5.0.11", "1N2P")
    result = across(campaign_like(path, {(0, 2**30): 1.2}, launches=3), imported).squeeze()
    assert set(result["basis"].values.tolist()) == {"launches"}
    np.testing.assert_allclose(result["ratio"], 1 / 1.2, rtol=0.01)
    assert (result["verdict"] == "improved").all()


def test_an_imported_row_is_summarised_and_drawn_beside_other_rows():
    latency, z = OLD_OSU / "osu_latency-mpich-5.0.2-1N2P.txt", OLD_OSU / "osu_latency-z-openmpi-5.0.11-1N2P.txt"
    both = append_to_campaign(import_files([latency], "osu", "mpich-5.0.2", "1N2P"),
                              import_files([z], "osu", "openmpi-5.0.11", "1N2P", kernel="pingpong.send"),
                              library="openmpi-5.0.11")
    summary = both.commlens.summary(ci=False).sel(placement="1N2P", kernel="pingpong.send")
    np.testing.assert_allclose(summary["median"].sel(library="mpich-5.0.2"), osu_rows(latency)[:, 1] * US)
    np.testing.assert_allclose(summary["p90"].sel(library="openmpi-5.0.11"), osu_rows(z)[:, 3] * US)
    figure = library_comparison(ReportData(both, n_boot=20))[0]
    drawn = build_with("bokeh", figure).traverse(lambda element: element, [hv.Curve])
    assert {curve.label for curve in drawn if not curve.label.endswith("fitted regimes")} == {"mpich-5.0.2",
                                                                                          "openmpi-5.0.11"}


@pytest.mark.mpi
def test_an_imported_osu_latency_row_beside_a_campaigns_rows(workspace, tiny_campaign, tmp_path, capsys):
    """The tiny campaign (the quick campaign's libraries and placements, pingpong.send at 5 sizes,
    2 launches) and MPICH's osu_latency: summarised, drawn and compared together."""
    campaign = workspace / "results" / "tiny" / "tiny.nc"
    path = OLD_OSU / "osu_latency-mpich-5.0.2-1N2P.txt"
    imported = tmp_path / "osu" / "osu.nc"
    assert cli.main(["import-osu", str(path), "--library", "mpich-5.0.2", "--placement", "1N2P",
                     "--output", str(imported)]) == 0
    tiny, osu = open_campaign(campaign), open_campaign(imported)
    both = append_to_campaign(tiny, osu, library="mpich-5.0.2 (OSU)")
    summary = both.commlens.summary(ci=False).sel(placement="1N2P", kernel="pingpong.send")
    osu_times = dict(zip(osu_rows(path)[:, 0].astype(int), osu_rows(path)[:, 1] * US))
    for size in tiny["size"].values:
        assert float(summary["median"].sel(library="mpich-5.0.2 (OSU)", size=size)) == pytest.approx(osu_times[size])
        assert np.isfinite(summary["median"].sel(library="mpich-5.0.2", size=size))
    figures = {figure.name: figure for figure in library_comparison(ReportData(both, n_boot=20))}
    drawn = build_with("bokeh", figures["library-comparison-1N2P"]).traverse(lambda element: element, [hv.Curve])
    # (each row's dotted fitted regimes aside: the model, not a row)
    assert ({curve.label for curve in drawn if not curve.label.endswith(FIT_LABEL)}
            == {"mpich-5.0.2", "openmpi-5.0.11", "mpich-5.0.2 (OSU)"})
    write_dataset(both, tmp_path / "both.nc", keep_previous=False)       # the campaign's labels, then the long one
    assert open_campaign(tmp_path / "both.nc")["library"].values.tolist()[-1] == "mpich-5.0.2 (OSU)"
    capsys.readouterr()
    assert cli.main(["summary", str(tmp_path / "both.nc")]) == 0           # the campaign's rows unmarked
    lines = capsys.readouterr().out.splitlines()
    marked = [line for line in lines if line.endswith("]")]
    assert len(marked) == 1 and marked[0].startswith("mpich-5.0.2 (OSU)  ") and marked[0].endswith("imported [1]")
    assert not any(line.startswith("mpich-5.0.2 (OSU) ") and "no data" in line for line in lines)
    assert sum(line.startswith(("mpich-5.0.2  ", "openmpi-5.0.11  ")) for line in lines) == 4
    capsys.readouterr()
    assert cli.main(["compare", str(campaign), str(imported)]) == 0
    printed = capsys.readouterr()
    assert "library rows matched: by name" in printed.out and "cells:" in printed.out
    assert "the candidate holds rows measured by another suite" in printed.err
    assert set(across(tiny, osu)["basis"].values.ravel().tolist()) == {"launches"}
