"""Raw files in, dataset out: what is merged, what is refused, and how cells are marked."""

import json

import numpy as np
import pytest
import xarray as xr

from commlens.campaign import validate_campaign, Campaign
from commlens.data.collect import build_dataset, read_all, stream_raw
from commlens.io.netcdf import write_dataset
from commlens import open_campaign
from commlens.io.raw import RawFileError, read_raw
from commlens.data.samples import POINT_DIMS
from commlens.report.methods import methods_markdown

CONFIG = {
    "campaign": "unit",
    "libraries": {"libA": {"mpi": "mpich-x"}, "libB": {"mpi": "openmpi-y"}},
    "placements": [{"name": "1N2P", "nodes": 1, "ppn": 2},
                   {"name": "2N1P", "nodes": 2, "ppn": 1, "network": {"rate": "1gbit", "mtu": 1500}}],
    "kernels": {"pingpong.send": {"sizes": {"list": [1, 8]}}, "memcpy": {"placements": ["1N2P"]}},
    "launches": 2,
}
LIBRARIES = {"mpich-x": {"name": "mpich-x", "family": "mpich"},
             "openmpi-y": {"name": "openmpi-y", "family": "openmpi"}}
BUILDS = {"mpich-x": {"mpi": "mpich-x", "compiler": "gcc 12", "cflags": "-O2"},
          "openmpi-y": {"mpi": "openmpi-y", "compiler": "gcc 12", "cflags": "-O2"}}


def campaign():
    return Campaign(name="unit", source="unit.yaml", config=validate_campaign(CONFIG))


def launch_record(library, placement, launch, status="ok"):
    return {"record": "launch", "schema": 1, "status": status, "library": library, "mpi": "m",
            "placement": placement, "kernel": "pingpong.send", "launch": launch,
            "started": "2026-01-01T00:00:00+00:00"}


def run_record(library):
    return {"record": "run", "schema": 1, "kernel": "pingpong.send", "metric": "half round trip",
            "library_version": f"{library} version 1.0\n", "nprocs": 2, "hosts": ["h0", "h0"],
            "cpu_binding": ["0", "1"], "timer": "MPI_Wtime", "timer_resolution_s": 1e-9,
            "harness_overhead_s": 3e-8, "args": {}}


def point(size, samples):
    return {"record": "point", "size": size, "samples": samples, "iters_per_sample": 4,
            "settled": True, "rse": 0.005, "errors": None}


def write_raw(path, records):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def complete(tmp_path, library, placement, launch, samples_by_size):
    points = [point(size, s) for size, s in samples_by_size.items()]
    return write_raw(tmp_path / library / placement / f"launch{launch}.jsonl",
                     [launch_record(library, placement, launch), run_record(library), *points,
                      {"record": "end", "status": "ok", "points": len(points)}])


def test_complete_file_is_read(tmp_path):
    result = read_raw(complete(tmp_path, "libA", "1N2P", 0, {1: [1e-6, 2e-6], 8: [3e-6]}))
    assert result.status == "ok"
    assert [p.size for p in result.points] == [1, 8]
    assert result.points[0].samples.tolist() == [1e-6, 2e-6]


def test_truncated_file_is_refused_with_a_clear_message(tmp_path):
    path = complete(tmp_path, "libA", "1N2P", 0, {1: [1e-6], 8: [3e-6]})
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n")  # cut before the end record
    with pytest.raises(RawFileError) as info:
        read_raw(path)
    assert str(path) in str(info.value) and "no end record" in str(info.value)
    assert "not merged" in str(info.value)


@pytest.mark.parametrize("mangle, expected", [
    (lambda lines: lines[:2] + [lines[2][:25]] + lines[3:], "malformed JSON"),
    (lambda lines: [lines[0].replace('"schema": 1', '"schema": 7')] + lines[1:], "unknown schema version 7"),
    (lambda lines: lines[:2] + [lines[2].replace("1e-06", "-1e-06")] + lines[3:], "not a finite positive time"),
    (lambda lines: lines[1:], "first record must be the launch record"),
    (lambda lines: lines + [lines[2]], "records after the end record"),
    (lambda lines: lines[:2] + [lines[2][:-1] + ', "exit_skew_s": [1e-6, 2e-6]}'] + lines[3:],
     r"exit_skew_s at size 1 must be a list of 1 finite non-negative numbers of seconds, one per sample"),
    (lambda lines: lines[:2] + [lines[2][:-1] + ', "exit_skew_s": [-1e-6]}'] + lines[3:], "exit_skew_s at size 1"),
    (lambda lines: lines[:2] + [lines[2][:-1] + ', "short_samples_dropped": -2}'] + lines[3:],
     "short_samples_dropped must be a non-negative integer, got -2"),
    # pair times: one square matrix per sample, positive or null
    (lambda lines: lines[:2] + [lines[2][:-1] + ', "pair_times_s": [[null, 1e-6, 1e-6]]}'] + lines[3:],
     r"pair_times_s at size 1 must be 1 lists \(one per sample\) of ranks x ranks numbers"),
    (lambda lines: lines[:2] + [lines[2][:-1] + ', "pair_times_s": [[null, 1e-6, 0, null]]}'] + lines[3:],
     "pair_times_s at size 1"),
    (lambda lines: lines[:2] + [lines[2][:-1] + ', "pair_times_s": [[null, 1e-6, 2e-6, null], []]}'] + lines[3:],
     "pair_times_s at size 1"),
])
def test_damaged_files_are_refused_with_file_and_line(tmp_path, mangle, expected):
    path = complete(tmp_path, "libA", "1N2P", 0, {1: [1e-06], 8: [3e-6]})
    path.write_text("\n".join(mangle(path.read_text().splitlines())) + "\n")
    with pytest.raises(RawFileError, match=expected) as info:
        read_raw(path)
    assert str(info.value).startswith(str(path))


def test_dataset_has_the_contract_dims_and_marks_failed_and_refused_cells(tmp_path):
    files = []
    for lib in ("libA", "libB"):
        for placement, base in (("1N2P", 1e-6), ("2N1P", 5e-6)):
            for launch in (0, 1):
                samples = {1: [base, base * 1.1, base * 0.9], 8: [base * 2]}
                files.append(complete(tmp_path, lib, placement, launch, samples))
    # libB 2N1P launch 1 failed; libA 2N1P launch 1 was cut short.
    files[-1] = write_raw(files[-1], [launch_record("libB", "2N1P", 1, status="timeout")])
    truncated = files[3]
    truncated.write_text("\n".join(truncated.read_text().splitlines()[:-1]) + "\n")

    results, refused = read_all(files, on_error="record")
    assert [str(e.path) for e in refused] == [str(truncated)]
    ds = build_dataset(campaign(), results, LIBRARIES, BUILDS, refused)

    # Samples are ragged: exactly the samples taken, with per-point counts, starts and statistics.
    assert ds["time"].dims == ("sample",) and ds["sample_count"].dims == POINT_DIMS
    assert {k: v for k, v in ds.sizes.items() if k in POINT_DIMS} == {
        "library": 2, "placement": 2, "kernel": 2, "size": 2, "launch": 2}
    assert ds.sizes["sample"] == int(ds["sample_count"].sum()) == 6 * 4   # 6 ok launches x (3 + 1) samples
    assert (ds["status"].sel(kernel="memcpy", placement="2N1P") == "skipped").all()
    assert (ds["status"].sel(kernel="memcpy", placement="1N2P") == "missing").all()
    assert list(ds["mtu"].values) == [0, 1500] and ds["network_rate"].sel(placement="2N1P").item() == 1e9
    assert list(ds["size"].values) == [1, 8]
    assert ds["status"].sel(library="libB", placement="2N1P", kernel="pingpong.send", launch=1).item() == "timeout"
    assert ds["status"].sel(library="libA", placement="2N1P", kernel="pingpong.send", launch=1).item() == "refused"
    assert (ds["status"] == "ok").sum().item() == 6
    assert (ds["status"].sel(kernel="pingpong.send") == "ok").sum().item() == 6
    # Refused and failed cells carry no samples at all; others keep every sample, with their statistics.
    assert (ds["sample_count"].sel(library="libA", placement="2N1P", launch=1) == 0).all()
    assert ds["median"].sel(library="libA", placement="2N1P", launch=1).isnull().all()
    point = dict(library="libA", placement="1N2P", kernel="pingpong.send", launch=0)
    assert np.allclose(ds.commlens.samples(**point, size=1).values, [1e-6, 1.1e-6, 0.9e-6])
    assert ds.commlens.samples(**point, size=8).values.tolist() == [2e-6]
    assert ds["median"].sel(**point, size=1).item() == pytest.approx(1e-6)
    assert ds["mean"].sel(**point, size=1).item() == pytest.approx(1e-6)
    assert ds["min"].sel(**point, size=1).item() == pytest.approx(0.9e-6)
    assert ds["quantiles"].sel(**point, size=1, quantile=0.5).item() == pytest.approx(1e-6)
    positions = ds["position"].sel(library="libA", placement="1N2P", launch=0, kernel="pingpong.send")
    assert positions.values.tolist() == [0, 1]
    positions = ds["position"].sel(library="libB", placement="2N1P", kernel="pingpong.send", launch=1)
    assert positions.values.tolist() == [-1, -1]
    assert list(ds["transport"].values) == ["shm", "tcp"] and list(ds["emulated"].values) == [False, True]
    assert list(ds["family"].values) == ["mpich", "openmpi"]
    assert ds["library_version"].sel(library="libA").item() == "libA version 1.0"
    assert ds.attrs["campaign"] == "unit" and len(ds.attrs["config_hash"]) == 64
    for key in ("kernel_source_hash", "git_commit", "cpu_model", "os", "hosts", "compiler_flags", "created"):
        assert ds.attrs[key], key

    path = tmp_path / "unit.nc"
    write_dataset(ds, path)
    back = open_campaign(path)
    assert np.array_equal(back["time"].values, ds["time"].values)      # every sample, in its place
    assert np.allclose(back.commlens.samples(**point, size=1).values, [1e-6, 1.1e-6, 0.9e-6])
    # A selection keeps each point's samples (starts are stored, not re-derived from counts).
    assert back.sel(library=["libB"]).commlens.samples(
        library="libB", placement="1N2P", kernel="pingpong.send", launch=0, size=8).values.tolist() == [2e-6]
    assert back["status"].sel(library="libB", placement="2N1P", kernel="pingpong.send", launch=1).item() == "timeout"
    summary = back.commlens.summary()
    median = summary["median"].sel(library="libA", placement="1N2P", kernel="pingpong.send", size=1)
    assert median.item() == pytest.approx(1e-6)
    failed = back.commlens.failed_runs()
    assert sorted(failed["status"]) == ["missing"] * 4 + ["refused", "timeout"]


def test_samples_the_harness_left_out_reach_the_dataset_and_methods(tmp_path):
    """A point whose samples started again after a slowed calibration says how many it left out, in the
    dataset and in Methods; a launch that recorded none reads 0, a cell without data NaN."""
    files = [complete(tmp_path, lib, "1N2P", launch, {1: [1e-6, 1.1e-6], 8: [2e-6]})
             for lib in ("libA", "libB") for launch in (0, 1)]
    lines = files[0].read_text().splitlines()
    files[0].write_text("\n".join(lines[:2] + [lines[2][:-1] + ', "short_samples_dropped": 4}'] + lines[3:]) + "\n")
    results, _ = read_all(files, on_error="record")
    ds = build_dataset(campaign(), results, LIBRARIES, BUILDS, [])
    dropped = ds["short_samples_dropped"].sel(kernel="pingpong.send", placement="1N2P")
    assert dropped.sel(library="libA", launch=0, size=1).item() == 4
    assert int((dropped == 0).sum()) == 7 and ds["short_samples_dropped"].sel(placement="2N1P").isnull().all()
    text = methods_markdown(ds)
    assert ("The samples of 1 measured point started again after one lasted less than half the calibrated length"
            in text and "the harness left out the 4 samples so taken" in text), text
    unslowed = build_dataset(campaign(), results[1:], LIBRARIES, BUILDS, [])
    assert "No sample was left out: no point's samples started again." in methods_markdown(unslowed)
    # A dataset from before the variable existed says nothing of it.
    assert "left out" not in methods_markdown(ds.drop_vars("short_samples_dropped"))


def test_strict_collection_raises_on_the_first_refused_file(tmp_path):
    path = write_raw(tmp_path / "x.jsonl", [launch_record("libA", "1N2P", 0), run_record("libA")])
    with pytest.raises(RawFileError, match="no end record"):
        read_all([path])


def _campaign_files(tmp_path, rng):
    """Raw files of the unit campaign in its order, with different sample counts per point."""
    files = []
    for lib in ("libA", "libB"):
        for placement in ("1N2P", "2N1P"):
            for launch in (0, 1):
                samples = {size: list(rng.uniform(1e-6, 2e-6, rng.integers(1, 40))) for size in (8, 1)}
                files.append(complete(tmp_path, lib, placement, launch, samples))
    return files


def test_streamed_collection_equals_collection_in_memory(tmp_path):
    files = _campaign_files(tmp_path, np.random.default_rng(3))
    in_memory = build_dataset(campaign(), read_all(files)[0], LIBRARIES, BUILDS)
    refused = []
    results, seen = stream_raw(files, refused)
    streamed = build_dataset(campaign(), results, LIBRARIES, BUILDS, refused, samples_file=tmp_path / "s.tmp")
    assert len(seen) == len(files) and not refused and all(not r.points for r in seen)
    assert isinstance(streamed["time"].data, np.memmap)
    path = tmp_path / "streamed.nc"
    write_dataset(streamed, path)
    back = open_campaign(path)
    np.testing.assert_array_equal(back["time"].values, in_memory["time"].values)
    for name in ("sample_count", "sample_start", "median", "mean", "min", "quantiles", "median_ci", "position"):
        np.testing.assert_array_equal(back[name].values, in_memory[name].values, err_msg=name)
    # Each point's samples in the order they were measured, whatever the raw file's order of sizes.
    first = read_raw(files[0])
    for point in first.points:
        np.testing.assert_array_equal(back.commlens.samples(library="libA", placement="1N2P", kernel="pingpong.send",
                                                             launch=0, size=point.size).values, point.samples)


def test_streaming_refuses_launches_out_of_the_campaigns_order(tmp_path):
    files = _campaign_files(tmp_path, np.random.default_rng(4))
    results, _ = stream_raw(list(reversed(files)), [])
    with pytest.raises(ValueError, match="in the campaign's order"):
        build_dataset(campaign(), results, LIBRARIES, BUILDS, samples_file=tmp_path / "s.tmp")


def test_a_dataset_in_the_older_dense_layout_is_converted_when_opened(tmp_path):
    rng = np.random.default_rng(5)
    cube = rng.uniform(1e-6, 2e-6, (2, 1, 1, 3, 2, 6))
    cube[0, 0, 0, 1, 1, 2:] = np.nan                     # a point with 2 samples
    cube[1, 0, 0, 2, 0, :] = np.nan                      # a point never measured
    dense = xr.Dataset({"time": (POINT_DIMS + ("sample",), cube, {"units": "s"}),
                        "status": (("library", "placement", "kernel", "launch"), np.full((2, 1, 1, 2), "ok"))},
                       coords={"library": ["a", "b"], "placement": ["1N2P"], "kernel": ["pingpong.send"],
                               "size": [1, 8, 64], "launch": [0, 1], "sample": np.arange(6)},
                       attrs={"commlens_version": "0.1.0"})
    dense.to_netcdf(tmp_path / "old.nc")
    ds = open_campaign(tmp_path / "old.nc")
    assert ds["time"].dims == ("sample",) and ds.sizes["sample"] == int(np.isfinite(cube).sum())
    assert ds["sample_count"].sel(library="a", size=8, launch=1).item() == 2
    assert ds["sample_count"].sel(library="b", size=64, launch=0).item() == 0
    expected = np.full(cube.shape[:-1], np.nan)
    measured = np.isfinite(cube).any(axis=-1)
    expected[measured] = np.nanmedian(cube[measured], axis=-1)
    np.testing.assert_allclose(ds["median"].values, expected, equal_nan=True)
    np.testing.assert_array_equal(ds.commlens.samples(library="a", placement="1N2P", kernel="pingpong.send",
                                                       size=8, launch=1).values, cube[0, 0, 0, 1, 1, :2])
    # A file that is commlens's but holds samples in no known layout is refused, saying so.
    dense.rename(sample="repetition").to_netcdf(tmp_path / "odd.nc")
    with pytest.raises(ValueError, match="odd.nc: a commlens dataset without samples in a known layout"):
        open_campaign(tmp_path / "odd.nc")


def test_pair_times_land_in_their_own_variable_as_each_pairs_median_and_round_trip_through_netcdf(tmp_path):
    """A kernel that times every pair writes a matrix per sample; the dataset keeps each pair's median
    on (source_rank, destination_rank), only for the kernels that timed pairs."""
    files = []
    for launch in (0, 1):
        samples = {1: [1e-6, 2e-6, 3e-6], 8: [4e-6]}
        path = complete(tmp_path, "libA", "2N1P", launch, samples)
        lines = path.read_text().splitlines()
        # Two ranks: source x destination, row after row; null where a rank would time itself.
        matrices = {1: [[None, 1e-6 * (launch + 1), 5e-6, None], [None, 3e-6 * (launch + 1), 7e-6, None],
                        [None, 2e-6 * (launch + 1), 6e-6, None]], 8: [[None, 9e-6, 8e-6, None]]}
        for number, line in enumerate(lines):
            record = json.loads(line)
            if record["record"] == "point":
                record["pair_times_s"] = matrices[record["size"]]
                lines[number] = json.dumps(record)
        path.write_text("\n".join(lines) + "\n")
        files.append(path)
    files.append(complete(tmp_path, "libB", "2N1P", 0, {1: [1e-6], 8: [2e-6]}))   # no pair times
    point = read_raw(files[0]).points[0]
    assert point.pair_times_s.shape == (3, 2, 2) and np.isnan(point.pair_times_s[:, 0, 0]).all()

    results, refused = read_all(files, on_error="record")
    ds = build_dataset(campaign(), results, LIBRARIES, BUILDS, refused)
    assert ds["pair_time"].dims == ("library", "placement", "pair_kernel", "size", "launch", "source_rank",
                                    "destination_rank")
    assert list(ds["pair_kernel"].values) == ["pingpong.send"]
    cell = ds["pair_time"].sel(library="libA", placement="2N1P", pair_kernel="pingpong.send", size=1)
    assert cell.sel(launch=0).values[0, 1] == pytest.approx(2e-6)     # the median of 1, 3 and 2 us
    assert cell.sel(launch=1).values[0, 1] == pytest.approx(4e-6)
    assert cell.sel(launch=0).values[1, 0] == pytest.approx(6e-6)
    assert np.isnan(cell.sel(launch=0).values[0, 0])
    assert np.isnan(ds["pair_time"].sel(library="libB")).all()
    write_dataset(ds, tmp_path / "c.nc")
    reopened = open_campaign(tmp_path / "c.nc")
    np.testing.assert_array_equal(reopened["pair_time"].values, ds["pair_time"].values)
