"""`commlens export`: a dataset as a tidy table, one row per measured point and launch (and one per launch
that gave none, saying why), with the statistics of its samples and the report's bandwidth, and the
units, descriptions and provenance in the file (Parquet) or beside it (CSV); or as OSU's own output
files, one per curve."""

import json
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from commlens import cli, open_campaign
from commlens.data import synthetic as syn
from commlens.io.netcdf import write_dataset
from commlens.data.export import export, pairs_table, points_table
from commlens.report import ReportData
from commlens.data.imported import import_files
from commlens.interactive import append_to_campaign
from test_cf import collected  # noqa: F401  (the unit campaign collected, with every kind of launch)

OSU = Path(__file__).parent / "data" / "osu-7.4"
IMB = Path(__file__).parent / "data" / "imb" / "IMB-MPI1-mpich-5.0.2-np2.txt"
KEYS = ["library", "placement", "kernel", "size", "launch"]


def known_samples(seed: int = 3):
    """Two kernels, 3 launches of 7 to 40 heavy-tailed samples a point, some points unmeasured."""
    rng = np.random.default_rng(seed)
    sizes = np.array([1, 64, 4096, 65536])
    cubes = {}
    for kernel in ("pingpong.send", "stream.bi"):
        times = np.full((sizes.size, 3, 40), np.nan)
        for s, size in enumerate(sizes):
            for launch in range(3):
                n = rng.integers(7, 41)
                times[s, launch, :n] = (1e-6 + size / 5e9) * (1 + 0.1 * rng.standard_t(3, n) ** 2)
        times[2, 1] = np.nan                                # a point whose launch measured nothing
        cubes["lib", "1N2P", kernel] = (sizes, times)
    return cubes


def test_a_row_per_measured_point_with_the_statistics_of_its_samples():
    cubes = known_samples()
    table = points_table(syn.dataset_from_cubes(cubes))
    assert list(table.columns[:5]) == KEYS
    assert len(table) == 2 * (4 * 3 - 1)                    # every point but the unmeasured ones
    for (_, _, kernel), (sizes, times) in cubes.items():
        for s, size in enumerate(sizes):
            for launch in range(3):
                samples = times[s, launch][np.isfinite(times[s, launch])]
                rows = table[(table["kernel"] == kernel) & (table["size"] == size) & (table["launch"] == launch)]
                if not samples.size:
                    assert rows.empty
                    continue
                row = rows.iloc[0]
                assert row["count"] == samples.size
                np.testing.assert_allclose(row[["mean_s", "median_s", "min_s", "std_s"]].astype(float),
                                           [samples.mean(), np.median(samples), samples.min(), samples.std(ddof=1)])
                np.testing.assert_allclose(row[["p50_s", "p90_s", "p99_s"]].astype(float),
                                           np.quantile(samples, [0.5, 0.9, 0.99]))
                assert row["median_ci_low_s"] <= row["median_s"] <= row["median_ci_high_s"]
                factor = 2 if kernel == "stream.bi" else 1        # both directions count
                assert row["bandwidth_MBps"] == pytest.approx(factor * size / np.median(samples) / 1e6)


def test_the_bandwidth_is_the_reports():
    paths = [OSU / f"{name}-mpich-5.0.2-1N2P.txt" for name in ("osu_latency", "osu_bw", "osu_bibw", "osu_mbw_mr")]
    ds = import_files(paths, "osu", "mpich-5.0.2", "1N2P", partial=True)   # osu_mbw_mr stops at 1 MiB of its 4
    report = ReportData(ds, n_boot=20).points[["kernel", "size", "bandwidth_MBps"]]
    merged = points_table(ds).merge(report, on=["kernel", "size"], suffixes=("", "_report"))
    assert len(merged) == len(report) == 23 * 3 + 21
    np.testing.assert_allclose(merged["bandwidth_MBps"], merged["bandwidth_MBps_report"], rtol=1e-12)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_csv_and_parquet_hold_the_same_table(tmp_path, fmt):
    ds = import_files([OSU / "osu_latency-z-openmpi-5.0.11-1N2P.txt"], "osu", "openmpi-5.0.11", "1N2P")
    dataset = tmp_path / "osu.nc"
    write_dataset(ds, dataset, keep_previous=False)
    path = export(dataset, fmt)
    assert path == dataset.with_suffix(f".{fmt}")
    back = pd.read_csv(path) if fmt == "csv" else pd.read_parquet(path)
    expected = points_table(ds)
    assert list(back.columns) == list(expected.columns)
    pd.testing.assert_frame_equal(back[KEYS + ["p90_s", "bandwidth_MBps"]],
                                  expected[KEYS + ["p90_s", "bandwidth_MBps"]], check_dtype=False,
                                  check_categorical=False)   # a CSV has no categories


def test_the_format_follows_the_output_and_a_wrong_one_is_refused(tmp_path, capsys):
    ds = import_files([OSU / "osu_bw-openmpi-5.0.11-1N2P.txt"], "osu", "openmpi-5.0.11", "1N2P")
    dataset = tmp_path / "osu.nc"
    write_dataset(ds, dataset, keep_previous=False)
    assert cli.main(["export", str(dataset), "--output", str(tmp_path / "points.parquet")]) == 0
    assert len(pd.read_parquet(tmp_path / "points.parquet")) == 23
    with pytest.raises(ValueError, match="--format xlsx: allowed values: csv, parquet"):
        export(dataset, "xlsx")
    with pytest.raises(SystemExit):
        cli.main(["export", str(dataset), "--format", "xlsx"])
    assert "invalid choice: 'xlsx'" in capsys.readouterr().err


def test_pairs_are_a_row_per_timed_pair_with_each_ranks_node(tmp_path, capsys):
    """`--pairs`: every pair of ranks each launch timed (a fan-in times three of the twelve ordered pairs
    of four ranks), its node, its median time and size / time; a dataset without pair times is refused
    naming it, and nothing is written."""
    from test_report_pages import pair_campaign

    times = syn.pair_times(4, 3, time_s=8192 / 100e6, seed=2)      # (source, destination, launch)
    fan_in = np.full_like(times, np.nan)
    fan_in[1:, 0] = times[1:, 0]
    dataset = tmp_path / "pairs.nc"
    write_dataset(pair_campaign(fan_in, kernel="fan.in"), dataset, keep_previous=False)
    assert cli.main(["export", str(dataset), "--pairs"]) == 0
    csv = tmp_path / "pairs.pairs.csv"
    assert capsys.readouterr().out.strip() == f"table: {csv} (its columns and provenance: {csv}.json)"
    table = pd.read_csv(tmp_path / "pairs.pairs.csv")
    assert list(table.columns) == KEYS + ["source_rank", "destination_rank", "source_node", "destination_node",
                                          "time_s", "bandwidth_MBps"]
    assert len(table) == 3 * 3 and set(table["kernel"]) == {"fan.in"} and (table["destination_rank"] == 0).all()
    for row in table.itertuples():
        assert row.time_s == pytest.approx(times[row.source_rank, 0, row.launch], rel=1e-12)
        assert (row.source_node, row.destination_node) == (f"vnode{row.source_rank}", "vnode0")
        assert row.bandwidth_MBps == pytest.approx(8192 / row.time_s / 1e6, rel=1e-12)
    pd.testing.assert_frame_equal(table, pairs_table(pair_campaign(fan_in, kernel="fan.in")), check_dtype=False,
                                  check_categorical=False)

    plain = tmp_path / "plain.nc"
    write_dataset(import_files([OSU / "osu_bw-openmpi-5.0.11-1N2P.txt"], "osu", "openmpi-5.0.11", "1N2P"), plain,
                  keep_previous=False)
    assert cli.main(["export", str(plain), "--pairs"]) != 0
    assert f"{plain}: this dataset has no pair times" in capsys.readouterr().err
    assert not list(tmp_path.glob("plain.*.csv"))


def file_rows(path: Path) -> np.ndarray:
    """The numbers of an OSU output, read from its lines of numbers alone."""
    return np.array([[float(x) for x in line.split()] for line in path.read_text().splitlines()
                     if line[:1].isdigit()])


@pytest.fixture(scope="module")
def imported_rows():
    """Two imported rows of one dataset: OSU 7.4's osu_latency -z, and IMB-MPI1's seven benchmarks
    (t_min, t_avg, t_max) under a long row name, appended as a user brings old results in."""
    osu = import_files([OSU / "osu_latency-z-openmpi-5.0.11-1N2P.txt"], "osu", "openmpi-5.0.11", "1N2P",
                       kernel="pingpong.send")
    imb = import_files([IMB], "imb", "mpich-5.0.2", "1N2P")
    return append_to_campaign(osu, imb, library="mpich-5.0.2 (IMB-MPI1 2021.11, imported from an older run)")


def test_imported_rows_carry_what_their_files_reported(imported_rows, tmp_path):
    table = points_table(imported_rows)
    osu = table[table["library"] == "openmpi-5.0.11"].set_index("size")
    numbers = file_rows(OSU / "osu_latency-z-openmpi-5.0.11-1N2P.txt")
    for i, column in enumerate(["avg_latency", "p50_latency", "p90_latency", "p99_latency"], start=1):
        np.testing.assert_array_equal(osu.loc[numbers[:, 0].astype(int), f"reported_{column}_s"], numbers[:, i] * 1e-6)
    np.testing.assert_array_equal(osu["mean_s"], osu["reported_avg_latency_s"])     # the sample is OSU's Avg
    assert osu["suite_metric"].str.startswith("osu_latency: ").all() and not osu["partial"].any()
    assert osu[["reported_t_min_s", "reported_t_max_s"]].isna().all().all()          # OSU prints no t_min
    # IMB's three statistics of a collective beside commlens's one value per size (t_max).
    imb = table[table["library"].str.startswith("mpich-5.0.2 (IMB-MPI1")]
    allreduce = imb[imb["kernel"] == "coll.allreduce"]
    reported = imported_rows["reported"].sel(library=imb["library"].iloc[0], placement="1N2P",
                                             kernel="coll.allreduce", launch=0)
    for column in ("t_min_s", "t_avg_s", "t_max_s"):
        np.testing.assert_array_equal(allreduce[f"reported_{column}"],
                                      reported.sel(size=allreduce["size"].values, reported_column=column))
    assert (allreduce["reported_t_min_s"] <= allreduce["reported_t_max_s"]).all()
    np.testing.assert_array_equal(allreduce["mean_s"], allreduce["reported_t_max_s"])
    assert set(table["imported"]) == {True}
    # Written and read back: the same numbers, the same columns.
    dataset = tmp_path / "old.nc"
    write_dataset(imported_rows, dataset, keep_previous=False)
    back = pd.read_csv(export(dataset, "csv"))
    assert list(back.columns) == list(table.columns)
    np.testing.assert_array_equal(back["reported_p99_latency_s"], table["reported_p99_latency_s"])


def test_a_partial_import_is_marked_partial_in_its_rows(tmp_path):
    path = OSU / "osu_mbw_mr-openmpi-5.0.11-1N2P.txt"       # stops at 1 MiB of OSU's default 4 MiB
    table = points_table(import_files([path], "osu", "openmpi-5.0.11", "1N2P", partial=True))
    assert table["partial"].all() and len(table) == len(file_rows(path)) == 21
    np.testing.assert_array_equal(table["reported_message_rate_per_s"], file_rows(path)[:, 2])


def test_json_keeps_every_number_and_blanks_as_null(imported_rows, tmp_path, capsys):
    """Seconds of 0.1 us keep every digit (pandas' own JSON writer keeps ten decimal places)."""
    dataset = tmp_path / "old.nc"
    write_dataset(imported_rows, dataset, keep_previous=False)
    assert cli.main(["export", str(dataset), "--output", "-", "--format", "json"]) == 0
    printed = pd.DataFrame(json.loads(capsys.readouterr().out))
    expected = points_table(imported_rows)
    assert list(printed.columns) == list(expected.columns) and len(printed) == len(expected)
    for column in ("mean_s", "reported_avg_latency_s", "reported_t_avg_s", "bandwidth_MBps"):
        np.testing.assert_array_equal(printed[column].astype(float), expected[column])
    assert (expected["mean_s"] < 1e-6).any()
    assert printed["min_s"].isna().all() and printed["partial"].isin([False]).all()


@pytest.mark.mpi
def test_exporting_a_campaign_dataset(workspace, tiny_campaign, tmp_path, capsys):
    """The tiny campaign (the quick campaign's libraries, placements and kernel at five sizes)."""
    dataset = workspace / "results" / "tiny" / "tiny.nc"
    output = tmp_path / "tiny.csv"
    assert cli.main(["export", str(dataset), "--output", str(output)]) == 0
    table = pd.read_csv(output)
    ds = open_campaign(dataset)
    assert len(table) == int((ds["sample_count"] > 0).sum()) > 0
    assert set(table["launch"]) == {0, 1} and set(table["library"]) == {"mpich-5.0.2", "openmpi-5.0.11"}
    assert (table["count"] >= 5).all() and (table["p50_s"] <= table["p99_s"]).all()
    np.testing.assert_allclose(table["bandwidth_MBps"], table["size"] / table["median_s"] / 1e6)
    # One launch: a row's bandwidth is the report's for that point.
    first = ds.isel(launch=[0])
    report = ReportData(first, n_boot=20).points[["library", "placement", "size", "bandwidth_MBps"]]
    merged = table[table["launch"] == 0].merge(report, on=["library", "placement", "size"], suffixes=("", "_report"))
    assert len(merged) == len(report) > 0
    np.testing.assert_allclose(merged["bandwidth_MBps"], merged["bandwidth_MBps_report"], rtol=1e-9)
    # A campaign alone has no imported columns; with an import appended they are blank in its own rows.
    assert not {"suite_metric", "partial"} & set(table.columns)
    osu = import_files([OSU / "osu_latency-mpich-5.0.2-1N2P.txt"], "osu", "mpich-5.0.2", "1N2P")
    mixed = points_table(append_to_campaign(ds, osu, library="mpich-5.0.2 (OSU)"))
    measured = mixed[mixed["library"] != "mpich-5.0.2 (OSU)"]
    assert len(measured) == len(table) and len(mixed) == len(table) + 23
    assert measured[["suite_metric", "partial", "reported_avg_latency_s"]].isna().all().all()
    assert not mixed.loc[mixed["library"] == "mpich-5.0.2 (OSU)", "partial"].any()
    # The Parquet file alone says where its numbers come from, to DuckDB too.
    import duckdb

    parquet = export(dataset, "parquet", tmp_path / "tiny.parquet")
    metadata = dict(duckdb.sql(f"select decode(key), decode(value) from parquet_kv_metadata('{parquet}')").fetchall())
    provenance = json.loads(metadata["provenance"])
    assert (provenance["campaign"], provenance["git_commit"]) == ("tiny", ds.attrs["git_commit"])
    assert str(workspace) not in metadata["provenance"]
    # OSU's own files, one per curve, read back by import-osu (the campaign ran five of OSU's sizes: --partial).
    folder = export(dataset, "osu", tmp_path / "osu")
    files = sorted(folder.glob("osu_latency-*.txt"))
    assert [path.name for path in files] == [f"osu_latency-{library}-{placement}.txt" for library in
                                             ("mpich-5.0.2", "openmpi-5.0.11") for placement in ("1N2P", "2N1P")]
    assert cli.main(["import-osu", str(files[0]), "--library", "mpich-5.0.2", "--placement", "1N2P", "--partial",
                     "--output", str(tmp_path / "back.nc")]) == 0
    np.testing.assert_array_equal(open_campaign(tmp_path / "back.nc")["size"].values, [1, 8, 1024, 65536, 1048576])


# ----------------------------------------------------------------------------- exports that keep meaning


@pytest.fixture
def collected_file(collected, tmp_path) -> Path:   # noqa: F811  (the fixture imported from test_cf)
    path = tmp_path / "unit.nc"
    write_dataset(collected[0], path)
    return path


def test_a_launch_without_samples_is_a_row_saying_why(collected_file):
    """A launch that timed out or whose file was refused, and one never run (missing), each a row of its own
    without a size; a kernel a placement does not run (skipped) is none."""
    ds = open_campaign(collected_file)
    table = points_table(ds)
    silent = table[table["size"].isna()].set_index(["library", "placement", "kernel", "launch"])
    assert set(silent["status"]) == {"timeout", "refused", "missing"} and (silent["count"] == 0).all()
    assert silent.loc[("libB", "2N1P", "pingpong.send", 1), "status"] == "timeout"
    refused = silent[silent["status"] == "refused"]
    assert len(refused) == 1 and "no end record" in refused["reason"].iloc[0]
    assert set(silent[silent["status"] == "missing"].index.get_level_values("kernel")) == {"memcpy"}
    assert not (table["status"] == "skipped").any()
    measured = table[table["size"].notna()]
    assert len(measured) == int((ds["sample_count"] > 0).sum()) and (measured["status"] == "ok").all()
    # Labels are categories in the dataset's order, whatever rows there are.
    for label in ("library", "placement", "kernel"):
        assert list(table[label].cat.categories) == ds[label].values.tolist()


def test_parquet_says_its_units_and_provenance_to_pandas_and_duckdb(collected_file, tmp_path):
    import duckdb
    import pyarrow.parquet as pq

    ds = open_campaign(collected_file)
    path = export(collected_file, "parquet", tmp_path / "points.parquet")
    # pandas: the table, its labels as categories, a row for each launch without samples.
    table = pd.read_parquet(path)
    pd.testing.assert_frame_equal(table, points_table(ds), check_dtype=False)
    assert isinstance(table["library"].dtype, pd.CategoricalDtype)
    # The file alone says what each column is and where the numbers come from.
    schema = pq.read_schema(path)
    units = {field.name: field.metadata.get(b"units", b"").decode() for field in schema}
    assert (units["median_s"], units["size"], units["bandwidth_MBps"], units["count"], units["library"]) \
        == ("s", "bytes", "MB/s", "1", "")
    assert schema.field("median_s").metadata[b"description"].decode() == ds["median"].attrs["long_name"]
    provenance = json.loads(schema.metadata[b"provenance"])
    for key in ("campaign", "git_commit", "config_hash", "commlens_version", "compilers"):
        assert provenance[key] == str(ds.attrs[key]), key
    # DuckDB reads the rows and the same metadata.
    rows = duckdb.sql(f"select status, count(*) from read_parquet('{path}') group by status order by status").fetchall()
    assert dict(rows) == table["status"].value_counts().to_dict()
    metadata = dict(duckdb.sql(f"select decode(key), decode(value) from parquet_kv_metadata('{path}')").fetchall())
    assert json.loads(metadata["provenance"]) == provenance
    assert json.loads(metadata["columns"])["median_s"] == {"units": "s", "description": ds["median"].attrs["long_name"]}


def test_csv_has_a_sidecar_with_its_columns_and_provenance(collected_file, tmp_path, capsys):
    output = tmp_path / "points.csv"
    assert cli.main(["export", str(collected_file), "--output", str(output)]) == 0
    assert capsys.readouterr().out.strip() == f"table: {output} (its columns and provenance: {output}.json)"
    described = json.loads(Path(f"{output}.json").read_text())
    assert list(described["columns"]) == list(pd.read_csv(output).columns)
    assert described["columns"]["p99_s"] == {"units": "s", "description": "the 0.99 quantile of the point's samples"}
    assert described["provenance"]["campaign"] == "unit" and described["provenance"]["dataset"] == "unit.nc"


OSU_PAIRS = [("osu_latency-mpich-5.0.2-1N2P.txt", "pingpong.send"), ("osu_bw-openmpi-5.0.11-1N2P.txt", "stream.uni")]


@pytest.mark.parametrize("name, kernel", OSU_PAIRS)
def test_osu_files_are_osus_own(tmp_path, capsys, name, kernel):
    """A curve imported from OSU 7.4's output and written back as OSU's: OSU's lines but the datatype's (the
    kernels send bytes), its numbers as OSU printed them; `import-osu` and awk read them back."""
    original = OSU / name
    library = name.split("-", 1)[1].rsplit("-", 1)[0]
    dataset = tmp_path / "osu.nc"
    write_dataset(import_files([original], "osu", library, "1N2P"), dataset, keep_previous=False)
    assert cli.main(["export", str(dataset), "--format", "osu", "--output", str(tmp_path / "osu")]) == 0
    assert capsys.readouterr().out.strip() == (f"OSU files: {tmp_path / 'osu'} (what each holds: "
                                               f"{tmp_path / 'osu' / 'commlens-osu.json'})")
    written = tmp_path / "osu" / name
    lines, theirs = written.read_text().splitlines(), original.read_text().splitlines()
    assert lines[2] == "# Datatype: MPI_BYTE." and theirs[2] == "# Datatype: MPI_CHAR."
    assert lines[:2] + lines[3:] == theirs[:2] + theirs[3:]
    # awk on OSU's columns, and commlens's own importer, read the numbers OSU printed.
    awk = subprocess.run(["awk", "!/^#/ && NF {print $2}", str(written)], capture_output=True, text=True, check=True)
    np.testing.assert_array_equal(np.array(awk.stdout.split(), dtype=float), file_rows(original)[:, 1])
    assert cli.main(["import-osu", str(written), "--library", library, "--placement", "1N2P",
                     "--output", str(tmp_path / "back.nc")]) == 0
    back, first = open_campaign(tmp_path / "back.nc"), open_campaign(dataset)
    np.testing.assert_allclose(back["time"].values, first["time"].values, rtol=1e-12)
    index = json.loads((tmp_path / "osu" / "commlens-osu.json").read_text())
    assert index["files"][name] == {"library": library, "placement": "1N2P", "kernel": kernel,
                                    "benchmark": name.split("-")[0], "column": lines[3][6:].strip()}


def test_osu_files_hold_the_mean_over_every_iteration_of_every_launch(collected_file, tmp_path):
    """A campaign's curve: OSU's average, each launch's mean weighted by the iterations it timed."""
    ds = open_campaign(collected_file)
    folder = export(collected_file, "osu")
    assert folder == tmp_path / "unit-osu"
    assert sorted(path.name for path in folder.glob("*.txt")) == [
        f"osu_latency-{library}-{placement}.txt" for library in ("libA", "libB") for placement in ("1N2P", "2N1P")]
    cell = dict(library="libA", placement="2N1P", kernel="pingpong.send")
    weight = ds["sample_count"].sel(cell) * ds["iters_per_sample"].sel(cell)
    expected = (ds["mean"].sel(cell).fillna(0) * weight).sum("launch") / weight.sum("launch") / 1e-6
    awk = subprocess.run(["awk", "!/^#/ && NF {print $1, $2}", str(folder / "osu_latency-libA-2N1P.txt")],
                         capture_output=True, text=True, check=True)
    rows = np.array(awk.stdout.split(), dtype=float).reshape(-1, 2)
    np.testing.assert_array_equal(rows[:, 0], ds["size"].values)
    np.testing.assert_allclose(rows[:, 1], expected.values, atol=0.005)
    index = json.loads((folder / "commlens-osu.json").read_text())
    assert index["left_out"] == []          # memcpy never ran: no curve to leave out
    assert "iterations" in index["statistic"] and index["provenance"]["campaign"] == "unit"


def test_a_curve_osu_prints_no_such_file_of_is_left_out_saying_why(tmp_path, capsys):
    ds = import_files([IMB], "imb", "mpich-5.0.2", "1N2P")       # seven benchmarks, three of them OSU's too
    folder = export(ds, "osu", tmp_path / "imb")
    assert sorted(path.name for path in folder.glob("*.txt")) == [
        f"osu_{name}-mpich-5.0.2-1N2P.txt" for name in ("allreduce", "alltoall", "bcast", "latency")]
    left_out = json.loads((folder / "commlens-osu.json").read_text())["left_out"]
    assert left_out[0] == "mpich-5.0.2 1N2P exchange.sendrecv: no OSU benchmark measures what exchange.sendrecv does"
    assert len(left_out) == 3
    dataset = tmp_path / "pingping.nc"
    write_dataset(ds.sel(kernel=["pingping"]), dataset, keep_previous=False)
    assert cli.main(["export", str(dataset), "--format", "osu"]) != 0
    assert f"commlens export: {dataset}: no curve has an OSU counterpart written here" in capsys.readouterr().err
    assert not (tmp_path / "pingping-osu").exists()
