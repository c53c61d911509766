"""A campaign dataset follows the CF conventions on disk (commlens.io.conventions), checked by the IOOS
compliance checker and by reading the file with netCDF4 alone, and reads back through open_campaign
exactly as it was built; datasets written before still open."""

import json
import warnings
from datetime import datetime, timezone

import netCDF4
import numpy as np
import pytest
from cf_units import Unit
from compliance_checker.runner import CheckSuite

from commlens.data.collect import build_dataset, read_all
from commlens.io.netcdf import write_dataset
from commlens.io.conventions import CONVENTIONS, STATUSES
from commlens import open_campaign
from commlens.io.raw import LAUNCH_STATUSES, read_raw
from test_collect import BUILDS, LIBRARIES, campaign, complete, launch_record, write_raw

# The checker orders a coordinate by subtracting neighbours, which text coordinates (library,
# placement, kernel) do not allow: it reports that as its own exception, not as a finding.
CHECKER_CANNOT_ORDER_TEXT = "check_coordinate_variables_strict_monotonicity"


def cf_findings(path) -> list[str]:
    """Every CF-1.10 check of the compliance checker that the file fails, with its messages."""
    suite = CheckSuite()
    with warnings.catch_warnings():          # checkers of other standards announce their deprecation
        warnings.simplefilter("ignore", DeprecationWarning)
        suite.load_all_available_checkers()
    dataset = suite.load_dataset(str(path))
    results, errors = suite.run_all(dataset, ["cf:1.10"], None, [])["cf:1.10"]
    dataset.close()
    assert set(errors) <= {CHECKER_CANNOT_ORDER_TEXT}, errors
    return [f"{result.name}: {result.msgs}" for result in results
            if (result.value[0] < result.value[1] if isinstance(result.value, tuple) else not result.value)]


def assert_cf_on_disk(path, campaign_name: str) -> None:
    """What CF asks of a commlens dataset, read with netCDF4 alone (no commlens, no xarray)."""
    with netCDF4.Dataset(path) as nc:
        assert nc.getncattr("Conventions") == CONVENTIONS
        assert campaign_name in nc.getncattr("title")
        assert nc.getncattr("source").startswith("commlens ")
        stamp, _, what = nc.getncattr("history").partition(" ")
        assert datetime.fromisoformat(stamp) and "commlens" in what       # each line starts with its time
        for name, variable in nc.variables.items():
            if variable.dtype is str or variable.dtype.kind in "SU":
                continue                                                  # labels, reasons: text has no units
            assert "units" in variable.ncattrs(), f"{name} has no units"
            Unit(variable.getncattr("units"))                             # UDUNITS reads it (raises if not)
        status = nc.variables["status"]
        assert status.dtype == np.int8
        assert status.getncattr("flag_meanings").split() == list(STATUSES)
        assert status.getncattr("flag_values").tolist() == list(range(len(STATUSES)))
        assert set(np.unique(status[:])) <= set(range(len(STATUSES)))
        settled = nc.variables["settled"]
        assert settled.getncattr("flag_values").tolist() == [0, 1]
        assert settled.getncattr("flag_meanings") == "not_settled settled"
        assert Unit(nc.variables["started"].getncattr("units")).is_time_reference()


def test_every_status_a_raw_file_or_collecting_gives_has_a_flag():
    assert LAUNCH_STATUSES | {"refused", "missing", "skipped"} == set(STATUSES)


@pytest.fixture
def collected(tmp_path):
    """The unit campaign collected with every kind of cell: ok launches started at different
    times, a timed-out one, a refused (truncated) file, missing and skipped cells."""
    files = []
    for lib in ("libA", "libB"):
        for placement, base in (("1N2P", 1e-6), ("2N1P", 5e-6)):
            for launch in (0, 1):
                path = complete(tmp_path, lib, placement, launch, {1: [base, base * 1.1], 8: [base * 2]})
                lines = path.read_text().splitlines()
                record = json.loads(lines[0]) | {"started": f"2026-03-0{launch + 1}T1{len(files) % 10}:00:05+00:00"}
                path.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
                files.append(path)
    write_raw(files[-1], [launch_record("libB", "2N1P", 1, status="timeout")])
    files[3].write_text("\n".join(files[3].read_text().splitlines()[:-1]) + "\n")
    results, refused = read_all(files, on_error="record")
    return build_dataset(campaign(), results, LIBRARIES, BUILDS, refused), files


def test_a_written_dataset_is_cf_and_reads_back_as_built(collected, tmp_path):
    ds, files = collected
    path = tmp_path / "unit.nc"
    write_dataset(ds, path)
    assert_cf_on_disk(path, "unit")
    assert cf_findings(path) == []
    back = open_campaign(path)
    assert back["status"].dtype.kind == "U" and set(np.unique(back["status"])) == {
        "ok", "timeout", "refused", "missing", "skipped"}
    np.testing.assert_array_equal(back["status"].values, ds["status"].values)
    np.testing.assert_array_equal(back["settled"].values, ds["settled"].values)
    assert back["started"].dtype == np.dtype("datetime64[ns]")
    np.testing.assert_array_equal(back["started"].values, ds["started"].values)
    # The times are the launches' own, in UTC; a launch that never started has none.
    first = datetime.fromisoformat(read_raw(files[0]).launch["started"]).astimezone(timezone.utc)
    cell = dict(library="libA", placement="1N2P", kernel="pingpong.send", launch=0)
    assert back["started"].sel(**cell).values == np.datetime64(first.replace(tzinfo=None))
    assert np.isnat(back["started"].sel(library="libA", placement="1N2P", kernel="memcpy", launch=0).values)
    assert back.attrs["created"] == ds.attrs["created"] and back.attrs["first_launch"] == ds.attrs["first_launch"]


def test_a_dataset_written_before_cf_opens_as_before(collected, tmp_path):
    """Status and start times as text, no CF attributes: what collections wrote until now."""
    ds, _ = collected
    older = ds.assign(started=ds["started"].dt.strftime("%Y-%m-%dT%H:%M:%S+00:00").fillna(""))
    older.attrs = {key: value for key, value in ds.attrs.items()
                   if key not in ("Conventions", "title", "source", "history")}
    older.to_netcdf(tmp_path / "older.nc")
    with netCDF4.Dataset(tmp_path / "older.nc") as nc:
        assert nc.variables["status"].dtype is str and nc.variables["started"].dtype is str
    back = open_campaign(tmp_path / "older.nc")
    np.testing.assert_array_equal(back["status"].values, ds["status"].values)
    np.testing.assert_array_equal(back["started"].values, ds["started"].values)


def test_a_status_outside_the_flags_is_refused_naming_it(collected, tmp_path):
    ds, _ = collected
    odd = ds.assign(status=ds["status"].where(ds["status"] != "timeout", "hung"))
    with pytest.raises(ValueError, match=r"odd.nc: launch status 'hung' is not one of ok, failed"):
        write_dataset(odd, tmp_path / "odd.nc")
    assert not (tmp_path / "odd.nc").exists()


@pytest.mark.mpi
def test_a_campaign_collected_by_the_workflow_is_cf(workspace, tiny_campaign):
    path = workspace / "results" / "tiny" / "tiny.nc"
    assert_cf_on_disk(path, "tiny")
    assert cf_findings(path) == []
    ds = open_campaign(path)
    assert (ds["status"] == "ok").all()
    # Every launch's start time is the one its raw file recorded.
    for raw in sorted((workspace / "results" / "tiny" / "raw").rglob("launch*.jsonl")):
        record = json.loads(raw.read_text().splitlines()[0])
        cell = {key: record[key] for key in ("library", "placement", "kernel", "launch")}
        started = datetime.fromisoformat(record["started"]).astimezone(timezone.utc).replace(tzinfo=None)
        assert ds["started"].sel(**cell).values == np.datetime64(started), raw
