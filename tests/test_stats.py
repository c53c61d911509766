"""The summary over launches on synthetic samples with known answers: each statistic per launch and
combined by the median over launches, never pooled; each interval contains its statistic and covers
the typical launch's value about as often as it says."""

import numpy as np
import pytest
import xarray as xr

from commlens.analysis import stats
from commlens.data import quantities


def samples(values: np.ndarray) -> xr.DataArray:
    """values shaped (size, launch, sample) as a `time` DataArray."""
    n_size, n_launch, n_sample = values.shape
    return xr.DataArray(values, dims=("size", "launch", "sample"),
                        coords={"size": np.arange(n_size) + 1, "launch": np.arange(n_launch)},
                        attrs={"units": "s"})


def syn_dataset(time: xr.DataArray) -> xr.Dataset:
    """`time` (size, launch, sample) laid out as one curve of a collected campaign."""
    from commlens.data import synthetic as syn

    return syn.dataset_from_cubes({("lib", "1N2P", "pingpong.send"): (time["size"].values, time.values)})


def summarized(time: xr.DataArray, **options) -> xr.Dataset:
    """summarize_points of `time` (size, launch, sample), one curve."""
    return stats.summarize_points(syn_dataset(time), **options).sel(library="lib", placement="1N2P",
                                                                    kernel="pingpong.send")


def test_location_statistics_on_exact_values():
    t = samples(np.array([[[1.0, 2, 3, 4, 100, np.nan], [5, 6, 7, 8, np.nan, np.nan]]]))
    out = summarized(t, ci=False)
    # The median over the two launches of each launch's mean (22 and 6.5), not the 9 samples pooled (136 / 9).
    assert out["mean"].item() == pytest.approx((22 + 6.5) / 2)
    assert out["median"].item() == pytest.approx((3 + 6.5) / 2)
    assert out["min"].item() == 1.0 and out["count"].item() == 9 and out["launches"].item() == 2


def unequal_launches(seed: int = 0) -> np.ndarray:
    """One point, three launches as the stopping rule leaves them on a busy host: 10 samples, then 15,000
    with a heavy tail of delays (the launch a busy host caught), then 10 again; (1, 3, 15000), NaN-padded."""
    rng = np.random.default_rng(seed)
    t = np.full((1, 3, 15000), np.nan)
    t[0, 0, :10] = rng.normal(0.35e-6, 0.003e-6, 10)
    busy = rng.normal(0.35e-6, 0.01e-6, 15000)
    busy[rng.random(15000) < 0.005] = 400e-6          # one sample in 200 waited for another job
    t[0, 1] = busy
    t[0, 2, :10] = rng.normal(0.35e-6, 0.003e-6, 10)
    return t


def test_unequal_launches_are_combined_per_launch_never_pooled():
    """The summary's mean exceeded its P99 when it pooled a 15,000-sample launch with 10-sample ones
    while the percentiles were typical launches': every statistic is now each launch's, combined by
    the median over launches."""
    t = unequal_launches()
    pooled_mean = np.nanmean(t)
    out = summarized(samples(t), ci=False)
    per_launch = {"mean": np.nanmean(t[0], axis=1), "median": np.nanmedian(t[0], axis=1),
                  **{name: np.nanquantile(t[0], q, axis=1) for name, q in quantities.PERCENTILES.items()}}
    assert pooled_mean > out["p99"].item()                 # what pooling gave: a mean above the P99
    for name, values in per_launch.items():
        assert out[name].item() == pytest.approx(np.median(values), rel=1e-12), name
    assert out["min"].item() == np.nanmin(t)
    assert out["min"] <= out["p50"] <= out["p90"] <= out["p99"] and out["mean"] <= out["p99"]


def test_orders_each_launch_keeps_the_summary_keeps():
    """Medians over launches keep every order that holds in each launch: min <= P50 <= P90 <= P99 at
    every point, and the mean below the P99 wherever every launch's is."""
    ds = synthetic_campaign(["pingpong.send", "stream.bi"], launches=4)
    summary = ds.commlens.summary(ci=False)
    below = (ds["mean"] <= ds["quantiles"].sel(quantile=0.99)).where(ds["sample_count"] > 0, True).all("launch")
    assert int(below.sum()) > 0.8 * below.size          # the heavy tail leaves a few launches' means above
    assert bool((summary["mean"] <= summary["p99"]).where(below, True).all())
    assert bool((summary["min"] <= summary["p50"]).all() and (summary["p50"] <= summary["p90"]).all()
                and (summary["p90"] <= summary["p99"]).all())


@pytest.mark.parametrize("launches", [1, 2, 3, 5])
def test_each_statistic_lies_in_its_own_interval(launches):
    """The band a figure draws around its median is the interval of that median (and the mean's of
    the mean): every point inside its own, whatever the launches, a heavy tail and launch effects."""
    ds = synthetic_campaign(["pingpong.send", "stream.bi"], launches=launches, launch_relative=0.1)
    summary = ds.commlens.summary()
    for name, interval in (("median", "median_ci"), ("mean", "mean_ci"), ("bandwidth", "bandwidth_ci")):
        low, high = summary[interval].sel(bound="low"), summary[interval].sel(bound="high")
        assert bool(((low <= summary[name]) & (summary[name] <= high)).all()), name
    if launches == 1:        # one launch: its own distribution-free interval of the median
        xr.testing.assert_allclose(summary["median_ci"], ds["median_ci"].isel(launch=0, drop=True)
                                   .transpose(*summary["median_ci"].dims))


def test_the_band_shows_how_launches_differ_where_samples_cannot():
    """Launches shifted by a few percent each, samples tight within them: the interval of the median
    over launches is many times a single launch's own, and never narrower than it."""
    rng = np.random.default_rng(2)
    offsets = np.array([0.0, 0.3e-6, -0.2e-6, 0.5e-6, -0.4e-6])[None, :, None]
    t = samples(1e-6 + offsets + rng.normal(0, 0.01e-6, size=(1, 5, 400)))
    out = summarized(t)
    by_launch = out["median_ci"].diff("bound").item()
    ds = syn_dataset(t)
    within = ds["median_ci"].diff("bound").max().item()
    assert by_launch > 5 * within


@pytest.mark.parametrize("launches, launch_relative", [(3, 0.05), (5, 0.05), (1, 0.0)])
def test_the_band_covers_the_typical_launchs_median_about_95_percent(launches, launch_relative):
    """Ground truth: the median over many launches of each launch's median. Heavy-tailed samples and
    launch effects, 60 curves of 8 sizes: the band covers it at least about as often as it says. (One
    launch cannot show launch effects, so that case has none.)"""
    from commlens.data import synthetic as syn

    grid, truth = syn.powers_of_two(1, 128), syn.GroundTruth(2e-6, 5e9)
    noise = syn.Noise(0.05, launch_relative=launch_relative, outlier_fraction=0.02)
    many = syn.generate(grid, truth, noise, n_samples=100, n_launches=3000, seed=999)
    typical = np.median(np.median(many.times, axis=2), axis=1)
    curves = {(f"c{seed:02d}", "1N2P", "pingpong.send"): syn.generate(grid, truth, noise, n_samples=100,
                                                                      n_launches=launches, seed=seed)
              for seed in range(60)}
    band = syn.campaign_dataset(curves).commlens.summary()["median_ci"].sel(placement="1N2P", kernel="pingpong.send")
    covered = (band.sel(bound="low") <= typical) & (typical <= band.sel(bound="high"))
    assert float(covered.mean()) >= 0.9, float(covered.mean())


def test_summary_broadcasts_and_keeps_nan_for_empty_points():
    t = samples(np.full((2, 2, 3), np.nan))
    t[0] = 1e-6
    out = summarized(t)
    assert out["median"].sel(size=1).item() == pytest.approx(1e-6)
    assert np.isnan(out["median"].sel(size=2).item()) and out["count"].sel(size=2).item() == 0
    assert out["bandwidth"].sel(size=1).item() == pytest.approx(1 / 1e-6)
    assert out["median_ci"].dims == out["mean_ci"].dims == out["bandwidth_ci"].dims == ("size", "bound")
    assert np.isnan(out["median_ci"].sel(size=2)).all()


def synthetic_campaign(kernels, nprocs=None, launches=3, launch_relative=0.0):
    """A campaign dataset of a few launches per kernel, heavy-tailed, with the ranks on its placement."""
    from commlens.data import synthetic as syn

    truth, grid = syn.GroundTruth(2e-6, 5e9), syn.powers_of_two(1, 2**20)
    noise = syn.Noise(0.05, outlier_fraction=0.05, launch_relative=launch_relative)
    curves = {("lib", "1N4P", kernel): syn.generate(grid, truth, noise, n_samples=40, n_launches=launches, seed=n)
              for n, kernel in enumerate(kernels)}
    ds = syn.campaign_dataset(curves)
    return ds if nprocs is None else ds.assign_coords(nprocs=("placement", [nprocs]))


def test_summary_percentiles_are_a_typical_launchs_as_the_median_is():
    """P90 and P99 pool launches as the median does: the median over launches of each launch's
    percentile, read from the per-point statistics and checked here against the samples."""
    ds = synthetic_campaign(["pingpong.send"])
    summary = ds.commlens.summary(ci=False).sel(library="lib", placement="1N4P", kernel="pingpong.send")
    samples = ds.commlens.samples(library="lib", placement="1N4P", kernel="pingpong.send").values
    for name, q in quantities.PERCENTILES.items():
        per_launch = np.nanquantile(samples, q, axis=2)
        np.testing.assert_allclose(summary[name].values, np.median(per_launch, axis=1), rtol=1e-12)
    np.testing.assert_allclose(summary["p50"].values, summary["median"].values, rtol=1e-12)
    assert (summary["p99"] > summary["p90"]).all() and (summary["p90"] > summary["p50"]).all()


def test_bandwidth_counts_the_bytes_each_kernel_moves():
    kernels = ["pingpong.send", "stream.bi", "exchange.sendrecv@nocache", "multipair.stream"]
    summary = synthetic_campaign(kernels, nprocs=4).commlens.summary(ci=False)
    one_way = summary["size"] / summary["median"]
    ratio = (summary["bandwidth"] / one_way).sel(library="lib", placement="1N4P").max("size")
    # Both directions for stream.bi and the exchanges (any variant), every pair (4 ranks: 2) for multipair.
    factors = [quantities.bytes_factor(k, 4) for k in ratio["kernel"].values]
    assert ratio.values.tolist() == [2.0, 2.0, 1.0, 2.0] == factors
    # Without the ranks, a factor that needs them is unknown, not guessed.
    unknown = synthetic_campaign(["multipair.stream", "stream.bi"]).commlens.summary(ci=False)["bandwidth"]
    assert unknown.sel(kernel="multipair.stream").isnull().all() and unknown.sel(kernel="stream.bi").notnull().any()
