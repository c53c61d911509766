"""compare with the campaign's design: paired by round, moderated variances, single-value rows, and
launches until decided (commlens.analysis.paired, .moderated, .sequential)."""

import json

import numpy as np
import pytest
import scipy.stats

from commlens import cli
from commlens.analysis.compare import NO_SPREAD, across, benjamini_hochberg, verdict_counts
from commlens.analysis.moderated import inverse_trigamma
from commlens.analysis.paired import paired_test
from commlens.analysis.ranges import changed_ranges
from commlens.analysis.sequential import UNDECIDED, after_round, look_levels
from commlens.data import synthetic as syn
from commlens.data.imported import import_files

from conftest import REPO

DATA = REPO / "tests" / "data"

GRID = syn.powers_of_two(1, 2**19)                                      # 20 sizes
TRUTH = syn.GroundTruth(2e-6, 5e9, switches=(syn.Switch(16384, 4e-6, 8e9),))
NOISE = syn.Noise(relative=0.01, tail_df=3, outlier_fraction=0.01, outlier_scale=3, launch_relative=0.03,
                  launch_point_relative=0.01)
KERNELS = ("pingpong.send", "stream.uni", "collectives.bcast")


def rounds_campaign(seed, rounds, factor=1.0, drift=syn.Drift()):
    """`before` and `after` over three kernels, run in rounds; `after` is `factor` slower over 1-16 KiB."""
    curves = {}
    for k, kernel in enumerate(KERNELS):
        curves["before", "1N2P", kernel] = syn.generate(GRID, TRUTH, NOISE, 30, rounds, seed=seed * 100 + 2 * k)
        after = syn.generate(GRID, TRUTH, NOISE, 30, rounds, seed=seed * 100 + 2 * k + 1)
        curves["after", "1N2P", kernel] = syn.with_change(after, factor, 1024, 16384)
    return syn.in_rounds(curves, drift, seed)


def test_a_campaign_in_rounds_records_each_launchs_round_and_its_drift():
    ds = rounds_campaign(1, 4, drift=syn.Drift(slow_round=2, slow_factor=1.5))
    assert ds["round"].dims == ("library", "placement", "kernel", "launch")
    assert (ds["round"].values == np.arange(4)).all()
    positions = ds["round_position"].isel(placement=0).transpose("launch", ...).values.reshape(4, -1)
    assert all(sorted(row) == list(range(6)) for row in positions)      # every cell once per round
    median = ds["median"].median(["library", "kernel", "size"]).squeeze()
    assert median.isel(launch=2) > 1.3 * median.isel(launch=[0, 1, 3]).max()


def test_pairing_by_round_removes_a_slow_round_that_hides_a_change_from_the_unpaired_test():
    """A 10% change over 1-16 KiB and one round 40% slower for every row: paired by round, the slow round
    cancels and the change is found; unpaired, the slow round is launch-to-launch noise that buries it."""
    ds = rounds_campaign(3, 4, 1.10, syn.Drift(slow_round=1, slow_factor=1.4))
    paired = ds.commlens.compare(baseline="before", candidate="after")
    unpaired = ds.commlens.compare(baseline="before", candidate="after", pair_by_round=False)
    assert paired["paired"].all() and not unpaired["paired"].any()
    assert paired.attrs["method"].startswith("paired t test by round")
    assert unpaired.attrs["method"].startswith("unpaired t test")
    ranges = changed_ranges(paired)
    assert ranges["verdict"].isin(["regressed", "slower"]).all() and set(ranges["kernel"]) == set(KERNELS), ranges
    for _, kernel in ranges.groupby("kernel"):
        assert (kernel["size_from"].min(), kernel["size_to"].max()) == (1024, 16384)
    assert verdict_counts(unpaired)["regressed"] + verdict_counts(unpaired)["slower"] == 0
    width = lambda result: np.log(result["ratio_high"] / result["ratio_low"]).median()   # noqa: E731
    assert width(paired) < width(unpaired) / 3


def test_two_campaigns_are_never_paired_by_round():
    """Round r of one campaign did not run beside round r of another."""
    result = across(rounds_campaign(4, 3).sel(library=["before"]), rounds_campaign(5, 3).sel(library=["after"]))
    assert not result["paired"].any() and "unpaired" in result.attrs["method"]


def test_moderated_variances_keep_their_p_values_calibrated_and_add_degrees_of_freedom():
    """Per-round ratios with a shift shared by every size of a round and noise per size: over 200 null
    curve pairs the moderated test rejects at most its level of cells at 0.05 and far fewer at 0.001 (the
    tail the many-cell adjustment tests in; the degrees of freedom are taken at the shared part's upper
    bound, which spends a little of 0.05), with more than the 2 degrees of freedom of three rounds."""
    rng = np.random.default_rng(0)
    rejected, tail, dof = [], [], []
    for _ in range(200):
        ratios = 0.03 * rng.standard_normal((4, 1, 3)) + 0.02 * rng.standard_normal((4, 20, 3))
        test = paired_test(ratios)
        p = 2 * scipy.stats.t.sf(np.abs(test["diff"]) / np.sqrt(test["se2"]), test["dof"])
        rejected.append(np.mean(p < 0.05))
        tail.append(np.mean(p < 0.001))
        dof.append(np.median(test["dof"]))
    assert 0.02 < np.mean(rejected) < 0.06 and np.mean(tail) < 0.002
    assert np.median(dof) > 2.5


def test_inverse_trigamma_inverts():
    x = np.array([0.01, 0.5, 1.0, 10.0, 1000.0])
    np.testing.assert_allclose(scipy.special.polygamma(1, inverse_trigamma(x)), x, rtol=1e-6)


def test_single_value_rows_give_their_ratio_and_no_verdict(tmp_path, capsys):
    """Two imported osu_latency outputs: one value a side per size, no spread: the ratio, no interval,
    no p value, never a call; the compare command prints the ratio per size and writes it."""
    osu = DATA / "osu-7.4"
    mpich = import_files([osu / "osu_latency-mpich-5.0.2-1N2P.txt"], "osu", "mpich-5.0.2", "1N2P")
    ompi = import_files([osu / "osu_latency-openmpi-5.0.11-1N2P.txt"], "osu", "openmpi-5.0.11", "1N2P")
    result = across(mpich, ompi).squeeze()
    assert set(result["verdict"].values.tolist()) == {NO_SPREAD}
    expected = ompi["median"].squeeze().values / mpich["median"].squeeze().values
    np.testing.assert_allclose(result["ratio"], expected)
    assert result["ratio_low"].isnull().all() and result["p_value"].isnull().all()
    assert result["q_value"].isnull().all() and "over 0 launch-level cells" in result.attrs["multiple_testing"]
    paths = []
    for name, ds in (("mpich", mpich), ("ompi", ompi)):
        paths.append(tmp_path / f"{name}.nc")
        ds.to_netcdf(paths[-1])
    assert cli.main(["compare", *map(str, paths), "--output", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr().out
    assert f"{result.sizes['size']} {NO_SPREAD}" in out
    assert "[" not in out.split("no spread")[-1]                        # no interval printed
    rows = json.loads((tmp_path / "t.json").read_text())
    assert len(rows) == result.sizes["size"] and {row["verdict"] for row in rows} == {NO_SPREAD}


def test_alpha_spending_spends_the_false_discovery_rate_once_over_the_looks():
    """The looks' levels, from their joint law: on paths drawn apart from the ones they were worked out on,
    the chance that any look crosses when nothing changed is alpha, where their sum (what the union bound
    spent) is far more; the last look keeps most of alpha, to find what a fixed design finds."""
    levels = look_levels(3, 8, 0.05)
    assert list(levels) == [3, 4, 5, 6, 7, 8] and min(levels.values()) > 0
    assert list(levels.values()) == sorted(levels.values())              # later looks get more
    assert levels[8] > 0.035 and sum(levels.values()) > 0.08
    sums = np.cumsum(np.random.default_rng(12345).standard_normal((100_000, 8)), axis=1)
    crossed = np.zeros(len(sums), bool)
    for rounds, level in levels.items():
        crossed |= np.abs(sums[:, rounds - 1]) / np.sqrt(rounds) > scipy.stats.norm.isf(level / 2)
    assert crossed.mean() == pytest.approx(0.05, abs=0.003)


def test_a_large_change_is_decided_at_the_first_look_and_the_budget_ends_the_rest():
    # 1.6 times: three rounds' launch-level test at the first look's false coverage-rate level decides it
    # beyond the margin (1.3 times is called slower there, its size left open).
    ds = rounds_campaign(6, 4, 1.6, syn.Drift(ramp=0.2))
    first = after_round(ds.isel(launch=slice(0, 3)), "before", "after", min_rounds=3, max_rounds=4)
    planted = (first.verdict["size"] >= 1024) & (first.verdict["size"] <= 16384)
    assert first.rounds == 3
    assert (first.verdict.where(planted) == "regressed").sum() == planted.sum() * len(KERNELS)
    assert (first.decided_at.where(planted) == 3).sum() == planted.sum() * len(KERNELS)
    assert not (first.could_reach & planted).any()
    assert not first.verdict.where(~planted).isin(["regressed", "improved"]).any()
    last = after_round(ds, "before", "after", min_rounds=3, max_rounds=4)
    assert not last.more and "budget of 4 rounds" in last.reason
    assert (last.verdict.where(planted) == "regressed").sum() == planted.sum() * len(KERNELS)
    undecided = int((last.verdict == UNDECIDED).sum())
    assert undecided + sum(int((last.verdict == v).sum()) for v in ("regressed", "unchanged")) == last.verdict.size
    # What a report shows: each decided cell as the look that decided it saw it, the rest as the last look.
    shown, decided = last.result, last.decided_at > 0
    assert (shown["verdict"] == last.verdict).where(decided, True).all()
    assert shown["verdict"].where(~decided).isin(["inconclusive", "missing", "no spread"]).where(~decided, True).all()
    at_first = (last.decided_at == 3).values
    np.testing.assert_allclose(shown["ratio"].values[at_first], first.result["ratio"].values[at_first])
    assert (shown["decided_at"] == last.decided_at).all()
    assert "0.05 (rounds/4)^3" in shown.attrs["multiple_testing"] and shown.attrs["confidence"] == 0.95


def test_before_the_first_look_more_rounds_are_asked_for_and_a_dataset_without_rounds_is_refused():
    ds = rounds_campaign(7, 2)
    assert after_round(ds, "before", "after", min_rounds=3, max_rounds=6).more
    with pytest.raises(ValueError, match="no `round` variable"):
        after_round(ds.drop_vars("round"), "before", "after")


def test_benjamini_hochberg_ignores_untested_cells():
    p = np.array([0.001, np.nan, 0.04])
    np.testing.assert_allclose(benjamini_hochberg(p)[[0, 2]], scipy.stats.false_discovery_control([0.001, 0.04]))


def test_a_recorded_bisection_is_printed_under_the_pair_whose_candidate_runs_its_release():
    """A campaign's bisect: record (tests/data/bisect: commlens bisect of MPICH 4.3.2 -> 5.0.2 on this
    machine, 5 launches a side) goes with the comparison whose candidate row runs mpich-5.0.2, and with
    no other: what it found, and each step's outcome and ratio, as recorded."""
    from commlens.report.analysis_table import ReportData
    from commlens.report.comparisons import library_row_comparisons

    record = json.loads((DATA / "bisect" / "mpich-4.3.2-to-mpich-5.0.2.json").read_text())
    ds = rounds_campaign(8, 3, 1.3)
    ds.attrs["bisections"] = json.dumps([record, {"baseline": "openmpi-4.1.8", "candidate": "openmpi-5.0.11",
                                                  "error": "no spec envs/mpi/openmpi-4.1.8.yaml"}])
    for candidate_mpi, expected in (("mpich-5.0.2", 1), ("openmpi-5.0.11", 1), ("mpich-5.0.1", 0)):
        ds.attrs["campaign_config"] = json.dumps({
            "libraries": {"before": {"mpi": "mpich-4.3.2"}, "after": {"mpi": candidate_mpi}},
            "compare": [{"baseline": "before", "candidate": "after"}], "launches": 3})
        [comparison] = library_row_comparisons(ReportData(ds))
        assert len(comparison.causes) == expected, comparison.causes
    [comparison] = library_row_comparisons(ReportData(ds.assign_attrs(campaign_config=json.dumps({
        "libraries": {"before": {"mpi": "mpich-4.3.2"}, "after": {"mpi": "mpich-5.0.2"}},
        "compare": [{"baseline": "before", "candidate": "after"}], "launches": 3}))))
    [cause] = comparison.causes
    assert cause.startswith("Which release: commlens bisect from mpich-4.3.2 to mpich-5.0.2, watching "
                            "pingpong.send 1N2P 8 B, 5 launches a side per step: the change appears after "
                            "mpich-4.3.2, in one of mpich-5.0.0, mpich-5.0.1, mpich-5.0.2"), cause
    assert "Steps: mpich-5.0.2 changed, ratio 3.02 [1.62, 5.62]; mpich-5.0.0 undecided, ratio 3.41" in cause, cause
