"""A campaign dataset follows the CF conventions and ACDD on disk (commlens.io.conventions), checked by
the IOOS compliance checker (CF-1.10, ACDD-1.3), by cfchecker and by reading the file with netCDF4
alone, and reads back through open_campaign exactly as it was built; datasets written before still open."""

import getpass
import io
import json
import socket
import warnings
from contextlib import redirect_stdout
from datetime import datetime, UTC
from pathlib import Path

import netCDF4
import numpy as np
import pytest
from cf_units import Unit
from compliance_checker.runner import CheckSuite

from commlens import DatasetError, open_campaign
from commlens.campaign import Campaign
from commlens.data.collect import build_dataset, read_all
from commlens.io.conventions import CONVENTIONS, STATUSES, TIME_ENCODING, license_of_commlens, machine_independent
from commlens.io.netcdf import write_dataset
from commlens.io.raw import LAUNCH_STATUSES, read_raw
from test_collect import BUILDS, LIBRARIES, campaign, complete, launch_record, write_raw

# What the checkers find that we knowingly fail, and why. Anything else they find fails the test, and so
# does a check that crashes (the compliance checker reports its exceptions beside its results).
# The compliance checker's CF-1.10 checks: none.
# Its ACDD-1.3 checks: a `standard_name` on every data variable, and the attributes below.
NO_STANDARD_NAME = ("CF's standard name table names no benchmark quantity (a message's time, a statistic of it, "
                    "how a launch ran); a name made up is not CF (only `started` has one: time)")
ACDD_LEFT_OUT = {
    "a benchmark has no place on Earth": (
        "geospatial_bounds", "geospatial_bounds_crs", "geospatial_bounds_vertical_crs", "geospatial_lat_min",
        "geospatial_lat_max", "geospatial_lat_units", "geospatial_lat_resolution", "geospatial_lon_min",
        "geospatial_lon_max", "geospatial_lon_units", "geospatial_lon_resolution", "geospatial_vertical_min",
        "geospatial_vertical_max", "geospatial_vertical_units", "geospatial_vertical_resolution",
        "geospatial_vertical_positive", "geospatial_lat_extents_match", "geospatial_lon_extents_match"),
    "launches record when they started, not when they ended, and a sample has no time of its own": (
        "time_coverage_end", "time_coverage_duration", "time_coverage_resolution"),
    "only the creator's name is known (the campaign file's `creator`, else the login name)": (
        "creator_url", "creator_email", "creator_type", "creator_institution", "contributor_name",
        "contributor_role"),
    "no authority names, publishes or funds a campaign, and its file says of none": (
        "naming_authority", "publisher_name", "publisher_url", "publisher_email", "publisher_type",
        "publisher_institution", "program", "project", "acknowledgment/acknowledgement"),
    "no vocabulary fits: the keywords are plain words, an MPI library on a host is on no list of platforms or "
    "instruments, and the one standard name (`started`: time) is in every version of CF's table": (
        "keywords_vocabulary", "standard_name_vocabulary", "platform", "platform_vocabulary", "instrument",
        "instrument_vocabulary"),
    "a dataset keeps one date, its collection's (date_created); it is not issued, and a merge that rewrites it "
    "keeps that date and adds to `appended`": (
        "date_issued", "date_modified", "date_metadata_modified", "product_version"),
    "nothing true to add to the title, summary and history": ("comment", "references", "metadata_link"),
}
ACDD_OMITTED = {name: why for why, names in ACDD_LEFT_OUT.items() for name in names}
# cfchecker's errors and warnings (its INFO lines are notes, not findings).
CFCHECKER_KNOWN = {
    "(2.6.1): This netCDF file does not appear to contain CF Convention data.":
        "cfchecker 4.1.0, its newest release, knows CF up to 1.8: it runs its CF-1.8 checks on the file, but "
        "takes the CF-1.10 the file declares for no CF at all",
}


def failed(result) -> bool:
    return result.value[0] < result.value[1] if isinstance(result.value, tuple) else not result.value


def compliance_findings(path) -> dict[str, list[str]]:
    """Per standard (cf:1.10, acdd:1.3), what the compliance checker finds that is not known above; a
    check that crashes fails the test here, naming it."""
    suite = CheckSuite()
    with warnings.catch_warnings():          # the checker announces deprecations of its own interfaces
        warnings.simplefilter("ignore", DeprecationWarning)
        suite.load_all_available_checkers()
        dataset = suite.load_dataset(str(path))
        runs = suite.run_all(dataset, ["cf:1.10", "acdd:1.3"], None, [])
    dataset.close()
    findings = {}
    for standard, (results, errors) in runs.items():
        assert not errors, f"the {standard} checker crashed: {({name: str(e) for name, (e, _) in errors.items()})}"
        findings[standard] = [f"{result.name}: {message}" for result in results if failed(result)
                              for message in result.msgs if not _known_acdd(result.name, message)]
    return findings


def _known_acdd(check: str, message: str) -> bool:
    if check.startswith('variable "') and message == "standard_name":
        return True                                          # NO_STANDARD_NAME
    if check == "Global Attributes" and message.endswith(" not present"):
        return message.removesuffix(" not present") in ACDD_OMITTED
    return check in ACDD_OMITTED or check.removesuffix("_is_iso") in ACDD_OMITTED


def cfchecker_findings(path, tmp_path) -> list[str]:
    """cfchecker's errors and warnings of the file that are not known above, against CF-1.8 (its newest),
    with the compliance checker's copy of the standard name table and empty area-type and region tables
    (the dataset uses neither; cfchecker would fetch all three from the web)."""
    try:
        from cfchecker.cfchecks import CFChecker, CFVersion
    except OSError as error:              # cfunits loads UDUNITS-2's C library when imported
        pytest.skip(f"cfchecker needs Debian's libudunits2-0 (make test installs it as root: envs/system.txt): "
                    f"{error}")
    import compliance_checker

    names = Path(compliance_checker.__file__).parent / "data" / "cf-standard-name-table.xml"
    (tmp_path / "area-types.xml").write_text("<area_type_table><version_number>0</version_number>"
                                             "<date>none</date></area_type_table>")
    (tmp_path / "regions.xml").write_text("<standardized_region_list><version_number>0</version_number>"
                                          "<date>none</date></standardized_region_list>")
    checker = CFChecker(cfStandardNamesXML=str(names), cfAreaTypesXML=str(tmp_path / "area-types.xml"),
                        cfRegionNamesXML=str(tmp_path / "regions.xml"), version=CFVersion((1, 8)), silent=True)
    with redirect_stdout(io.StringIO()):  # it prints a header however silent
        results = checker.checker(str(path))
    found = [message for category in ("FATAL", "ERROR", "WARN") for message in results["global"][category]]
    found += [f"{name}: {message}" for name, variable in results["variables"].items()
              for category in ("FATAL", "ERROR", "WARN") for message in variable[category]]
    return [message for message in found if message not in CFCHECKER_KNOWN]


def assert_cf_on_disk(path, campaign_name: str) -> None:
    """What CF and ACDD ask of a commlens dataset, read with netCDF4 alone (no commlens, no xarray)."""
    with netCDF4.Dataset(path) as nc:
        assert nc.getncattr("Conventions") == CONVENTIONS
        assert campaign_name in nc.getncattr("title")
        assert nc.getncattr("source").startswith("commlens ")
        stamp, _, what = nc.getncattr("history").partition(" ")
        assert datetime.fromisoformat(stamp) and "commlens" in what       # each line starts with its time
        assert nc.getncattr("date_created") == nc.getncattr("created") == stamp
        assert nc.getncattr("id").startswith(f"{campaign_name}-") and nc.getncattr("config_hash").startswith(
            nc.getncattr("id").removeprefix(f"{campaign_name}-"))
        assert nc.getncattr("license") == license_of_commlens() == "BSD-3-Clause"
        assert campaign_name in nc.getncattr("summary") and "MPI" in nc.getncattr("keywords")
        for name, variable in nc.variables.items():
            assert variable.getncattr("long_name"), f"{name} has no long_name"
            assert variable.dtype is not str, f"{name}: text as a variable-length string, not CF characters"
            if variable.dtype.kind == "S":
                assert "units" not in variable.ncattrs(), name                # labels, reasons: text has no units
                continue
            assert "units" in variable.ncattrs(), f"{name} has no units"
            Unit(variable.getncattr("units"))                             # UDUNITS reads it (raises if not)
            # CF: a coordinate variable (named as its dimension) is a number.
            assert variable.dimensions != (name,) or variable.dtype.kind in "iuf", name
        for label in ("library", "placement", "kernel", "bound"):
            assert label not in nc.variables and nc.variables[f"{label}_label"].dimensions[0] == label
        status = nc.variables["status"]
        assert status.dtype == np.int8
        assert status.getncattr("flag_meanings").split() == list(STATUSES)
        assert status.getncattr("flag_values").tolist() == list(range(len(STATUSES)))
        assert set(np.unique(status[:])) <= set(range(len(STATUSES)))
        settled = nc.variables["settled"]
        assert settled.getncattr("flag_values").tolist() == [0, 1]
        assert settled.getncattr("flag_meanings") == "not_settled settled"
        assert Unit(nc.variables["started"].getncattr("units")).is_time_reference()
        # The samples: a contiguous ragged array of time series (CF 9.3.3), one series per point.
        assert nc.getncattr("featureType") == "timeSeries"
        count = nc.variables["point_sample_count"]
        assert count.dimensions == ("point",) and count.dtype == np.int32
        assert count.getncattr("sample_dimension") == "sample"
        assert [v for v in nc.variables.values() if "cf_role" in v.ncattrs()] == [nc.variables["point_id"]]
        assert nc.variables["point_id"].getncattr("cf_role") == "timeseries_id"
        assert int(count[:].sum()) == nc.dimensions["sample"].size == nc.variables["time"].size
        assert "sample_order" not in count.ncattrs()                  # the point_<axis> coordinates say it


def samples_read_as_cf(path) -> dict[tuple, np.ndarray]:
    """Each point's samples, read as any CF reader reads a contiguous ragged array (netCDF4 alone): its
    instance's samples follow the samples of the instances before it, the point placed by its auxiliary
    coordinates (a text axis's label is its label variable's at the point's position)."""
    with netCDF4.Dataset(path) as nc:
        counts = nc.variables["point_sample_count"][:].astype(int)
        axes = []
        for dim in ("library", "placement", "kernel", "launch", "size"):
            values = nc.variables[f"point_{dim}"][:]
            axes.append(nc.variables[f"{dim}_label"][:][values] if f"{dim}_label" in nc.variables else values)
        time = nc.variables["time"][:]
        names = nc.variables["point_id"][:]
    starts = np.cumsum(counts) - counts
    found = {}
    for i in np.flatnonzero(counts):
        point = tuple(str(axis[i]) if axis.dtype.kind in "OUS" else int(axis[i]) for axis in axes)
        assert names[i] == "/".join(map(str, point)), names[i]             # named by what places it
        found[point] = np.asarray(time[starts[i]:starts[i] + counts[i]])
    return found


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


def test_a_collected_dataset_passes_the_cf_and_acdd_checkers(collected, tmp_path):
    ds, _ = collected
    path = tmp_path / "unit.nc"
    write_dataset(ds, path)
    assert_cf_on_disk(path, "unit")
    assert compliance_findings(path) == {"cf:1.10": [], "acdd:1.3": []}
    assert cfchecker_findings(path, tmp_path) == []


def test_a_written_dataset_reads_back_as_built(collected, tmp_path):
    ds, files = collected
    path = tmp_path / "unit.nc"
    write_dataset(ds, path)
    back = open_campaign(path)
    # The labels index their axes again, in the order written.
    for axis in ("library", "placement", "kernel", "bound"):
        assert back[axis].values.tolist() == ds[axis].values.tolist() and axis in back.indexes
    assert back["median"].sel(library="libB", placement="1N2P", kernel="pingpong.send", size=8, launch=0).item() \
        == ds["median"].sel(library="libB", placement="1N2P", kernel="pingpong.send", size=8, launch=0).item()
    for name in ("sample_count", "sample_start", "median", "quantiles", "median_ci", "settled", "position"):
        assert back[name].dims == ds[name].dims, name
        np.testing.assert_array_equal(back[name].values, ds[name].values, err_msg=name)
    np.testing.assert_array_equal(back["time"].values, ds["time"].values)
    assert back["sample_count"].attrs["sample_order"] == ds["sample_count"].attrs["sample_order"]
    assert back["status"].dtype.kind == "U" and set(np.unique(back["status"])) == {
        "ok", "timeout", "refused", "missing", "skipped"}
    np.testing.assert_array_equal(back["status"].values, ds["status"].values)
    assert back["started"].dtype == np.dtype("datetime64[ns]")
    np.testing.assert_array_equal(back["started"].values, ds["started"].values)
    # The times are the launches' own, in UTC; a launch that never started has none.
    first = datetime.fromisoformat(read_raw(files[0]).launch["started"]).astimezone(UTC)
    cell = dict(library="libA", placement="1N2P", kernel="pingpong.send", launch=0)
    assert back["started"].sel(**cell).values == np.datetime64(first.replace(tzinfo=None))
    assert np.isnat(back["started"].sel(library="libA", placement="1N2P", kernel="memcpy", launch=0).values)
    assert back.attrs["created"] == ds.attrs["created"] and back.attrs["first_launch"] == ds.attrs["first_launch"]
    # A CF reader, knowing nothing of commlens, finds each point's samples where commlens does.
    as_cf = samples_read_as_cf(path)
    assert len(as_cf) == int((ds["sample_count"] > 0).sum())
    for (library, placement, kernel, launch, size), samples in as_cf.items():
        np.testing.assert_array_equal(samples, back.commlens.samples(library=library, placement=placement,
                                                                     kernel=kernel, launch=launch, size=size).values)


def test_a_selection_is_written_with_its_own_samples(collected, tmp_path):
    """A selection keeps the whole dataset's `time` (its points' starts point into it): written, it holds
    its own points' samples, in order, and reads back as it was."""
    ds, _ = collected
    part = ds.sel(library=["libB"], size=[8])
    write_dataset(part, tmp_path / "part.nc")
    back = open_campaign(tmp_path / "part.nc")
    assert back.sizes["sample"] == int(part["sample_count"].sum()) < ds.sizes["sample"]
    for placement in ("1N2P", "2N1P"):
        cell = dict(library="libB", placement=placement, kernel="pingpong.send", size=8, launch=0)
        np.testing.assert_array_equal(back.commlens.samples(**cell).values, ds.commlens.samples(**cell).values)


@pytest.mark.parametrize("layout", ["text status and start times", "text coordinates and counts per point"])
def test_a_dataset_written_before_opens_as_before(collected, tmp_path, layout):
    """What collections wrote until now: status and start times as text, without CF attributes; then CF
    flags and times, with the labels as text coordinate variables and the counts over the point axes."""
    ds, _ = collected
    if layout == "text status and start times":
        older = ds.assign(started=ds["started"].dt.strftime("%Y-%m-%dT%H:%M:%S+00:00").fillna(""))
        older.attrs = {key: value for key, value in ds.attrs.items()
                       if key not in ("Conventions", "title", "source", "history")}
        encoding = {}
    else:
        codes = np.array([STATUSES.index(status) for status in ds["status"].values.ravel()],
                         dtype=np.int8).reshape(ds["status"].shape)
        older = ds.assign(status=(ds["status"].dims, codes, {"flag_values": np.arange(len(STATUSES), dtype=np.int8),
                                                             "flag_meanings": " ".join(STATUSES)}))
        older.attrs["Conventions"] = "CF-1.10"
        encoding = {"started": dict(TIME_ENCODING)}
    older.to_netcdf(tmp_path / "older.nc", encoding=encoding)
    with netCDF4.Dataset(tmp_path / "older.nc") as nc:
        assert nc.variables["library"].dtype is str and nc.variables["sample_count"].ndim == 5
    back = open_campaign(tmp_path / "older.nc")
    for name in ("status", "started", "sample_count", "sample_start", "median"):
        np.testing.assert_array_equal(back[name].values, ds[name].values, err_msg=name)
    cell = dict(library="libB", placement="1N2P", kernel="pingpong.send", size=1, launch=1)
    np.testing.assert_array_equal(back.commlens.samples(**cell).values, ds.commlens.samples(**cell).values)
    # Written again, it is in today's layout.
    write_dataset(back, tmp_path / "again.nc")
    assert_cf_on_disk(tmp_path / "again.nc", "unit")
    np.testing.assert_array_equal(open_campaign(tmp_path / "again.nc")["time"].values, ds["time"].values)


@pytest.mark.parametrize("variable, value, message", [
    ("point_library", 7, "point_library holds 7, which is not a position along library (0 to 1)"),
    ("point_size", 3, "point_size holds 3, which is not a size of the dataset (size: 1, 8)"),
])
def test_points_that_do_not_fit_the_axes_are_refused_naming_the_file(collected, tmp_path, variable, value, message):
    ds, _ = collected
    path = tmp_path / "odd.nc"
    write_dataset(ds, path)
    with netCDF4.Dataset(path, "a") as nc:
        nc.variables[variable][0] = value
    with pytest.raises(DatasetError) as refused:
        open_campaign(path)
    assert str(refused.value) == (f"{path}: a commlens dataset whose samples do not fit its axes ({message}); "
                                  f"recollect it from its raw files")


def test_a_status_outside_the_flags_is_refused_naming_it(collected, tmp_path):
    ds, _ = collected
    odd = ds.assign(status=ds["status"].where(ds["status"] != "timeout", "hung"))
    with pytest.raises(ValueError, match=r"odd.nc: launch status 'hung' is not one of ok, failed"):
        write_dataset(odd, tmp_path / "odd.nc")
    assert not (tmp_path / "odd.nc").exists()


def test_no_path_of_the_machine_in_the_attributes(tmp_path, monkeypatch):
    """Paths under the folder the campaign ran in are written relative to it, paths at home from ~, and
    the dataset says who made it and where (ACDD's creator_name and institution)."""
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "config" / "campaigns" / "unit.yaml"
    include = tmp_path / "build" / "envs" / "mpich-x" / "venv" / "include"
    builds = {name: build | {"compiler_command": f"cc -I{include} -L{Path.home()}/mpi/lib -Wl,-rpath -Wl,"
                                                 f"{include.parent}/lib -I/usr/include/mpich -lmpi"}
              for name, build in BUILDS.items()}
    raw = complete(tmp_path / "results" / "raw", "libA", "1N2P", 0, {1: [1e-6]})
    results, refused = read_all([raw], on_error="record")
    ds = build_dataset(Campaign(name="unit", source=str(source), config=campaign().config), results, LIBRARIES,
                       builds, refused)
    write_dataset(ds, tmp_path / "unit.nc")
    with netCDF4.Dataset(tmp_path / "unit.nc") as nc:
        attrs = {name: str(nc.getncattr(name)) for name in nc.ncattrs()}
    assert not [name for name, value in attrs.items() if str(tmp_path) in value or str(Path.home()) in value]
    assert attrs["campaign_file"] == "config/campaigns/unit.yaml"
    assert json.loads(attrs["compilers"])["mpich-x"] == ("cc -Ibuild/envs/mpich-x/venv/include -L~/mpi/lib -Wl,-rpath "
                                                         "-Wl,build/envs/mpich-x/venv/lib -I/usr/include/mpich -lmpi")
    assert (attrs["creator_name"], attrs["institution"]) == (getpass.getuser(), socket.gethostname())
    # A campaign file that names them is believed.
    named = Campaign(name="unit", source="unit.yaml",
                     config=campaign().config | {"creator": "HPC team", "institution": "A computing centre"})
    made = build_dataset(named, results, LIBRARIES, BUILDS, refused).attrs
    assert (made["creator_name"], made["institution"]) == ("HPC team", "A computing centre")


@pytest.mark.parametrize("text, expected", [
    ("/work/c/config/x.yaml", "config/x.yaml"),
    ("cc -I/work/c/build/include -L/work/c/lib", "cc -Ibuild/include -Llib"),
    ('{"a": "/work/c"}', '{"a": "."}'),
    ("/work/cc/x /x/work/c/y /usr/lib", "/work/cc/x /x/work/c/y /usr/lib"),     # not under it, or not a path's start
])
def test_paths_are_written_relative_to_the_folder_they_are_under(text, expected):
    assert machine_independent(text, [Path("/work/c")]) == expected


@pytest.mark.mpi
def test_a_campaign_collected_by_the_workflow_is_cf(workspace, tiny_campaign, tmp_path):
    path = workspace / "results" / "tiny" / "tiny.nc"
    assert_cf_on_disk(path, "tiny")
    assert compliance_findings(path) == {"cf:1.10": [], "acdd:1.3": []}
    assert cfchecker_findings(path, tmp_path) == []
    with netCDF4.Dataset(path) as nc:
        assert str(workspace) not in " ".join(str(nc.getncattr(name)) for name in nc.ncattrs())
    ds = open_campaign(path)
    assert (ds["status"] == "ok").all()
    # Every launch's start time is the one its raw file recorded.
    for raw in sorted((workspace / "results" / "tiny" / "raw").rglob("launch*.jsonl")):
        record = json.loads(raw.read_text().splitlines()[0])
        cell = {key: record[key] for key in ("library", "placement", "kernel", "launch")}
        started = datetime.fromisoformat(record["started"]).astimezone(UTC).replace(tzinfo=None)
        assert ds["started"].sel(**cell).values == np.datetime64(started), raw
