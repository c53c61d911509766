"""History of reruns: collection keeps the dataset it replaces, change points over the reruns are
found where the truth put them (and nowhere else), and `commlens history` reports them by size range."""

import json
import os
import warnings

import numpy as np
import pytest
import xarray as xr

from commlens import cli
from commlens.analysis import changepoints
from commlens.data import synthetic as syn
from commlens.io.archive import archive_previous
from commlens.io.netcdf import write_dataset
from commlens.analysis.history import change_points, change_table, open_history

SIZES_PER_CURVE = 20


def launch_series(seed, cells=200, reruns=10, launches=3, noise=0.02, steps=(), missing=0.0):
    """Log launch medians of `cells` cells over `reruns` reruns, flat but for `steps` ((rerun index,
    factor), from that rerun on), with launch-to-launch noise `noise` (relative) and a fraction
    `missing` of (cell, rerun) not measured; returned as noise_scale and segment take them."""
    rng = np.random.default_rng(seed)
    level = np.zeros((cells, reruns))
    for at, factor in steps:
        level[:, at:] += np.log(factor)
    values = level[..., None] + noise * rng.standard_normal((cells, reruns, launches))
    values[rng.random((cells, reruns)) < missing] = np.nan
    count = np.isfinite(values).sum(-1).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)    # cells without launches: NaN, as meant
        location = np.nanmean(values, -1)
        var = np.nanvar(values, -1, ddof=1) if launches > 1 else np.full(count.shape, np.nan)
    curve = np.arange(cells) // SIZES_PER_CURVE
    return location, var, count, curve


def fit(location, var, count, curve, **options):
    return changepoints.segment(location, changepoints.noise_scale(location, var, count, curve), **options)


@pytest.mark.parametrize("noise", [0.02, 0.10])
def test_flat_series_have_no_change_point(noise):
    """200 cells, 10 reruns of 3 launches, nothing changed: no change anywhere, small launch noise
    (2%) or large (10%, where min_effect alone would not stop a false change)."""
    segmentation = fit(*launch_series(seed=1, noise=noise))
    assert segmentation.tested.all()
    assert segmentation.change.sum() == 0


def test_flat_series_would_have_changes_without_the_penalty():
    """The flat test above can fail: with no penalty, noise alone makes changes of 5% or more."""
    segmentation = fit(*launch_series(seed=1, noise=0.10), change_penalty=0.0)
    assert segmentation.change.sum() > 50


@pytest.mark.parametrize("factor", [1.2, 1 / 1.2])
def test_one_step_is_found_at_its_rerun(factor):
    """A 20% step at the 7th of 10 reruns (slower or faster): every cell has exactly that change,
    with the right ratio inside its interval in nearly every cell."""
    segmentation = fit(*launch_series(seed=2, steps=[(6, factor)]))
    assert (segmentation.change.sum(axis=1) == 1).all()
    assert segmentation.change[:, 6].all()
    log_ratio, se = changepoints.steps(segmentation)
    ratio = np.exp(log_ratio[:, 6])
    assert np.median(ratio) == pytest.approx(factor, rel=0.01)
    covered = np.abs(log_ratio[:, 6] - np.log(factor)) <= 1.96 * se[:, 6]
    assert covered.mean() >= 0.9


def test_two_steps_are_both_found():
    """25% slower from the 5th of 12 reruns, then 20% faster from the 10th."""
    segmentation = fit(*launch_series(seed=3, reruns=12, steps=[(4, 1.25), (9, 1 / 1.2)]))
    assert segmentation.change[:, 4].all() and segmentation.change[:, 9].all()
    assert (segmentation.change.sum(axis=1) == 2).all()


def test_step_below_min_effect_is_not_reported():
    """A 3% step over quiet launches (0.5%) is real and found without min_effect, and merged away
    with the default 5%."""
    data = launch_series(seed=4, noise=0.005, steps=[(5, 1.03)])
    assert fit(*data, min_effect=0.0).change[:, 5].mean() > 0.95
    assert fit(*data).change.sum() == 0


def test_sparse_series_report_the_change_where_measuring_resumed():
    """A third of (cell, rerun) not measured, and the 7th rerun measured nothing: a 20% step from
    the 7th rerun is seen at each cell's first measured rerun from there, and nothing else changes."""
    location, var, count, curve = launch_series(seed=5, reruns=12, steps=[(6, 1.2)], missing=0.3)
    location[:, 6], var[:, 6], count[:, 6] = np.nan, np.nan, 0
    segmentation = fit(location, var, count, curve)
    measured = np.isfinite(location)
    first_after = np.array([np.flatnonzero(row[6:])[0] + 6 if row[6:].any() else -1 for row in measured])
    has_both = (first_after >= 0) & measured[:, :6].any(axis=1)
    assert has_both.sum() > 150
    rows = np.flatnonzero(has_both)
    assert segmentation.change[rows, first_after[rows]].all()
    assert (segmentation.change.sum(axis=1) == has_both).all()
    assert not segmentation.change[~measured].any()


def test_one_launch_per_rerun_leans_on_the_series_own_spread():
    """Single launches (no launch-to-launch spread): 20 reruns estimate the noise from successive
    differences, a 20% step is found and flat cells stay flat; 3 reruns cannot, and are not tested."""
    flat = fit(*launch_series(seed=6, reruns=20, launches=1, noise=0.03))
    assert flat.tested.all() and flat.change.sum() == 0
    stepped = fit(*launch_series(seed=7, reruns=20, launches=1, noise=0.03, steps=[(12, 1.2)]))
    assert stepped.change[:, 12].mean() > 0.95 and stepped.change.sum(axis=1).max() == 1
    # Three reruns: every curve's reruns give the scale, and a 50% step in a tenth of the curves is found,
    # nothing elsewhere.
    location, var, count, curve = launch_series(seed=8, reruns=3, launches=1, noise=0.03)
    location[curve == 0, 2:] += np.log(1.5)
    short = fit(location, var, count, curve)
    assert short.tested.all()
    assert short.change[curve == 0, 2].mean() > 0.9 and not short.change[curve != 0].any()


@pytest.mark.parametrize("reruns", [2, 3, 5])
def test_noise_between_reruns_is_not_a_change(reruns):
    """Each rerun shifts each curve by 3% (a reboot, a firmware update), ten curves, launches quiet (1%):
    no change in any of 40 histories (every one had some before the rerun variance was estimated); a step
    in one curve at the last rerun is still found in nearly all its cells: 1.5x from 3 reruns, 1.3x from 5
    (the scale of 3% between reruns rests on the curves' differences: 6 degrees of freedom at 3 reruns)."""
    called = 0
    for seed in range(40):
        location, var, count, curve = launch_series(seed=seed, reruns=reruns, noise=0.01)
        shift = 0.03 * np.random.default_rng(1000 + seed).standard_normal((curve.max() + 1, reruns))
        called += fit(location + shift[curve], var, count, curve).change.any()
    assert called == 0
    location, var, count, curve = launch_series(seed=99, reruns=reruns, noise=0.01)
    location = location + 0.03 * np.random.default_rng(99).standard_normal((curve.max() + 1, reruns))[curve]
    location[curve == 3, -1] += np.log(1.5 if reruns < 5 else 1.3)
    stepped = fit(location, var, count, curve)
    assert not stepped.change[curve != 3].any()
    if reruns >= 3:
        assert stepped.change[curve == 3, -1].mean() > 0.9


def test_penalty_for_an_estimated_noise_scale_is_larger():
    base = changepoints.penalty(10, 1000)
    adjusted = changepoints.penalty_for_dof(base, np.array([5, 50, 1e6, 0]))
    assert adjusted[0] > adjusted[1] > adjusted[2] == pytest.approx(base, rel=1e-3)
    assert np.isinf(adjusted[3])


# ----------------------------------------------------------------------------- datasets on disk

GRID = syn.powers_of_two(1, 2**20)
TRUTH = syn.GroundTruth(2e-6, 5e9)
NOISE = syn.Noise(relative=0.01, tail_df=3, outlier_fraction=0.01, launch_relative=0.02)
# Enough curves for the noise a rerun adds to be estimated from three reruns (changepoints.rerun_variance:
# its degrees of freedom count curves, two curves give too few to call anything).
CURVES = tuple((library, placement, "pingpong.send") for library in ("mpich-5.0.2", "openmpi-5.0.11")
               for placement in ("1N2P", "2N1P", "1N4P", "4N1P", "2N2P"))


def campaign(seed, created, factor=1.0, changed=(4096, 65536)):
    """Ten curves of TRUTH, 3 launches each; mpich's 1N2P sizes in `changed` take `factor` times longer."""
    curves = {}
    for i, key in enumerate(CURVES):
        curve = syn.generate(GRID, TRUTH, NOISE, n_samples=30, n_launches=3, seed=seed * 10 + i)
        times = curve.times.copy()
        if key[:2] == ("mpich-5.0.2", "1N2P"):
            times[(GRID >= changed[0]) & (GRID <= changed[1])] *= factor
        curves[key] = syn.SyntheticCurve(GRID, times, TRUTH, NOISE)
    ds = syn.campaign_dataset(curves)
    ds.attrs.update(commlens_version="test", created=created)
    return ds


def collect_reruns(folder, reruns):
    """Writes each (created, factor) as the campaign's dataset in turn, as collections do, with a
    failures.jsonl naming the rerun."""
    folder.mkdir(parents=True, exist_ok=True)
    for seed, (created, factor) in enumerate(reruns):
        write_dataset(campaign(seed, created, factor), folder / f"{folder.name}.nc")
        (folder / "failures.jsonl").write_text(json.dumps({"rerun": seed}) + "\n")


def test_collection_keeps_the_dataset_it_replaces(tmp_path):
    folder = tmp_path / "results" / "c"
    collect_reruns(folder, [("2026-11-20T10:00:00+00:00", 1.0), ("2026-11-24T16:39:19+00:00", 1.0)])
    kept = folder / "history" / "2026-11-20T100000Z"
    assert sorted(p.name for p in kept.iterdir()) == ["c.nc", "failures.jsonl"]
    assert json.loads((kept / "failures.jsonl").read_text()) == {"rerun": 0}
    with xr.open_dataset(kept / "c.nc") as old, xr.open_dataset(folder / "c.nc") as new:
        assert old.attrs["created"] == "2026-11-20T10:00:00+00:00"
        assert new.attrs["created"] == "2026-11-24T16:39:19+00:00"
        expected = campaign(0, "2026-11-20T10:00:00+00:00")
        np.testing.assert_array_equal(old["time"].values, expected["time"].values)
        np.testing.assert_array_equal(old["median"].values, expected["median"].values)


def test_a_file_that_is_not_a_dataset_is_moved_aside_not_lost(tmp_path, capsys):
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "c.nc").write_bytes(b"not netCDF")
    write_dataset(campaign(0, "2026-11-20T10:00:00+00:00"), folder / "c.nc")
    aside = list((folder / "history").glob("*-unreadable/c.nc"))
    assert len(aside) == 1 and aside[0].read_bytes() == b"not netCDF"
    assert "not a readable commlens dataset" in capsys.readouterr().err
    assert open_history(folder).sizes["rerun"] == 1     # not read as a rerun


def test_a_dataset_without_creation_time_is_named_by_its_file_time(tmp_path):
    folder = tmp_path / "c"
    folder.mkdir()
    undated = campaign(0, "")
    del undated.attrs["created"]
    write_dataset(undated, folder / "c.nc")
    os.utime(folder / "c.nc", (1795000000, 1795000000))       # 2026-11-18T11:06:40Z
    write_dataset(campaign(1, "2026-11-20T10:00:00+00:00"), folder / "c.nc")
    assert (folder / "history" / "2026-11-18T110640Z" / "c.nc").exists()
    assert list(open_history(folder)["created"].values) == ["", "2026-11-20T10:00:00+00:00"]


def test_two_datasets_of_one_second_both_kept_and_a_duplicate_once(tmp_path):
    folder = tmp_path / "c"
    folder.mkdir()
    same_time = "2026-11-20T10:00:00+00:00"
    for seed in (0, 1, 2):
        write_dataset(campaign(seed, same_time), folder / "c.nc")
    assert sorted(p.name for p in (folder / "history").iterdir()) == ["2026-11-20T100000Z", "2026-11-20T100000Z-2"]
    assert open_history(folder).sizes["rerun"] == 3
    # The current dataset kept again (as after a collection that failed and got it back): no new copy.
    copy = (folder / "c.nc").read_bytes()
    archive_previous(folder / "c.nc")
    (folder / "c.nc").write_bytes(copy)
    archive_previous(folder / "c.nc")
    assert not (folder / "c.nc").exists()
    assert sorted(p.name for p in (folder / "history").iterdir()) == [
        "2026-11-20T100000Z", "2026-11-20T100000Z-2", "2026-11-20T100000Z-3"]


def test_history_command_names_the_changed_range_and_rerun(tmp_path, capsys):
    """Three collections; mpich's 4 KiB-64 KiB 20% slower from the third: one line says so, with
    the rerun's time, and nothing else changed."""
    folder = tmp_path / "results" / "c"
    collect_reruns(folder, [("2026-11-20T10:00:00+00:00", 1.0), ("2026-11-22T10:00:00+00:00", 1.0),
                            ("2026-11-24T16:39:19+00:00", 1.2)])
    table_path = tmp_path / "changes.json"
    assert cli.main(["history", str(folder), "--output", str(table_path)]) == 0
    out = capsys.readouterr().out
    lines = [line.strip() for line in out.splitlines() if "x slower" in line or "x faster" in line]
    assert len(lines) == 1, out
    assert lines[0].startswith("mpich-5.0.2 pingpong.send 1N2P: 4 KiB–64 KiB: ")
    assert lines[0].endswith("slower" + lines[0].split("slower")[1])
    assert "from rerun 3 (2026-11-24T16:39)" in lines[0]
    factor = float(lines[0].split(": ")[2].split("x")[0])
    assert 1.16 <= factor <= 1.24
    table = json.loads(table_path.read_text())
    assert [(row["library"], row["rerun"], row["size_from"], row["size_to"]) for row in table] == [
        ("mpich-5.0.2", 3, 4096, 65536)]
    # The dataset's path names the same campaign.
    assert cli.main(["history", str(folder / "c.nc")]) == 0
    assert "4 KiB–64 KiB" in capsys.readouterr().out


def test_history_of_one_campaign_without_change(tmp_path, capsys):
    folder = tmp_path / "c"
    collect_reruns(folder, [("2026-11-20T10:00:00+00:00", 1.0), ("2026-11-22T10:00:00+00:00", 1.0)])
    assert cli.main(["history", str(folder)]) == 0
    assert "no change of 5% or more" in capsys.readouterr().out
    assert cli.main(["history", str(tmp_path / "nothing")]) == 2


def test_reruns_align_by_label_and_recollected_launches_count_once(tmp_path):
    """A rerun that lacks a curve leaves it NaN there; a curve whose launches (start times) are the
    ones of the rerun before was collected again, not measured again, and is NaN in the later one."""
    folder = tmp_path / "c"
    folder.mkdir()
    first = campaign(0, "2026-11-20T10:00:00+00:00").sel(placement=["1N2P"])
    second = campaign(1, "2026-11-22T10:00:00+00:00").sel(library=["mpich-5.0.2"], placement=["1N2P"])
    for ds, day in ((first, "20"), (second, "22")):
        started = np.full((ds.sizes["library"], 1, 1, 3), "", dtype=object)
        started[:] = [f"2026-11-{day}T09:0{launch}:00" for launch in range(3)]
        started[0] = [f"2026-11-20T09:0{launch}:00" for launch in range(3)]   # mpich: the same launches
        ds["started"] = (("library", "placement", "kernel", "launch"), started.astype(str))
        write_dataset(ds, folder / "c.nc")
    series = open_history(folder)
    assert list(series["rerun"].values) == [1, 2]
    location = series["location"].sel(placement="1N2P", kernel="pingpong.send")
    assert np.isfinite(location.sel(rerun=1)).all()
    assert np.isnan(location.sel(rerun=2)).all()      # openmpi absent; mpich the same launches again
    result = change_points(series)
    assert not result["change"].any() and change_table(result).empty
