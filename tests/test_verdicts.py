"""Every verdict is read off the interval printed beside it, at the level that controls the comparison's
false discoveries; intervals too wide to mean anything are said in words; launches in two modes are said."""

import numpy as np
import pandas as pd
import pytest

from commlens import cli
from commlens.analysis.compare import CALLS, coverage_level, verdicts_from_intervals
from commlens.analysis.modes import find_modes
from commlens.data import synthetic as syn
from commlens.report.elements import readable
from commlens.units import format_change, format_launch_interval, format_measured, format_probability

KERNELS = ("pingpong.send", "stream.uni", "collectives.bcast")
GRID = syn.powers_of_two(1, 256 * 1024)
TRUTH = syn.GroundTruth(2e-6, 5e9, switches=(syn.Switch(16384, 4e-6, 8e9),))
NOISE = syn.Noise(relative=0.01, tail_df=3, outlier_fraction=0.01, launch_relative=0.03, launch_point_relative=0.01)


def campaign(seed: int, rounds: int, factor: float = 1.0, modes: syn.Modes | None = None):
    curves = {}
    for k, kernel in enumerate(KERNELS):
        for side, row in enumerate(("before", "after")):
            curve = syn.generate(GRID, TRUTH, NOISE, 30, rounds, seed=seed * 100 + 2 * k + side)
            if modes is not None and row == "after":
                curve, _ = syn.with_modes(curve, modes, seed=seed * 100 + 2 * k + side)
            if row == "after":
                curve = syn.with_change(curve, factor, 1024, 16384)
            curves[row, "1N2P", kernel] = curve
    return syn.in_rounds(curves, syn.Drift(), seed)


def test_the_verdict_rules_read_the_interval_against_the_margin():
    low = np.array([1.10, 1.01, 1.01, 0.97, 0.97, 0.80, 0.80, 0.90])
    high = np.array([1.30, 1.04, 1.20, 1.03, 1.10, 0.90, 0.98, 1.20])
    assert verdicts_from_intervals(low, high, 0.05).tolist() == [
        "regressed", "slower", "slower", "unchanged", "inconclusive", "improved", "faster", "inconclusive"]


@pytest.mark.parametrize("seed, factor", [(1, 1.0), (2, 1.08), (3, 1 / 1.08), (4, 1.3), (5, 1 / 1.3)])
def test_every_verdict_agrees_with_its_interval_and_an_interval_excludes_1_where_a_change_is_selected(seed, factor):
    result = campaign(seed, 5, factor).commlens.compare(baseline="before", candidate="after")
    tested = (result["basis"] == "launches").values
    low, high = result["ratio_low"].values[tested], result["ratio_high"].values[tested]
    up, down = 1.05, 1 / 1.05
    verdict = result["verdict"].values[tested]
    assert (low[verdict == "regressed"] > up).all() and (high[verdict == "improved"] < down).all()
    assert ((low[verdict == "slower"] > 1) & (low[verdict == "slower"] <= up)).all()
    assert ((high[verdict == "faster"] < 1) & (high[verdict == "faster"] >= down)).all()
    assert ((low[verdict == "unchanged"] >= down) & (high[verdict == "unchanged"] <= up)).all()
    held = verdict == "inconclusive"
    assert ((low[held] <= 1) & (high[held] >= 1) & ((low[held] < down) | (high[held] > up))).all()
    # The Benjamini-Hochberg selection and the false coverage-rate interval are one decision.
    selected = result["q_value"].values[tested] <= 0.05
    excludes = (low > 1) | (high < 1)
    assert (selected == excludes).all()
    assert result.attrs["interval_level"] == pytest.approx(coverage_level(int(selected.sum()), int(tested.sum()), 0.95))
    assert ((result["ratio_low"] <= result["ratio_low_marginal"]) | ~result["basis"].isin(["launches"])).all()


def test_one_launch_cells_are_labelled_and_kept_out_of_the_adjustment():
    result = campaign(6, 1, 2.0).commlens.compare(baseline="before", candidate="after")
    assert set(result["basis"].values.ravel()) == {"one launch"}
    assert result["q_value"].isnull().all() and result.attrs["tested"] == 0
    called = result["verdict"].isin(CALLS)
    # A 2-fold change dwarfs the samples' spread: called, from an interval within one launch.
    assert called.sel(size=slice(1024, 16384)).all() and not called.sel(size=slice(32768, None)).any()
    assert "within-launch median intervals" in result.attrs["method"]


def test_launches_in_two_modes_are_said():
    """Four of eight candidate launches 1.65 times slower at every size: both rows' modes are named, and
    a curve whose launches merely vary is not."""
    result = campaign(7, 8, modes=syn.Modes(probability=0.5, factor=1.65)).commlens.compare(
        baseline="before", candidate="after")
    said = result["candidate_modes"].values.ravel()
    assert all(text.startswith(("launch ", "launches ")) and "x slower at every size" in text for text in said), said
    assert (result["baseline_modes"].values == "").all()
    rng = np.random.default_rng(0)
    quiet = np.log(1 + 0.03 * rng.standard_normal((20, 1)) + 0.01 * rng.standard_normal((20, 8)))
    assert find_modes(quiet) is None
    slow = quiet.copy()
    slow[:, [1, 5]] += np.log(2.0)
    found = find_modes(slow)
    assert found is not None and found.slow == (1, 5) and found.replicated
    assert found.factor == pytest.approx(2.0, rel=0.03)


def test_numbers_show_the_digits_their_interval_allows():
    """Two digits of the uncertainty: a value known to +-40% is not printed to four figures."""
    assert format_measured(0.9525, 0.6221, 1.458) == "0.95 [0.62, 1.5]"
    assert format_measured(12930.0, 12585.0, 13284.0) == "12930 [12580, 13280]"
    assert format_measured(12930.0, 9000.0, 17000.0) == "12900 [9000, 17000]"
    assert format_measured(2.0456, 2.0455, 2.0457) == "2.046 [2.046, 2.046]"    # at most SIGNIFICANT digits
    assert format_measured(3.0, float("nan"), 4.0) == "3"
    assert [format_probability(p) for p in (5.414e-14, 0.000999, 0.0123, 0.5, float("nan"))] == [
        "5.41e-14", "9.99e-04", "0.0123", "0.5", ""]
    shown = readable(pd.DataFrame({"q value": [5.414e-14], "ratio": [0.00005414]}))
    assert shown.iloc[0].tolist() == ["5.41e-14", "0.00005414"]      # a ratio is no probability


def test_an_interval_too_wide_to_mean_anything_is_said_in_words():
    assert format_launch_interval(0.35, 0.34, 0.36, 3, [0.34, 0.36]) == "0.35 [0.34, 0.36]"
    # The launches' spread stands for the missing interval in the digits shown.
    assert format_launch_interval(0.2336, 0.0002185, 249.8, 2, [0.2, 0.27]) == (
        "0.234; too few launches for an interval: launches read 0.2-0.27")
    assert format_launch_interval(0.35, 0.34, 0.36, 1, [0.35]).endswith(" within one launch")
    assert format_change(0.21, 0.12, 0.37) == "4.76x faster [time ratio 0.12-0.37]"
    assert format_change(4.54, 4.0, 5.0) == "4.54x slower [time ratio 4-5]"
    assert "too few launches to say" in format_change(1.5, 0.1, 30)


def test_two_rows_of_one_dataset_compare_as_the_report_does(tmp_path, capsys):
    ds = campaign(8, 5, 1.3)
    ds.attrs["commlens_version"] = "test"
    path = tmp_path / "rows.nc"
    ds.to_netcdf(path)
    expected = ds.commlens.compare(baseline="before", candidate="after")
    for argv in (["compare", str(path), "--rows", "before", "after"],
                 ["compare", str(path), str(path), "--map", "before=after"]):
        assert cli.main(argv) == 0
        out, err = capsys.readouterr()
        assert "rows: before (baseline) against after (candidate)" in out and "same dataset" not in err
        cells = next(line for line in out.splitlines() if line.startswith("cells: "))
        counts = {verdict: int((expected["verdict"] == verdict).sum()) for verdict in CALLS}
        assert sum(counts.values()) > 0
        assert all(f"{n} {verdict}" in cells.split(": ", 1)[1].split(", ") for verdict, n in counts.items() if n)
        assert "paired t test by round" in out
