"""`commlens export`: a dataset as a tidy table, one row per measured point and launch, with the
statistics of its samples and the report's bandwidth."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from commlens import cli
from commlens.data import synthetic as syn
from commlens.io.netcdf import write_dataset
from commlens.data.export import export, pairs_table, points_table
from commlens.report import ReportData
from commlens.data.imported import import_files
from commlens.interactive import append_to_campaign

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
                                  expected[KEYS + ["p90_s", "bandwidth_MBps"]], check_dtype=False)


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
    assert capsys.readouterr().out.strip() == f"table: {tmp_path / 'pairs.pairs.csv'}"
    table = pd.read_csv(tmp_path / "pairs.pairs.csv")
    assert list(table.columns) == KEYS + ["source_rank", "destination_rank", "source_node", "destination_node",
                                          "time_s", "bandwidth_MBps"]
    assert len(table) == 3 * 3 and set(table["kernel"]) == {"fan.in"} and (table["destination_rank"] == 0).all()
    for row in table.itertuples():
        assert row.time_s == pytest.approx(times[row.source_rank, 0, row.launch], rel=1e-12)
        assert (row.source_node, row.destination_node) == (f"vnode{row.source_rank}", "vnode0")
        assert row.bandwidth_MBps == pytest.approx(8192 / row.time_s / 1e6, rel=1e-12)
    pd.testing.assert_frame_equal(table, pairs_table(pair_campaign(fan_in, kernel="fan.in")), check_dtype=False)

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
    from commlens import open_campaign

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
