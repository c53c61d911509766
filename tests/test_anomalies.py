"""The anomaly detectors against synthetic curves with known anomalies, and with none.

Expected sizes, periods, moduli and magnitudes all come from the ground truth
the curve was generated from; every curve has a fixed seed.
"""

import numpy as np
import pytest

import commlens.analysis  # noqa: F401  (registers ds.commlens)
from commlens.analysis import anomalies
from commlens.analysis.models import fit_piecewise
from commlens.data import synthetic as syn
from commlens.data.samples import POINT_DIMS

from test_models import HEAVY, grid_index_error, match_breakpoints, switch_sweep, true_first_sizes

CLEAN_GRIDS = {
    "powers": syn.powers_of_two(1, 4 * 2**20),
    "netpipe": syn.netpipe(1, 4 * 2**20),
    "netpipe-3": syn.netpipe(1, 4 * 2**20, per_octave=3, perturbation=1),
    "linear": syn.linear(1024, 2**20, 8192),
    "small": syn.linear(4, 8000, 32),
    "dense": syn.linear(8, 6000, 8),
    "random": syn.log_uniform(1, 4 * 2**20, 60, seed=3),
}
MACHINES = [syn.GroundTruth(0.4e-6, 20e9), syn.GroundTruth(3e-6, 5e9), syn.GroundTruth(30e-6, 1.2e8)]


def kinds(table) -> list[str]:
    return sorted(table["kind"])


# --------------------------------------------------------------------------- no false positives

def clean_sweep():
    """Single-segment curves over grids, machines, noise levels and tails, with and without launches."""
    noises = [
        syn.Noise(0.003, tail_df=np.inf, outlier_fraction=0.0),
        syn.Noise(0.01, **HEAVY),
        syn.Noise(0.03, tail_df=2.5, outlier_fraction=0.05, outlier_scale=20.0, launch_relative=0.01),
    ]
    for g, (grid_name, grid) in enumerate(CLEAN_GRIDS.items()):
        for m, truth in enumerate(MACHINES):
            for n, noise in enumerate(noises):
                launches = (None, 3, 5)[(g + m + n) % 3]
                samples = (10, 30, 100)[(g + 2 * m + n) % 3]
                yield grid_name, noise, syn.generate(grid, truth, noise, n_samples=samples, n_launches=launches,
                                                     seed=100 * g + 10 * m + n)


def test_clean_single_segment_curves_give_no_findings_at_all():
    false_positives = []
    for grid_name, noise, curve in clean_sweep():
        found = anomalies.detect(curve.sizes, curve.times)
        if len(found):
            false_positives.append((grid_name, noise, found.to_dict("records")))
    assert false_positives == []


def test_no_findings_is_an_empty_table_with_the_columns():
    curve = syn.generate(CLEAN_GRIDS["powers"], MACHINES[1], syn.Noise(0.01), n_samples=20, seed=1)
    found = anomalies.detect(curve.sizes, curve.times)
    assert found.empty and list(found.columns) == list(anomalies.COLUMNS)
    too_short = anomalies.detect([8, 16, 32], np.ones((3, 4)))
    assert too_short.empty and list(too_short.columns) == list(anomalies.COLUMNS)


# --------------------------------------------------------------------------- protocol switches

def jumps(truth, switch) -> float:
    """How much the planted curve's time jumps at a switch, relative to its time just below it: a new
    bandwidth from a size on moves the whole message to it, so a slope change alone jumps too."""
    before = [s for s in truth.switches if s.size_bytes < switch.size_bytes]
    latency = truth.latency_s + sum(s.latency_jump_s for s in before)
    bandwidth = before[-1].bandwidth_Bps if before else truth.bandwidth_Bps
    below = latency + switch.size_bytes / bandwidth
    return abs(latency + switch.latency_jump_s + switch.size_bytes / switch.bandwidth_Bps - below) / below


def test_protocol_switches_within_one_grid_step_with_recall_and_precision_over_90_percent():
    """Every breakpoint found within one grid step (recall and precision over 90%), and named for what it
    is: a switch where the time jumps there, a regime change where only the bandwidth changes (a slope
    change alone, the two lines meeting between two sizes, is no switch)."""
    true_total = hits_total = found_total = correct_total = named = named_right = 0
    other_kinds = []
    breakpoints = {"protocol_switch", "regime_change"}
    for _grid_name, _noise_level, truth, curve in switch_sweep():
        found = anomalies.detect(curve.sizes, curve.times)
        found_breaks = found[found["kind"].isin(breakpoints)]
        other_kinds += sorted(set(found["kind"]) - breakpoints)
        truth_firsts = true_first_sizes(curve.sizes, truth)
        hits, correct = match_breakpoints(curve.sizes, found_breaks["size"].astype(int).tolist(), truth_firsts)
        true_total += len(truth_firsts)
        found_total += len(found_breaks)
        hits_total += hits
        correct_total += correct
        for switch in truth.switches:
            first = int(curve.sizes[min(np.searchsorted(curve.sizes, switch.size_bytes), curve.sizes.size - 1)])
            if first not in truth_firsts:
                continue
            expected = "protocol_switch" if jumps(truth, switch) >= anomalies.PRACTICAL["protocol_switch"] else \
                "regime_change"
            at = [row.kind for row in found_breaks.itertuples() if grid_index_error(curve.sizes, row.size, first) <= 1]
            if at:
                named += 1
                named_right += at[0] == expected
    recall, precision = hits_total / true_total, correct_total / found_total
    print(f"breakpoints: recall {recall:.3f} ({hits_total}/{true_total}), precision {precision:.3f} "
          f"({correct_total}/{found_total}); named for what they are: {named_right}/{named}")
    assert recall >= 0.9 and precision >= 0.9
    assert named_right >= 0.9 * named
    assert other_kinds == []


def test_protocol_switch_reports_the_jump_and_both_bandwidths():
    truth = syn.GroundTruth(2e-6, 5e9, switches=(syn.Switch(65536, 8e-6, 9e9),))
    grid = syn.netpipe()
    curve = syn.generate(grid, truth, syn.Noise(0.01, **HEAVY), n_samples=40, n_launches=3, seed=21)
    found = anomalies.detect(curve.sizes, curve.times)
    assert kinds(found) == ["protocol_switch"]
    switch = found.iloc[0]
    assert (switch["size_low"], switch["size"], switch["size_high"]) == (grid[grid < 65536][-1], 65536, 65536)
    jump = truth.clean_time_s([65536])[0] - (2e-6 + 65536 / 5e9)
    assert switch["magnitude"] == pytest.approx(jump, rel=0.1)
    assert switch["bandwidth_before_Bps"] == pytest.approx(5e9, rel=0.05)
    assert switch["bandwidth_after_Bps"] == pytest.approx(9e9, rel=0.05)
    assert switch["score"] >= 6


@pytest.mark.parametrize("launch_level", [0.2, 0.3])
def test_a_switch_every_launch_shows_is_found_though_whole_launches_differ_in_level(launch_level):
    """The 32 KiB eager limit as Open MPI shows it between two virtual nodes: +32% at the switch,
    five launches whose levels differ by 20-30% at every size, each point off by a further 8% (both
    measured there). Before launches were brought to a common level, 17 of these 30 curves gave the
    switch; the median across launches took a different launch at each size."""
    grid = syn.linear(8192, 65536, 2048)
    truth = syn.GroundTruth(11e-6, 735e6, switches=(syn.Switch(32768, 35e-6, 1.2e9),))
    noise = syn.Noise(0.07, tail_df=3, launch_relative=launch_level, launch_point_relative=0.08)
    for seed in range(30):
        curve = syn.generate(grid, truth, noise, n_samples=50, n_launches=5, seed=seed)
        found = anomalies.detect(curve.sizes, curve.times)
        assert kinds(found) == ["protocol_switch"], (seed, found)
        assert found.iloc[0]["size"] == 32768, (seed, found)


# The 32 KiB eager limit as Open MPI shows it between two virtual nodes (a 2-core host): 8.4 us and
# 1.25 GB/s below it, 24 us more and 2 GB/s from it on (15 us at 8 KiB, 33 us at 30 KiB, 59 us at 32 KiB).
EAGER_32K = syn.GroundTruth(8.4e-6, 1.25e9, switches=(syn.Switch(32768, 24e-6, 2.0e9),))
EAGER_GRID = syn.linear(8192, 65536, 2048)
EAGER_NOISE = syn.Noise(0.01, tail_df=3, launch_relative=0.05, launch_point_relative=0.03)


@pytest.mark.parametrize("factor", [0.6, 1 / 0.6])
def test_a_switch_is_found_though_the_host_changed_speed_part_way_through_launches(factor):
    """That host ran the first 2 to 18 of a launch's 29 points at 0.6 times the time of the rest in 6
    of 104 launches, and 19 wholly so; here every launch changes, at a point drawn from none to all of
    its points (`factor` 0.6; the reverse, 1 / 0.6, as well).
    The sizes are shuffled per launch, so each size's median across launches mixes the two speeds.
    With the points' positions each launch is levelled along its measurement order, and the switch is
    found in every one of these curves, at its size, and nothing else (of 200 seeds: at its size in 200,
    something else as well in 3); from the times alone at its size in 19 of these 30 (64-66 of 100),
    and something else in 3-5 of 30 (13-15 of 100)."""
    found_alone = 0
    for seed in range(30):
        curve = syn.generate(EAGER_GRID, EAGER_32K, EAGER_NOISE, n_samples=50, n_launches=8, seed=seed)
        times, positions = syn.with_spell(curve, syn.Spell(factor), seed=seed)
        found = anomalies.detect(curve.sizes, times, positions=positions)
        assert kinds(found) == ["protocol_switch"] and found.iloc[0]["size"] == 32768, (seed, found)
        alone = anomalies.detect(curve.sizes, times)
        found_alone += kinds(alone) == ["protocol_switch"] and alone.iloc[0]["size"] == 32768
    assert found_alone <= 25, found_alone


def test_a_host_that_changed_speed_part_way_through_launches_makes_no_finding_of_a_clean_curve():
    """The same host under the curve without its switch: levelled along each launch's order, nothing is
    found in any of these 60 curves, and in 1 of 200 seeds (seed 73, which finds the same without the
    spell); from the times alone something in 8 of the 60 (16 of 100 either way round)."""
    clean = syn.GroundTruth(EAGER_32K.latency_s, EAGER_32K.bandwidth_Bps)
    for factor in (0.6, 1 / 0.6):
        for seed in range(30):
            curve = syn.generate(EAGER_GRID, clean, EAGER_NOISE, n_samples=50, n_launches=8, seed=seed)
            times, positions = syn.with_spell(curve, syn.Spell(factor), seed=seed)
            assert kinds(anomalies.detect(curve.sizes, times, positions=positions)) == [], (factor, seed)


def test_a_dataset_s_anomalies_level_each_launch_along_the_positions_it_recorded():
    """ds.commlens.anomalies() reads where each point was measured from the dataset's `position`: seed
    2's curve gives its switch at 32 KiB with them, and from the times alone nothing."""
    curve = syn.generate(EAGER_GRID, EAGER_32K, EAGER_NOISE, n_samples=50, n_launches=8, seed=2)
    times, positions = syn.with_spell(curve, syn.Spell(0.6), seed=2)
    ds = syn.dataset_from_cubes({("lib", "2N1P", "pingpong.send"): (curve.sizes, times)})
    assert len(ds.commlens.anomalies()) == 0
    ds["position"] = (POINT_DIMS, positions[None, None, None])
    found = ds.commlens.anomalies()
    assert list(found["kind"]) == ["protocol_switch"] and found.iloc[0]["size"] == 32768, found


def test_the_sizes_a_fit_leaves_out_before_a_switch_stay_before_it():
    """A real curve, the per-size medians of eight launches of Open MPI's ping-pong between two virtual
    nodes with a 32 KiB eager limit (us): the three sizes before the switch curve up from the line below
    it, a little, and were left out of the fit. The switch was then placed where they begin, at 26 KiB,
    by the detector and by the piecewise model; it is at 32 KiB."""
    microseconds = [8.91, 14.16, 9.84, 14.95, 15.43, 15.80, 16.31, 16.58, 17.09, 17.38, 17.85, 19.97, 37.61,
                    37.85, 38.21, 38.43, 38.71, 39.13, 39.34, 39.68, 39.91, 40.20, 40.63, 40.67, 41.03, 41.23,
                    41.69, 41.84, 48.44]
    times = np.array(microseconds)[:, None] * 1e-6
    switches = anomalies.detect(EAGER_GRID, times).query("kind == 'protocol_switch'")
    assert list(switches["size"]) == [32768] and list(switches["size_low"]) == [30720]
    assert fit_piecewise(EAGER_GRID, times).breakpoints_bytes == (32768,)


# --------------------------------------------------------------------------- packet steps

PACKET_CASES = [
    # payload, overhead bytes, header bytes, latency, bandwidth, grid step, noise
    (1448, 66, 0, 20e-6, 12.5e6, 8, 0.01),
    (1448, 66, 24, 20e-6, 12.5e6, 8, 0.01),
    (1460, 54, 0, 10e-6, 1.2e8, 8, 0.003),
    (536, 40, 0, 2e-6, 1.2e9, 4, 0.003),
    (988, 52, 100, 5e-6, 3e8, 4, 0.01),
]


@pytest.mark.parametrize("payload, overhead, header, latency, bandwidth, step, noise", PACKET_CASES)
def test_packet_steps_period_is_the_payload_exactly_on_a_dense_grid(payload, overhead, header, latency,
                                                                     bandwidth, step, noise):
    truth = syn.GroundTruth(latency, bandwidth, packets=syn.Packets(payload, overhead, header))
    grid = syn.linear(step, (step + 3) * payload, step)
    curve = syn.generate(grid, truth, syn.Noise(noise, **HEAVY), n_samples=30, n_launches=3, seed=payload + header)
    found = anomalies.detect(curve.sizes, curve.times)
    assert kinds(found) == ["packet_steps"], found
    steps = found.iloc[0]
    assert steps["period"] == payload and (steps["period_low"], steps["period_high"]) == (payload, payload)
    # The first step: the first size that needs a second packet.
    first = grid[grid + header > payload][0]
    assert (steps["size_low"], steps["size"], steps["size_high"]) == (grid[grid < first][-1], first, first)
    assert steps["magnitude"] == pytest.approx(truth.packet_step_s, rel=0.2)


def test_packet_steps_survive_a_protocol_switch_beyond_them():
    truth = syn.GroundTruth(20e-6, 12.5e6, packets=syn.Packets(1448, 66),
                            switches=(syn.Switch(12288, 150e-6, 12.5e6),))
    grid = syn.linear(8, 11 * 1448, 8)
    curve = syn.generate(grid, truth, syn.Noise(0.005, **HEAVY), n_samples=30, n_launches=3, seed=5)
    found = anomalies.detect(curve.sizes, curve.times)
    assert kinds(found) == ["packet_steps", "protocol_switch"], found
    assert found.set_index("kind").loc["packet_steps", "period"] == 1448
    assert found.set_index("kind").loc["protocol_switch", "size"] == 12288


def test_a_single_jump_or_periodic_slow_sizes_are_not_packet_steps():
    jump = syn.GroundTruth(20e-6, 12.5e6, switches=(syn.Switch(4096, 100e-6, 12.5e6),))
    slow = syn.GroundTruth(2e-6, 5e9, alignment=syn.Alignment(256, 0.5e-6))
    for truth in (jump, slow):
        curve = syn.generate(syn.linear(8, 12000, 8), truth, syn.Noise(0.005, **HEAVY), n_samples=30, seed=9)
        assert "packet_steps" not in kinds(anomalies.detect(curve.sizes, curve.times))


# --------------------------------------------------------------------------- alignment

ALIGNMENT_CASES = [
    # modulus, residue, penalty as a fraction of the latency, grid, noise
    (64, 0, 0.10, syn.linear(4, 8192, 4), 0.01),
    (8, 4, 0.05, syn.linear(2, 2048, 2), 0.003),
    (4096, 0, 0.10, syn.linear(512, 2**18, 512), 0.01),
    (16, 0, 0.20, syn.netpipe(16, 2**20, per_octave=4, perturbation=8), 0.01),
]


@pytest.mark.parametrize("modulus, residue, fraction, grid, noise", ALIGNMENT_CASES)
def test_alignment_finds_the_slow_residue_class_and_its_modulus(modulus, residue, fraction, grid, noise):
    latency = 2e-6
    truth = syn.GroundTruth(latency, 5e9, alignment=syn.Alignment(modulus, fraction * latency, residue))
    curve = syn.generate(grid, truth, syn.Noise(noise, **HEAVY), n_samples=30, n_launches=3, seed=modulus)
    found = anomalies.detect(curve.sizes, curve.times)
    assert kinds(found) == ["alignment"], found
    finding = found.iloc[0]
    assert (finding["modulus"], finding["residue"]) == (modulus, residue)
    assert finding["size"] == grid[grid % modulus == residue][0]
    assert finding["magnitude"] == pytest.approx(fraction * latency, rel=0.2)


# Dense grids, where alignment shows: every size slower but the aligned ones (class_faster) or the
# other way round, the penalty a constant (a fraction of the latency) or a fraction of the time.
POLARITY_CASES = [
    # modulus, grid, constant penalty (x latency), relative penalty
    (8, syn.linear(1, 512, 1), 0.0, 0.10),
    (64, syn.linear(1, 512, 1), 0.10, 0.0),
    (8, syn.linear(4, 2048, 4), 0.10, 0.0),
    (64, syn.linear(4, 2048, 4), 0.0, 0.05),
    (4096, syn.linear(512, 2**18, 512), 0.0, 0.10),
]


@pytest.mark.parametrize("class_faster", [False, True], ids=["class-slower", "aligned-faster"])
@pytest.mark.parametrize("modulus, grid, constant, relative", POLARITY_CASES)
def test_alignment_either_way_round_is_one_finding_with_its_modulus_and_sign(modulus, grid, constant, relative,
                                                                             class_faster):
    latency = 2e-6
    alignment = syn.Alignment(modulus, constant * latency, relative_penalty=relative, class_faster=class_faster)
    truth = syn.GroundTruth(latency, 5e9, alignment=alignment)
    expected = alignment.class_effect_s(grid, syn.GroundTruth(latency, 5e9).clean_time_s(grid))
    for seed in range(2):
        noise = syn.Noise(0.01, launch_relative=0.003, **HEAVY)
        curve = syn.generate(grid, truth, noise, n_samples=20, n_launches=(3, None)[seed], seed=seed)
        found = anomalies.detect(curve.sizes, curve.times)
        assert kinds(found) == ["alignment"], (seed, found)
        finding = found.iloc[0]
        assert (finding["modulus"], finding["residue"], finding["size"]) == (modulus, 0, modulus)
        assert np.sign(finding["magnitude"]) == (-1 if class_faster else 1)
        assert finding["magnitude"] == pytest.approx(expected, rel=0.1)


def test_dense_grids_without_alignment_give_no_findings():
    noises = [syn.Noise(0.01, launch_relative=0.003, **HEAVY),
              syn.Noise(0.03, tail_df=2.5, outlier_fraction=0.05, outlier_scale=20.0, launch_point_relative=0.01)]
    found = []
    for g, grid in enumerate((syn.linear(1, 512, 1), syn.linear(4, 2048, 4))):
        for n, noise in enumerate(noises):
            truth = MACHINES[(g + n) % len(MACHINES)]
            curve = syn.generate(grid, truth, noise, n_samples=20, n_launches=(3, None)[n], seed=40 + 2 * g + n)
            found += anomalies.detect(curve.sizes, curve.times).to_dict("records")
    assert found == []


# --------------------------------------------------------------------------- spikes

def test_spikes_that_persist_across_launches_are_found_and_one_launch_spikes_are_not():
    latency = 3e-6
    persistent = [syn.Spike(4096, 0.5 * latency), syn.Spike(185367, 20e-6), syn.Spike(46341, 4e-6)]
    transient = [syn.Spike(1024, 3 * latency, launches=(2,)), syn.Spike(2**20, 400e-6, launches=(0,))]
    truth = syn.GroundTruth(latency, 5e9, spikes=tuple(persistent + transient))
    curve = syn.generate(syn.netpipe(), truth, syn.Noise(0.01, **HEAVY), n_samples=30, n_launches=5, seed=4)
    found = anomalies.detect(curve.sizes, curve.times)
    assert kinds(found) == ["spike"] * len(persistent), found
    by_size = found.set_index("size")
    for spike in persistent:
        assert by_size.loc[spike.size_bytes, "magnitude"] == pytest.approx(spike.extra_s, rel=0.15)
        assert by_size.loc[spike.size_bytes, "launches"] >= 4


def test_spikes_without_a_launch_axis_need_no_launch_evidence():
    truth = syn.GroundTruth(3e-6, 5e9, spikes=(syn.Spike(8192, 2e-6),))
    curve = syn.generate(syn.netpipe(), truth, syn.Noise(0.01, **HEAVY), n_samples=30, seed=6)
    found = anomalies.detect(curve.sizes, curve.times)
    assert kinds(found) == ["spike"] and found.iloc[0]["size"] == 8192 and np.isnan(found.iloc[0]["launches"])


# --------------------------------------------------------------------------- the dataset accessor

def small_campaign():
    """Two libraries x two placements x two kernels, on different grids; one library has a switch."""
    curves = {}
    for i, library in enumerate(("lib-a", "lib-b")):
        for p, placement in enumerate(("1N2P", "2N1P")):
            for k, kernel in enumerate(("pingpong.send", "pingpong.ssend")):
                switches = (syn.Switch(16384, 6e-6, 5e9),) if library == "lib-b" else ()
                truth = syn.GroundTruth((1 + 4 * p) * 1e-6, 5e9 / (1 + p), switches=switches)
                grid = syn.netpipe(1, 2**22) if kernel == "pingpong.send" else syn.powers_of_two(1, 2**22)
                curves[library, placement, kernel] = (truth, syn.generate(
                    grid, truth, syn.Noise(0.01, **HEAVY), n_samples=20, n_launches=3, seed=8 * i + 4 * p + k))
    return curves, syn.campaign_dataset({key: curve for key, (_, curve) in curves.items()})


def test_accessor_fits_every_curve_into_one_dataset():
    curves, ds = small_campaign()
    hockney = ds.commlens.fit("hockney", n_boot=100)
    assert hockney["latency_s"].dims == ("library", "placement", "kernel")
    assert hockney["latency_interval_s"].dims == ("library", "placement", "kernel", "bound")
    for (library, placement, kernel), (truth, curve) in curves.items():
        cell = dict(library=library, placement=placement, kernel=kernel)
        # Sizes the other kernel measured are NaN for this one and must have been dropped.
        assert hockney["n_sizes"].sel(cell).item() == curve.sizes.size
        if library == "lib-a":
            assert hockney["latency_s"].sel(cell).item() == pytest.approx(truth.latency_s, rel=0.05)
            assert hockney["bandwidth_Bps"].sel(cell).item() == pytest.approx(truth.bandwidth_Bps, rel=0.05)
    piecewise = ds.commlens.fit("piecewise")
    breakpoints = piecewise["breakpoint_bytes"]
    assert (piecewise["n_segments"].sel(library="lib-a") == 1).all()
    assert (piecewise["n_segments"].sel(library="lib-b") == 2).all()
    assert (breakpoints.sel(library="lib-b", breakpoint=0) == 16384).all()
    assert breakpoints.sel(library="lib-a").isnull().all()
    # These curves have no packet steps: the packet model reports no period for any of them.
    packet = ds.commlens.fit("packet")
    assert "payload_bytes" not in packet or packet["payload_bytes"].isnull().all()
    with pytest.raises(ValueError, match="unknown model"):
        ds.commlens.fit("logp")


def test_accessor_leaves_curves_without_data_as_nan_and_finds_anomalies_per_curve():
    curves, _ = small_campaign()
    del curves["lib-a", "2N1P", "pingpong.ssend"]      # its labels stay, from the other curves
    ds = syn.campaign_dataset({key: curve for key, (_, curve) in curves.items()})
    fits = ds.commlens.fit("hockney", n_boot=50)
    assert np.isnan(fits["latency_s"].sel(library="lib-a", placement="2N1P", kernel="pingpong.ssend").item())
    table = ds.commlens.anomalies()
    assert list(table.columns[:3]) == ["library", "placement", "kernel"]
    assert set(table["kind"]) == {"protocol_switch"} and set(table["library"]) == {"lib-b"}
    assert len(table) == 4 and (table["size"] == 16384).all()
    quiet = ds.sel(library=["lib-a"]).commlens.anomalies()
    assert quiet.empty and list(quiet.columns) == list(table.columns)
