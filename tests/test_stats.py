"""Per-point statistics on synthetic samples with known answers."""

import numpy as np
import pytest
import xarray as xr

from commbench.analysis import stats
from commbench.data import quantities


def samples(values: np.ndarray) -> xr.DataArray:
    """values shaped (size, launch, sample) as a `time` DataArray."""
    n_size, n_launch, n_sample = values.shape
    return xr.DataArray(values, dims=("size", "launch", "sample"),
                        coords={"size": np.arange(n_size) + 1, "launch": np.arange(n_launch)},
                        attrs={"units": "s"})


def summarized(time: xr.DataArray, **options) -> xr.Dataset:
    """summarize_points of `time` (size, launch, sample) laid out as one curve of a collected campaign."""
    from commbench.data import synthetic as syn

    ds = syn.dataset_from_cubes({("lib", "1N2P", "pingpong.send"): (time["size"].values, time.values)})
    return stats.summarize_points(ds, **options).sel(library="lib", placement="1N2P", kernel="pingpong.send")


def test_location_statistics_on_exact_values():
    t = samples(np.array([[[1.0, 2, 3, 4, 100, np.nan], [5, 6, 7, 8, np.nan, np.nan]]]))
    out = summarized(t, ci=False)
    assert out["mean"].item() == pytest.approx(136 / 9)
    assert out["min"].item() == 1.0


def test_sample_bootstrap_covers_the_true_mean_about_95_percent():
    rng = np.random.default_rng(1)
    true_mean = 2e-6
    t = samples(rng.normal(true_mean, 0.2e-6, size=(300, 1, 200)))
    ci = stats.bootstrap_mean_intervals(t.values.reshape(300, 200), 400, 0.95, np.random.default_rng(0))
    covered = ((ci[:, 0] <= true_mean) & (ci[:, 1] >= true_mean)).mean()
    assert 0.90 <= covered <= 0.99, covered
    width = np.median(ci[:, 1] - ci[:, 0])
    assert width == pytest.approx(2 * 1.96 * 0.2e-6 / np.sqrt(200), rel=0.15)


def test_launch_bootstrap_sees_variation_between_launches_that_samples_hide():
    rng = np.random.default_rng(2)
    offsets = np.array([0.0, 0.3e-6, -0.2e-6, 0.5e-6, -0.4e-6])[None, :, None]
    t = samples(1e-6 + offsets + rng.normal(0, 0.01e-6, size=(1, 5, 400)))
    out = summarized(t)
    by_sample = out["mean_ci_samples"].diff("bound").item()
    by_launch = out["mean_ci_launches"].diff("bound").item()
    assert by_launch > 5 * by_sample


def test_summary_broadcasts_and_keeps_nan_for_empty_points():
    t = samples(np.full((2, 2, 3), np.nan))
    t[0] = 1e-6
    out = summarized(t, n_boot=50)
    assert out["median"].sel(size=1).item() == pytest.approx(1e-6)
    assert np.isnan(out["median"].sel(size=2).item()) and out["count"].sel(size=2).item() == 0
    assert out["bandwidth"].sel(size=1).item() == pytest.approx(1 / 1e-6)
    assert out["mean_ci_samples"].dims == ("size", "bound")
    assert np.isnan(out["mean_ci_launches"].sel(size=2)).all()


def test_batched_bootstrap_treats_each_row_alone_and_covers_the_mean():
    from commbench.analysis.stats import bootstrap_mean_intervals

    rng = np.random.default_rng(3)
    rows = rng.normal(10.0, 2.0, size=(500, 40))
    rows[1, 5:] = np.nan                      # 5 values
    rows[2, 1:] = np.nan                      # 1 value: no interval
    rows[3, ::2] = np.nan                     # NaNs between values
    batch = bootstrap_mean_intervals(rows, 400, 0.95, np.random.default_rng(0), chunk=64)
    for i in (0, 1, 3, 499):
        alone = bootstrap_mean_intervals(rows[i:i + 1], 400, 0.95, np.random.default_rng(0))
        np.testing.assert_allclose(batch[i], alone[0])
    assert np.isnan(batch[2]).all()
    full = np.isfinite(rows).all(axis=1)
    covered = (batch[full, 0] <= 10.0) & (10.0 <= batch[full, 1])
    assert 0.90 < covered.mean() <= 1.0, covered.mean()
    width = (batch[full, 1] - batch[full, 0]).mean()
    assert abs(width / (2 * 1.96 * 2.0 / np.sqrt(40)) - 1) < 0.1


def synthetic_campaign(kernels, nprocs=None):
    """A campaign dataset of a few launches per kernel, heavy-tailed, with the ranks on its placement."""
    from commbench.data import synthetic as syn

    truth, grid = syn.GroundTruth(2e-6, 5e9), syn.powers_of_two(1, 2**20)
    curves = {("lib", "1N4P", kernel): syn.generate(grid, truth, syn.Noise(0.05, outlier_fraction=0.05),
                                                    n_samples=40, n_launches=3, seed=n)
              for n, kernel in enumerate(kernels)}
    ds = syn.campaign_dataset(curves)
    return ds if nprocs is None else ds.assign_coords(nprocs=("placement", [nprocs]))


def test_summary_percentiles_are_a_typical_launchs_as_the_median_is():
    """P90 and P99 pool launches as the median does: the median over launches of each launch's
    percentile, read from the per-point statistics and checked here against the samples."""
    ds = synthetic_campaign(["pingpong.send"])
    summary = ds.commbench.summary(ci=False).sel(library="lib", placement="1N4P", kernel="pingpong.send")
    samples = ds.commbench.samples(library="lib", placement="1N4P", kernel="pingpong.send").values
    for name, q in quantities.PERCENTILES.items():
        per_launch = np.nanquantile(samples, q, axis=2)
        np.testing.assert_allclose(summary[name].values, np.median(per_launch, axis=1), rtol=1e-12)
    np.testing.assert_allclose(summary["p50"].values, summary["median"].values, rtol=1e-12)
    assert (summary["p99"] > summary["p90"]).all() and (summary["p90"] > summary["p50"]).all()


def test_bandwidth_counts_the_bytes_each_kernel_moves():
    kernels = ["pingpong.send", "stream.bi", "exchange.sendrecv@nocache", "multipair.stream"]
    summary = synthetic_campaign(kernels, nprocs=4).commbench.summary(ci=False)
    one_way = summary["size"] / summary["median"]
    ratio = (summary["bandwidth"] / one_way).sel(library="lib", placement="1N4P").max("size")
    # Both directions for stream.bi and the exchanges (any variant), every pair (4 ranks: 2) for multipair.
    assert ratio.values.tolist() == [2.0, 2.0, 1.0, 2.0] == [quantities.bytes_factor(k, 4) for k in ratio["kernel"].values]
    # Without the ranks, a factor that needs them is unknown, not guessed.
    unknown = synthetic_campaign(["multipair.stream", "stream.bi"]).commbench.summary(ci=False)["bandwidth"]
    assert unknown.sel(kernel="multipair.stream").isnull().all() and unknown.sel(kernel="stream.bi").notnull().any()
