"""Per-point statistics on synthetic samples with known answers."""

import numpy as np
import pytest
import xarray as xr

from commbench import stats


def samples(values: np.ndarray) -> xr.DataArray:
    """values shaped (size, launch, sample) as a `time` DataArray."""
    n_size, n_launch, n_sample = values.shape
    return xr.DataArray(values, dims=("size", "launch", "sample"),
                        coords={"size": np.arange(n_size) + 1, "launch": np.arange(n_launch)},
                        attrs={"units": "s"})


def test_location_statistics_on_exact_values():
    t = samples(np.array([[[1.0, 2, 3, 4, 100, np.nan], [5, 6, 7, 8, np.nan, np.nan]]]))
    assert stats.median(t).item() == 5.0
    assert stats.mean(t).item() == pytest.approx(136 / 9)
    assert stats.minimum(t).item() == 1.0
    # Quartiles of 1..8,100 are 3 and 7: the interquartile mean drops the outlier.
    assert stats.interquartile_mean(t).item() == pytest.approx(np.mean([3, 4, 5, 6, 7]))


def test_sample_bootstrap_covers_the_true_mean_about_95_percent():
    rng = np.random.default_rng(1)
    true_mean = 2e-6
    t = samples(rng.normal(true_mean, 0.2e-6, size=(300, 1, 200)))
    ci = stats.bootstrap_ci(t, over="sample", n_boot=400)
    covered = ((ci.sel(bound="low") <= true_mean) & (ci.sel(bound="high") >= true_mean)).mean().item()
    assert 0.90 <= covered <= 0.99, covered
    width = (ci.sel(bound="high") - ci.sel(bound="low")).median().item()
    assert width == pytest.approx(2 * 1.96 * 0.2e-6 / np.sqrt(200), rel=0.15)


def test_launch_bootstrap_sees_variation_between_launches_that_samples_hide():
    rng = np.random.default_rng(2)
    offsets = np.array([0.0, 0.3e-6, -0.2e-6, 0.5e-6, -0.4e-6])[None, :, None]
    t = samples(1e-6 + offsets + rng.normal(0, 0.01e-6, size=(1, 5, 400)))
    by_sample = stats.bootstrap_ci(t, over="sample").diff("bound").item()
    by_launch = stats.bootstrap_ci(t, over="launch").diff("bound").item()
    assert by_launch > 5 * by_sample


def test_summary_broadcasts_and_keeps_nan_for_empty_points():
    t = samples(np.full((2, 2, 3), np.nan))
    t[0] = 1e-6
    out = stats.summarize(t, t["size"], n_boot=50)
    assert out["median"].sel(size=1).item() == pytest.approx(1e-6)
    assert np.isnan(out["median"].sel(size=2).item()) and out["count"].sel(size=2).item() == 0
    assert out["bandwidth"].sel(size=1).item() == pytest.approx(1 / 1e-6)
    assert out["mean_ci_samples"].dims == ("size", "bound")
    assert np.isnan(out["mean_ci_launches"].sel(size=2)).all()


def test_bootstrap_rejects_unknown_resampling():
    with pytest.raises(ValueError, match="'sample' or 'launch'"):
        stats.bootstrap_ci(samples(np.ones((1, 2, 2))), over="size")


def test_batched_bootstrap_treats_each_row_alone_and_covers_the_mean():
    from commbench.stats import bootstrap_mean_intervals

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
