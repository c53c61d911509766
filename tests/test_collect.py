"""Raw files in, dataset out: what is merged, what is refused, and how cells are marked."""

import json

import numpy as np
import pytest

from commbench.campaign import validate_campaign, Campaign
from commbench.collect import build_dataset, read_all, write_dataset
from commbench.dataset import open_campaign
from commbench.raw import RawFileError, read_raw

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
    assert result.points[0].samples == [1e-6, 2e-6]


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

    assert ds["time"].dims == ("library", "placement", "kernel", "size", "launch", "sample")
    assert ds.sizes == {"library": 2, "placement": 2, "kernel": 2, "size": 2, "launch": 2, "sample": 3}
    assert (ds["status"].sel(kernel="memcpy", placement="2N1P") == "skipped").all()
    assert (ds["status"].sel(kernel="memcpy", placement="1N2P") == "missing").all()
    assert list(ds["mtu"].values) == [0, 1500] and ds["network_rate"].sel(placement="2N1P").item() == 1e9
    assert list(ds["size"].values) == [1, 8]
    assert ds["status"].sel(library="libB", placement="2N1P", kernel="pingpong.send", launch=1).item() == "timeout"
    assert ds["status"].sel(library="libA", placement="2N1P", kernel="pingpong.send", launch=1).item() == "refused"
    assert (ds["status"] == "ok").sum().item() == 6
    assert (ds["status"].sel(kernel="pingpong.send") == "ok").sum().item() == 6
    # Refused and failed cells carry no time at all; others keep every sample, NaN-padded.
    assert ds["time"].sel(library="libA", placement="2N1P", launch=1).isnull().all()
    cell = ds["time"].sel(library="libA", placement="1N2P", kernel="pingpong.send", launch=0)
    assert np.allclose(cell.sel(size=1).values, [1e-6, 1.1e-6, 0.9e-6])
    assert np.isnan(cell.sel(size=8).values[1:]).all()
    positions = ds["position"].sel(library="libA", placement="1N2P", launch=0, kernel="pingpong.send")
    assert positions.values.tolist() == [0, 1]
    assert ds["position"].sel(library="libB", placement="2N1P", kernel="pingpong.send", launch=1).values.tolist() == [-1, -1]
    assert list(ds["transport"].values) == ["shm", "tcp"] and list(ds["emulated"].values) == [False, True]
    assert list(ds["family"].values) == ["mpich", "openmpi"]
    assert ds["library_version"].sel(library="libA").item() == "libA version 1.0"
    assert ds.attrs["campaign"] == "unit" and len(ds.attrs["config_hash"]) == 64
    for key in ("kernel_source_hash", "git_commit", "cpu_model", "os", "hosts", "compiler_flags", "created"):
        assert ds.attrs[key], key

    path = tmp_path / "unit.nc"
    write_dataset(ds, path)
    back = open_campaign(path)
    assert back["status"].sel(library="libB", placement="2N1P", kernel="pingpong.send", launch=1).item() == "timeout"
    summary = back.commbench.summary()
    assert summary["median"].sel(library="libA", placement="1N2P", kernel="pingpong.send", size=1).item() == pytest.approx(1e-6)
    failed = back.commbench.failed_runs()
    assert sorted(failed["status"]) == ["missing"] * 4 + ["refused", "timeout"]


def test_strict_collection_raises_on_the_first_refused_file(tmp_path):
    path = write_raw(tmp_path / "x.jsonl", [launch_record("libA", "1N2P", 0), run_record("libA")])
    with pytest.raises(RawFileError, match="no end record"):
        read_all([path])
