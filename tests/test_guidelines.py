"""Guideline checks against synthetic campaigns with known violations, and with none.

A campaign of two libraries on one placement of four ranks, every kernel a latency-bandwidth
curve over powers of two; the clean campaign keeps every guideline with room to spare (each
collective well under its mock-up, Ssend slower than Send). Each violation is planted so
that it breaks one guideline over a known size range and no other.
"""

import pytest

import commlens.analysis  # noqa: F401  (registers ds.commlens)
from commlens.analysis import guidelines
from commlens.data import synthetic as syn

from test_models import HEAVY

GRID = syn.powers_of_two(1, 2**20)
RANKS = 4
# Bcast(n) 4 us + n / 4 GB/s against Scatter(n/4) + Allgather(n/4): 7 us + n (1/8 + 1/4) / 1 GB/s;
# Allreduce against Reduce + Bcast: 7 us + n (1/3 + 1/4) / 1 GB/s; Allgather(n) against
# Gather(n) + Bcast(4n): 7 us + 1.5 n / 1 GB/s.
TRUTHS = {
    "coll.bcast": syn.GroundTruth(4e-6, 4e9), "coll.scatter": syn.GroundTruth(3e-6, 2e9),
    "coll.allgather": syn.GroundTruth(4e-6, 1e9), "coll.reduce": syn.GroundTruth(3e-6, 3e9),
    "coll.allreduce": syn.GroundTruth(5e-6, 2e9), "coll.gather": syn.GroundTruth(3e-6, 2e9),
    "pingpong.send": syn.GroundTruth(1e-6, 5e9), "pingpong.ssend": syn.GroundTruth(1.5e-6, 5e9),
    "pingpong.isend": syn.GroundTruth(1.2e-6, 5e9),
}
QUIET = syn.Noise(0.01, launch_relative=0.01, **HEAVY)


def campaign(scaled=(), truths=None, noise=QUIET, seed=0, launches=5, nprocs=True):
    """The campaign, with times multiplied by `factor` for each (library, kernel, low, high,
    factor) of `scaled` between sizes low and high."""
    cubes = {}
    for k, (kernel, truth) in enumerate({**TRUTHS, **(truths or {})}.items()):
        for i, library in enumerate(("lib-a", "lib-b")):
            times = syn.generate(GRID, truth, noise, n_samples=20, n_launches=launches,
                                 seed=1000 * seed + 10 * k + i).times
            for lib, name, low, high, factor in scaled:
                if (lib, name) == (library, kernel):
                    times[(GRID >= low) & (GRID <= high)] *= factor
            cubes[library, f"1N{RANKS}P", kernel] = (GRID, times)
    ds = syn.dataset_from_cubes(cubes)
    return ds.assign_coords(nprocs=("placement", [RANKS])) if nprocs else ds


def rows(table) -> list[tuple]:
    return sorted(table[["library", "kernel", "guideline", "size_from", "size_to"]].itertuples(index=False, name=None))


def test_a_clean_campaign_keeps_every_guideline_and_the_table_has_its_columns():
    table = campaign().commlens.guidelines()
    assert table.empty and list(table.columns) == list(guidelines.COLUMNS)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_launch_to_launch_noise_alone_breaks_no_guideline(seed):
    noisy = syn.Noise(0.02, launch_relative=0.03, launch_point_relative=0.02, **HEAVY)
    for launches in (None, 3, 5):
        assert campaign(noise=noisy, seed=seed, launches=launches).commlens.guidelines().empty, launches


def test_time_that_drops_with_size_breaks_monotony_at_that_size():
    # A latency 4 us lower from 8 KiB on: 8 KiB takes 7.6 us, 4 KiB 10.8 us.
    dropping = syn.GroundTruth(10e-6, 5e9, switches=(syn.Switch(8192, -4e-6, 5e9),))
    table = campaign(truths={"pingpong.isend": dropping}).commlens.guidelines()
    assert rows(table) == [("lib-a", "pingpong.isend", "monotony", 8192, 8192),
                           ("lib-b", "pingpong.isend", "monotony", 8192, 8192)]
    row = table.iloc[0]
    assert (row["kind"], row["measured"], row["reference"]) == ("guideline", "pingpong.isend",
                                                                "pingpong.isend at 4096 B")
    at_8k, at_4k = dropping.clean_time_s([8192, 4096])
    assert row["ratio_low"] < at_8k / at_4k < row["ratio_high"] < 0.95
    assert row["q_value"] < 0.05


# Each collective slowed down over 64 KiB .. 256 KiB by a factor that takes it 20% or more over its
# mock-up, but not so far that the size after the range (512 KiB) would be faster.
MOCK_UP_CASES = [
    ("coll.bcast", "coll.scatter(n/4) + coll.allgather(n/4)"),
    ("coll.allreduce", "coll.reduce(n) + coll.bcast(n)"),
    ("coll.allgather", "coll.gather(n) + coll.bcast(4n)"),
]


@pytest.mark.parametrize("kernel, reference", MOCK_UP_CASES)
def test_a_collective_slower_than_its_mock_up_is_found_over_its_size_range(kernel, reference):
    table = campaign(scaled=[("lib-b", kernel, 65536, 262144, 1.85)]).commlens.guidelines()
    assert rows(table) == [("lib-b", kernel, "mock-up", 65536, 262144)]
    row = table.iloc[0]
    assert (row["measured"], row["reference"], row["sizes"]) == (f"{kernel}(n)", reference, 3)
    assert 1.1 < row["ratio_low"] < row["ratio"] < row["ratio_high"]


def test_mock_ups_that_scale_sizes_by_the_ranks_need_the_number_of_ranks():
    scaled = [("lib-b", name, 65536, 262144, 1.8) for name in ("coll.allgather", "coll.allreduce")]
    table = campaign(scaled=scaled, nprocs=False).commlens.guidelines()
    assert rows(table) == [("lib-b", "coll.allreduce", "mock-up", 65536, 262144)]


def test_ssend_faster_than_send_is_found_over_its_size_range():
    table = campaign(scaled=[("lib-a", "pingpong.ssend", 131072, 524288, 0.8)]).commlens.guidelines()
    assert rows(table) == [("lib-a", "pingpong.ssend", "ssend", 131072, 524288)]
    row = table.iloc[0]
    assert (row["measured"], row["reference"]) == ("pingpong.ssend", "pingpong.send")
    assert row["ratio_low"] < row["ratio"] < row["ratio_high"] < 0.95


def test_variants_are_held_against_the_same_variant_only():
    # pingpong.ssend@small is as fast as pingpong.send, and far faster than pingpong.send@small.
    table = campaign(truths={"pingpong.ssend@small": TRUTHS["pingpong.send"],
                             "pingpong.send@small": syn.GroundTruth(1.5e-6, 2.5e9)}).commlens.guidelines()
    assert rows(table) == [(library, "pingpong.ssend@small", "ssend", 1, 2**20) for library in ("lib-a", "lib-b")]
    assert set(table["reference"]) == {"pingpong.send@small"}


def test_guidelines_need_the_per_point_statistics():
    with pytest.raises(ValueError, match="per-point statistics"):
        guidelines.check(campaign().drop_vars("median"))
