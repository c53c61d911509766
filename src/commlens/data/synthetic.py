"""Synthetic curves with known ground truth, to validate the models and detectors.

A curve is built from what a real one is made of: a latency and a bandwidth;
protocol switches that change either from some size on (eager to rendezvous:
a jump, a new slope, or both); packets, each costing some header bytes on the wire
(a step wherever a message needs one packet more); a residue class of sizes that is slower
or, as aligned sizes are, faster (alignment); a few sizes that are slower in every launch
(spikes); and the noise of a real machine: multiplicative heavy-tailed noise per sample (Student t),
rare large delays (a preempted process), and a shift per launch. Everything is
drawn from one seed, so a test that fails fails again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:   # for the annotations only: the functions that build a dataset import xarray themselves
    import xarray as xr


@dataclass(frozen=True)
class Switch:
    """From `size_bytes` on, the latency grows by `latency_jump_s` and the bandwidth becomes `bandwidth_Bps`."""

    size_bytes: int
    latency_jump_s: float
    bandwidth_Bps: float


@dataclass(frozen=True)
class Packets:
    """Messages travel in packets of `payload_bytes`, each with `overhead_bytes` more on the wire;
    `header_bytes` of protocol ride inside the packets with every message (steps at k P - header)."""

    payload_bytes: int
    overhead_bytes: float
    header_bytes: int = 0


@dataclass(frozen=True)
class Alignment:
    """Sizes with size % modulus == residue take `penalty_s` longer, plus `relative_penalty`
    times their clean time (a penalty that grows with the message, as a slower copy's does).

    With `class_faster`, it is the other way round, as on most machines: every size
    outside the class pays the penalty and the class (aligned sizes: multiples of 8, 64,
    a page) is the faster minority.
    """

    modulus: int
    penalty_s: float = 0.0
    residue: int = 0
    relative_penalty: float = 0.0
    class_faster: bool = False

    def slower(self, sizes) -> np.ndarray:
        """Which of `sizes` pay the penalty."""
        in_class = np.asarray(sizes).astype(np.int64) % self.modulus == self.residue
        return ~in_class if self.class_faster else in_class

    def penalty(self, sizes, clean_s) -> np.ndarray:
        """The time the alignment adds to each size whose clean time is `clean_s`."""
        return np.where(self.slower(sizes), self.penalty_s + self.relative_penalty * clean_s, 0.0)

    def class_effect_s(self, sizes, clean_s) -> float:
        """How much longer the class's sizes take than the other sizes would at the same size
        (median over the class; below 0 where the class is faster): what a detector should
        report. `clean_s`: the times of `sizes` without the alignment."""
        sizes, clean_s = np.asarray(sizes), np.asarray(clean_s, float)
        in_class = sizes.astype(np.int64) % self.modulus == self.residue
        penalty = self.penalty_s + self.relative_penalty * clean_s[in_class]
        return float(np.median(-penalty if self.class_faster else penalty))


@dataclass(frozen=True)
class Spike:
    """One size takes `extra_s` longer; in every launch unless `launches` names some."""

    size_bytes: int
    extra_s: float
    launches: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Noise:
    """Per-sample noise, multiplicative: time * (1 + relative * t(tail_df)), plus rare delays.

    `relative` is the scale of the noise's core (its standard deviation when
    tail_df is inf); a fraction `outlier_fraction` of samples is delayed by an
    exponential amount of mean `outlier_scale` times the clean time (preemption);
    each launch shifts all its samples by a factor 1 + launch_relative * N(0, 1), and each
    of its points by a further 1 + launch_point_relative * N(0, 1) (a launch's memory placement
    can favour some sizes and not others).
    """

    relative: float = 0.01
    tail_df: float = 3.0
    outlier_fraction: float = 0.01
    outlier_scale: float = 3.0
    launch_relative: float = 0.0
    launch_point_relative: float = 0.0
    # Lag-one autocorrelation of the core noise along a point's samples, as consecutive timed batches
    # share a cache state or a neighbour's burst (0: independent samples).
    autocorrelation: float = 0.0


@dataclass(frozen=True)
class GroundTruth:
    """Everything a curve is made of; what the models and detectors must find again."""

    latency_s: float
    bandwidth_Bps: float
    switches: tuple[Switch, ...] = ()
    packets: Packets | None = None
    alignment: Alignment | None = None
    spikes: tuple[Spike, ...] = ()

    @property
    def breakpoints_bytes(self) -> tuple[int, ...]:
        return tuple(s.size_bytes for s in sorted(self.switches, key=lambda s: s.size_bytes))

    @property
    def packet_step_s(self) -> float:
        """The time one more packet adds, at the bandwidth of the first segment."""
        return self.packets.overhead_bytes / self.bandwidth_Bps if self.packets else 0.0

    def clean_time_s(self, sizes) -> np.ndarray:
        """Noise-free time per size (spikes excluded: they depend on the launch)."""
        sizes = np.asarray(sizes, float)
        latency = np.full(sizes.shape, self.latency_s)
        bandwidth = np.full(sizes.shape, self.bandwidth_Bps)
        for switch in sorted(self.switches, key=lambda s: s.size_bytes):
            after = sizes >= switch.size_bytes
            latency = np.where(after, latency + switch.latency_jump_s, latency)
            bandwidth = np.where(after, switch.bandwidth_Bps, bandwidth)
        wire = sizes.copy()
        if self.packets:
            packets = np.ceil((sizes + self.packets.header_bytes) / self.packets.payload_bytes)
            wire += self.packets.overhead_bytes * packets
        time = latency + wire / bandwidth
        if self.alignment:
            time = time + self.alignment.penalty(sizes, time)
        return time


@dataclass(frozen=True)
class SyntheticCurve:
    """What `generate` returns: the samples, and the truth they were drawn from."""

    sizes: np.ndarray            # bytes
    times: np.ndarray            # seconds: (n_sizes, n_samples) or (n_sizes, n_launches, n_samples)
    truth: GroundTruth
    noise: Noise = field(default_factory=Noise)


def generate(sizes, truth: GroundTruth, noise: Noise = Noise(), n_samples: int = 50,
             n_launches: int | None = None, seed: int = 0) -> SyntheticCurve:
    """Samples of the curve `truth` at `sizes`; with n_launches, times get a launch axis."""
    rng = np.random.default_rng(seed)
    sizes = np.asarray(sizes, dtype=np.int64)
    launches = n_launches or 1
    shape = (sizes.size, launches, n_samples)
    clean = truth.clean_time_s(sizes)[:, None, None]
    extra = np.zeros(shape)
    for spike in truth.spikes:
        rows = sizes == spike.size_bytes
        if not rows.any():
            raise ValueError(f"spike at {spike.size_bytes} B: not one of the sizes")
        hit = np.arange(launches) if spike.launches is None else np.array(spike.launches)
        extra[np.ix_(np.flatnonzero(rows), hit)] += spike.extra_s
    core = rng.standard_t(noise.tail_df, size=shape) if np.isfinite(noise.tail_df) else rng.standard_normal(shape)
    if noise.autocorrelation:       # AR(1) along the samples, scaled back to the independent noise's spread
        phi = noise.autocorrelation
        for sample in range(1, n_samples):
            core[..., sample] = phi * core[..., sample - 1] + np.sqrt(1 - phi ** 2) * core[..., sample]
    launch_shift = 1 + noise.launch_relative * rng.standard_normal((1, launches, 1))
    delayed = rng.random(shape) < noise.outlier_fraction
    delay = rng.exponential(noise.outlier_scale, size=shape) * delayed
    if noise.launch_point_relative:     # drawn last, so that curves without it keep their seeds' values
        launch_shift = launch_shift * (1 + noise.launch_point_relative * rng.standard_normal((sizes.size, launches, 1)))
    # A t draw can be below -1/relative; a time cannot be negative, nor much below its clean value.
    times = (clean + extra) * launch_shift * np.maximum(1 + noise.relative * core, 0.05) + clean * delay
    if n_launches is None:
        times = times[:, 0, :]
    return SyntheticCurve(sizes=sizes, times=times, truth=truth, noise=noise)


@dataclass(frozen=True)
class Spell:
    """A host that changes speed once part-way through each launch: the points a launch measures before
    a point drawn at random (from none of them to all, each as likely) take `factor` times the time of
    those after it. The sizes are measured in a random order per launch, as the harness's --shuffle does."""

    factor: float = 0.6


def with_spell(curve: SyntheticCurve, spell: Spell, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(times, positions) of `curve`, which has a launch axis, measured under `spell`; positions (n_sizes,
    n_launches) say where in its launch each point was measured (0: first), as the dataset's `position`."""
    if curve.times.ndim != 3:
        raise ValueError("a spell needs a curve with a launch axis (generate with n_launches)")
    rng = np.random.default_rng(seed)
    n_sizes, n_launches = curve.times.shape[:2]
    positions = np.stack([rng.permutation(n_sizes) for _ in range(n_launches)], axis=1)
    changes = rng.integers(0, n_sizes + 1, size=n_launches)
    factor = np.where(positions < changes[None, :], spell.factor, 1.0)
    return curve.times * factor[:, :, None], positions


@dataclass(frozen=True)
class Modes:
    """A host whose launches each settle at one of two speeds, at random: a launch is in the slow mode with
    `probability`, and there every size takes `factor` times as long (Open MPI's on-node launches here:
    1.6-1.7 times, in about half the launches)."""

    probability: float = 0.5
    factor: float = 1.65


def with_modes(curve: SyntheticCurve, modes: Modes, seed: int = 0) -> tuple[SyntheticCurve, np.ndarray]:
    """`curve` (with a launch axis) with each launch drawn into the slow mode or not; and which were."""
    if curve.times.ndim != 3:
        raise ValueError("modes need a curve with a launch axis (generate with n_launches)")
    slow = np.random.default_rng(seed).random((curve.times.shape[1],)) < modes.probability
    times = curve.times * np.where(slow, modes.factor, 1.0)[None, :, None]
    return SyntheticCurve(curve.sizes, times, curve.truth, curve.noise), slow


@dataclass(frozen=True)
class Drift:
    """What changes over a campaign that runs in rounds, for every row alike: round `slow_round` (None:
    none) `slow_factor` times slower (another job on the node for a while), and a ramp that makes each
    launch slower than the one before it, the last `ramp` slower than the first (0.1: 10%; a filling
    page cache, a warming machine)."""

    slow_round: int | None = None
    slow_factor: float = 1.15
    ramp: float = 0.0


def in_rounds(curves: dict, drift: Drift = Drift(), seed: int = 0) -> xr.Dataset:
    """A campaign dataset from {(library, placement, kernel): SyntheticCurve with a launch axis}, run in
    rounds as campaigns are: round r runs launch r of every curve, in an order drawn at random per round
    from `seed`; `drift` applies by each launch's time in the campaign. The dataset records `round` and
    `round_position` as collected campaigns do."""
    keys = list(curves)
    rounds = max(curve.times.shape[1] for curve in curves.values())
    rng = np.random.default_rng(seed)
    positions = {key: np.full(rounds, -1, dtype=np.int64) for key in keys}
    factors = {key: np.ones(rounds) for key in keys}
    total = rounds * len(keys)
    for r in range(rounds):
        for place, index in enumerate(rng.permutation(len(keys))):
            key = keys[index]
            positions[key][r] = place
            elapsed = (r * len(keys) + place) / max(total - 1, 1)
            factors[key][r] = (1 + drift.ramp * elapsed) * (drift.slow_factor if r == drift.slow_round else 1.0)
    ds = dataset_from_cubes({key: (curve.sizes, curve.times * factors[key][None, :curve.times.shape[1], None])
                             for key, curve in curves.items()}, rounds=True)
    position = np.full(ds["round"].shape, -1, dtype=np.int64)
    for (library, placement, kernel), values in positions.items():
        cell = (list(ds["library"].values).index(library), list(ds["placement"].values).index(placement),
                list(ds["kernel"].values).index(kernel))
        position[cell] = np.where(ds["round"].values[cell] >= 0, values, -1)
    ds["round_position"] = (ds["round"].dims, position, {"long_name": "place of the launch in its round's order"})
    ds.attrs["round_seed"] = seed
    return ds


def with_change(curve: SyntheticCurve, factor: float, low: int, high: int) -> SyntheticCurve:
    """The same samples with those of sizes low..high (bytes, inclusive) times `factor`: a change
    planted over a size range (an update that made them slower, factor > 1, or faster)."""
    times = curve.times.copy()
    times[(curve.sizes >= low) & (curve.sizes <= high)] *= factor
    return SyntheticCurve(curve.sizes, times, curve.truth, curve.noise)


# --------------------------------------------------------------------------- size grids

def powers_of_two(low: int = 1, high: int = 4 * 2**20) -> np.ndarray:
    """OSU and IMB: every power of two from low to high."""
    return 2 ** np.arange(int(np.log2(low)), int(np.log2(high)) + 1, dtype=np.int64)


def netpipe(low: int = 1, high: int = 4 * 2**20, per_octave: int = 2, perturbation: int = 3) -> np.ndarray:
    """NetPIPE: per_octave points per octave, each also at -/+ perturbation bytes."""
    centres = np.unique(np.rint(2 ** np.arange(np.log2(max(low, 1)), np.log2(high) + 1e-9,
                                               1 / per_octave)).astype(np.int64))
    sizes = np.concatenate([centres - perturbation, centres, centres + perturbation])
    return np.unique(sizes[(sizes >= low) & (sizes <= high)])


def linear(low: int, high: int, step: int) -> np.ndarray:
    """Every `step` bytes from low to high: dense grids resolve packets and alignment."""
    return np.arange(low, high + 1, step, dtype=np.int64)


def log_uniform(low: int, high: int, count: int, seed: int = 0) -> np.ndarray:
    """`count` distinct sizes drawn log-uniformly: a grid with no regularity to lean on."""
    rng = np.random.default_rng(seed)
    pool = np.unique(np.rint(np.exp(rng.uniform(np.log(low), np.log(high), 8 * count))).astype(np.int64))
    if pool.size < count:
        raise ValueError(f"only {pool.size} distinct sizes between {low} and {high}")
    return np.sort(rng.choice(pool, count, replace=False))


# --------------------------------------------------------------------------- datasets

def campaign_dataset(curves: dict) -> xr.Dataset:
    """A dataset shaped like a campaign's, from {(library, placement, kernel): SyntheticCurve}.

    Laid out as collected campaigns are (ragged samples with per-point statistics, see
    commlens.data.samples); only what the analysis reads is there (no provenance).
    """
    return dataset_from_cubes({key: (curve.sizes, curve.times) for key, curve in curves.items()})


def dataset_from_cubes(cubes: dict, rounds: bool = False) -> xr.Dataset:
    """The same from {(library, placement, kernel): (sizes, times)} with times (n_sizes, n_samples)
    or (n_sizes, n_launches, n_samples), NaN-padded: samples measured outside a campaign. rounds=True:
    launch r of every row ran in round r (the rows took turns), recorded in `round` as a campaign does."""
    import xarray as xr

    from commlens.data.opening import ragged

    names = [sorted({key[i] for key in cubes}) for i in range(3)]
    sizes = np.unique(np.concatenate([np.asarray(s) for s, _ in cubes.values()]))
    cubes = {key: (np.asarray(s), t if t.ndim == 3 else t[:, None, :]) for key, (s, t) in cubes.items()}
    n_launches = max(cube.shape[1] for _, cube in cubes.values())
    n_samples = max(cube.shape[2] for _, cube in cubes.values())
    time = np.full(tuple(map(len, names)) + (sizes.size, n_launches, n_samples), np.nan)
    for (library, placement, kernel), (curve_sizes, cube) in cubes.items():
        rows = np.searchsorted(sizes, curve_sizes)
        cell = (names[0].index(library), names[1].index(placement), names[2].index(kernel))
        time[cell][rows, :cube.shape[1], :cube.shape[2]] = cube
    ds = ragged(xr.Dataset(
        {"time": (("library", "placement", "kernel", "size", "launch", "sample"), time, {"units": "s"})},
        coords={"library": names[0], "placement": names[1], "kernel": names[2],
                "size": ("size", sizes, {"units": "bytes"}), "launch": np.arange(n_launches),
                "sample": np.arange(n_samples)}))
    if rounds:
        ran = np.isfinite(time).any(axis=(3, 5))                        # (library, placement, kernel, launch)
        ds["round"] = (("library", "placement", "kernel", "launch"),
                       np.where(ran, np.arange(n_launches), -1).astype(np.int64),
                       {"long_name": "round the launch ran in (-1: it did not run)"})
    return ds


@dataclass(frozen=True)
class PairNoise:
    """How an all-pairs measurement varies, multiplicatively: each repetition as a whole by
    `repetition_relative` (a launch's level), each pair once and for all by `pair_relative` (its
    ranks' cores, its path) and each node likewise by `node_relative`, and every pair of every
    repetition by `relative`."""

    relative: float = 0.05
    pair_relative: float = 0.02
    node_relative: float = 0.02
    repetition_relative: float = 0.2


def pair_times(n_nodes: int, repetitions: int, time_s: float = 1e-3, noise: PairNoise = PairNoise(),
               slow_nodes: dict | None = None, slow_links: dict | None = None, groups: list | None = None,
               across: float = 1.0, seed: int = 0) -> np.ndarray:
    """Pair times (n, n, repetitions), NaN on the diagonal, with planted faults: `slow_nodes`
    {node: factor} multiplies every pair through the node, `slow_links` {(a, b): factor} the pair
    both ways; and switches: `groups` (one label per node: its leaf) multiplies every pair of nodes in
    different groups by `across` (what their uplinks cost them)."""
    rng = np.random.default_rng(seed)
    n = n_nodes
    node = 1 + noise.node_relative * rng.standard_normal(n)
    pair = 1 + noise.pair_relative * rng.standard_normal((n, n))
    repetition = 1 + noise.repetition_relative * np.abs(rng.standard_normal(repetitions))
    times = time_s * (node[:, None] * node[None, :] * pair)[:, :, None] * repetition[None, None, :]
    times = times * (1 + noise.relative * rng.standard_normal((n, n, repetitions)))
    if groups is not None:
        labels = np.asarray(groups)
        times = times * np.where(labels[:, None] != labels[None, :], across, 1.0)[:, :, None]
    for k, factor in (slow_nodes or {}).items():
        times[k, :, :] *= factor
        times[:, k, :] *= factor
    for (a, b), factor in (slow_links or {}).items():
        times[a, b, :] *= factor
        times[b, a, :] *= factor
    times[np.arange(n), np.arange(n), :] = np.nan
    return times
