"""commlens.analysis.compare on synthetic curves whose differences are known, and the compare command."""

import json
import re

import numpy as np
import pytest
import scipy.stats

from commlens import cli
from commlens.data import synthetic as syn
from commlens.analysis.compare import CALLS, across, benjamini_hochberg, provenance_differences, verdict_counts
from commlens.analysis.ranges import changed_ranges, describe_range

GRID = syn.powers_of_two(1, 2**20)                                     # 21 sizes
TRUTH = syn.GroundTruth(2e-6, 5e9, switches=(syn.Switch(16384, 4e-6, 8e9),))
# Launch-to-launch shifts several times the within-launch spread, as real nodes show.
NOISE = syn.Noise(relative=0.01, tail_df=3, outlier_fraction=0.01, outlier_scale=3, launch_relative=0.03)


def draw(seed, launches=5, change=None, samples=60):
    """One curve of TRUTH; `change` = (factor, low, high) multiplies the times of those sizes."""
    curve = syn.generate(GRID, TRUTH, NOISE, n_samples=samples, n_launches=launches, seed=seed)
    return syn.with_change(curve, *change) if change else curve


def campaign(seed, launches=5, change=None, kernels=("pingpong.send", "stream.uni")):
    """Two library rows, `before` and `after`, over two kernels; `after` carries the change."""
    curves = {}
    for k, kernel in enumerate(kernels):
        curves["before", "1N2P", kernel] = draw(seed * 100 + 2 * k, launches)
        curves["after", "1N2P", kernel] = draw(seed * 100 + 2 * k + 1, launches, change)
    return syn.campaign_dataset(curves)


def test_benjamini_hochberg_matches_scipy():
    p = np.random.default_rng(0).uniform(size=200) ** 3
    p[[3, 50]] = np.nan
    q = benjamini_hochberg(p)
    finite = np.isfinite(p)
    np.testing.assert_allclose(q[finite], scipy.stats.false_discovery_control(p[finite]))
    assert np.isnan(q[~finite]).all()


def test_same_truth_twice_changes_nothing():
    """A/A: 20 campaigns of 42 cells, 5 launches a side: no cell called a change, in either form."""
    called = 0
    for seed in range(20):
        result = campaign(seed).commlens.compare(baseline="before", candidate="after")
        counts = verdict_counts(result)
        called += sum(counts[verdict] for verdict in CALLS)
        assert counts["missing"] == 0 and counts["unchanged"] + counts["inconclusive"] == 42
    assert called == 0


@pytest.mark.parametrize("factor", [1.3, 1 / 1.3, 1.1])
def test_a_planted_change_is_found_over_its_size_range(factor):
    """Both polarities: slower and faster over 4 KiB .. 64 KiB (across the protocol switch)."""
    result = campaign(7, change=(factor, 4096, 65536)).commlens.compare(baseline="before", candidate="after")
    ranges = changed_ranges(result)
    # Beyond the 5% margin where the interval shows it; a change of a size the interval leaves open otherwise.
    expected = ("regressed", "slower") if factor > 1 else ("improved", "faster")
    assert set(ranges["kernel"]) == set(result["kernel"].values)   # every kernel's change, nothing else
    assert ranges["verdict"].isin(expected).all()
    for _, kernel in ranges.groupby("kernel"):
        assert kernel["size_from"].min() == 4096 and kernel["size_to"].max() == 65536
        assert kernel["sizes"].sum() == np.count_nonzero((result["size"] >= 4096) & (result["size"] <= 65536))
    assert np.allclose(ranges["ratio"], factor, rtol=0.03)
    assert ((ranges["ratio_low"] <= factor * 1.01) & (ranges["ratio_high"] >= factor / 1.01)).all()
    line = describe_range(ranges.iloc[0])
    assert line.startswith("pingpong.send 1N2P: 4 KiB–64 KiB") and ("slower" if factor > 1 else "faster") in line


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_a_range_is_split_where_the_ratio_steps(seed):
    """A known step in the ratio within one run of improved sizes: 0.4 up to 512 B, 0.85 from 1 KiB
    to 128 KiB. Two ranges, each with its own ratio, never one range pooling both."""
    ds = campaign(seed)
    after = syn.with_change(syn.with_change(draw(seed * 100 + 1), 0.4, 1, 512), 0.85, 1024, 131072)
    ds = syn.campaign_dataset({("before", "1N2P", "pingpong.send"): draw(seed * 100),
                               ("after", "1N2P", "pingpong.send"): after})
    ranges = changed_ranges(ds.commlens.compare(baseline="before", candidate="after"))
    assert ranges[["size_from", "size_to"]].values.tolist() == [[1, 512], [1024, 131072]], ranges
    assert (ranges["verdict"] == "improved").all()
    np.testing.assert_allclose(ranges["ratio"], [0.4, 0.85], rtol=0.05)


def test_one_launch_cannot_tell_a_moderate_change_from_launch_noise():
    """With one launch a side a 10% change is inconclusive (a launch shift could make it); a 3x
    change dwarfs the within-launch spread and is called."""
    moderate = campaign(3, launches=1, change=(1.1, 4096, 65536)).commlens.compare(baseline="before",
                                                                                   candidate="after")
    assert set(moderate["basis"].values.ravel()) == {"one launch"}
    assert verdict_counts(moderate)["regressed"] == 0 and verdict_counts(moderate)["unchanged"] == 0
    huge = campaign(3, launches=1, change=(3.0, 4096, 65536)).commlens.compare(baseline="before",
                                                                               candidate="after")
    ranges = changed_ranges(huge)
    assert list(ranges["verdict"]) == ["regressed"] * 2 and (ranges["size_from"] == 4096).all()


def test_two_kernels_of_one_dataset_and_cells_without_data():
    ds = campaign(4, kernels=("pingpong.send", "pingpong.ssend"))
    ds["sample_count"].loc[dict(library="after", kernel="pingpong.ssend", size=8)] = 0
    result = ds.commlens.compare(baseline="pingpong.send", candidate="pingpong.ssend")
    assert result["verdict"].dims == ("library", "placement", "size")
    assert result.attrs["compared"] == "kernel"
    assert result["verdict"].sel(library="after", placement="1N2P", size=8) == "missing"
    with pytest.raises(ValueError, match="not both rows of one dim"):
        ds.commlens.compare(baseline="pingpong.send", candidate="mpich")


def test_across_campaigns_maps_library_rows_and_warns_on_provenance():
    base, cand = campaign(5), campaign(6, change=(1.3, 1, 8))
    base.attrs.update(hosts="node1", cpu_model="A")
    cand.attrs.update(hosts="node1", cpu_model="B")
    assert provenance_differences(base, cand) == ["cpu_model: 'A' against 'B'"]
    result = across(base.sel(library=["before"]), cand.sel(library=["after"]), {"before": "after"})
    assert list(result["library"].values) == ["after"]
    assert set(changed_ranges(result)["size_to"]) == {8}
    with pytest.raises(ValueError, match="share no library row"):
        across(base, cand.assign_coords(library=["x", "y"]))
    with pytest.raises(ValueError, match="the baseline has no library row 'nope'; its rows: after, before"):
        across(base, cand, {"nope": "after"})
    # A typo on the candidate's side once compared a row with itself: refused, with the nearest name.
    with pytest.raises(ValueError, match=r"the candidate has no library row 'aftr' \(did you mean 'after'\?\)"):
        across(base, cand, {"before": "aftr"})


def test_compare_command_gates_a_regression(tmp_path, capsys):
    base, cand = campaign(8), campaign(9, change=(1.3, 1024, 8192))
    for name, ds in (("base", base), ("cand", cand)):
        ds.attrs.update(commlens_version="test", hosts=name)
        ds.to_netcdf(tmp_path / f"{name}.nc")
    output = tmp_path / "changes.json"
    args = [str(tmp_path / "base.nc"), str(tmp_path / "cand.nc"), "--output", str(output)]
    assert cli.main(["compare", *args]) == 0
    assert cli.main(["compare", *args, "--fail-on", "regressed"]) == 1
    assert cli.main(["compare", *args, "--fail-on", "improved"]) == 0
    out, err = capsys.readouterr()
    assert re.search(r"regressed  after pingpong.send 1N2P: 1 KiB–8 KiB 1\.3x slower "
                     r"\[time ratio 1\.\d+-1\.\d+\]", out), out
    assert "warning: measured differently: hosts: 'base' against 'cand'" in err
    rows = json.loads(output.read_text())
    assert {(row["kernel"], row["size_from"], row["size_to"]) for row in rows} == {
        ("pingpong.send", 1024, 8192), ("stream.uni", 1024, 8192)}
    assert cli.main(["compare", *args, "--map", "nonsense"]) == 2
