"""`make validate` (findings and fits): recall and false findings of every kind the anomaly detector
reports, as the report runs it (commlens.analysis.anomalies.detect_launches: found in each launch and kept
where the launches agree), and the measured coverage of every model interval, on synthetic curves whose
truth is known (commlens.data.synthetic).

Findings. Each curve plants one thing, or nothing, on the grid where it shows:

- protocol switch: a jump of half the time there and a 1.6x faster path from a size drawn log-uniformly in
  1-128 KiB, on the NetPIPE grid (1 B .. 4 MiB, 3 us, 5 GB/s);
- regime change: the bandwidth halved or doubled from a size drawn log-uniformly in 32-256 KiB with no jump
  (the two lines meet there: a kink), on the same grid;
- packet steps: a 50 Mbit/s link (50 us) whose packets carry MTU - 52 B of payload, the MTU drawn in
  900-1500, each packet 250 B of wire time more (a 40 us step: the smallest the issue's real links at
  50 Mbit/s showed, over 5-10 us of noise; 66 B of headers alone, 10.6 us, is under one noise width of
  the points here at 8 KiB), on a 128 B grid to 8 KiB (the grid of the issue's real links);
- alignment: sizes % 32 or % 64 == 0 slower by 5% of the latency, or (half the curves) every other size
  slower by as much and the aligned ones the faster, on an 8 B grid to 1 KiB (2 us, 5 GB/s);
- spike: one size of the NetPIPE grid (64 B .. 128 KiB) 30% slower in every launch;
- nothing: a clean curve, in turn on each of the three grids.

Noise: Student t samples (3 degrees of freedom, 1% core, 1% rare delays of 3x), 30 a point, launches
shifted by 3% each and each point of a launch by a further 1%, as compare_validation's shapes. Conditions:

- 1 launch; 3 launches;
- two modes: 3 launches, one of them 1.65 times slower at every size (Open MPI's on-node launches here),
  a launch_modes finding planted beside the curve's own;
- heavy tails: 3 launches, t with 1.5 degrees of freedom and 5% delays of ten times the time;
- bends: 3 launches, each curve also bending: its bandwidth falls 1.5x gradually over one octave (2-4 KiB
  of the packet grid, 256-512 B of the dense one, 512 KiB-1 MiB of the NetPIPE grid; away from anything
  planted), built by interpolating the clean times of the line before and the line after on log2(size)
  across the octave (synthetic has no bend of its own). On the dense grid that is a 2-3% change of the
  time, as the bend of Open MPI's copy cost that was named a switch (issue 53); on the others, a real
  new slope. No switch is there: a bend named a protocol switch is a false finding, a bend named a regime
  change (within the octave, one grid step either side) is allowed.

Recall: the share of curves on which the planted thing is reported, of the right kind, within one grid
step of where it is (a switch or regime change: the first size of the new regime, by grid index; packet
steps: the period within one grid step of the payload; alignment: the planted modulus and residue; spike:
its size; launch modes: the slow launch named). False findings: the share of curves with any finding that
is not the planted one (on clean and bend curves every finding but a bend's regime change). Each share
with its 95% interval (Clopper-Pearson), over 40 curves a cell (fixed seeds). Then, per kind, the
findings whose size is below the kind's practical size (PRACTICAL; launch modes: MODE_FACTOR): as the
table reports it (`relative`), and recomputed here from the measured curve (the finding's magnitude
against the median time of the launches at its size; packet steps against one period's wire time at the
curve's mean slope; regime changes by their bandwidths). Both must be 0.

Coverage: 600 curves of 3 launches, noise as above, 95% intervals (at 200 curves a share's standard error
is 1.5 points, as wide as half the 93-97% target: a true 95% would miss it by chance alone about a third of
the time). fit_hockney (latency,
bandwidth) on single-regime curves of three machines on the NetPIPE grid; fit_regimes (first regime's
latency, last regime's bandwidth) and fit_piecewise (each true switch inside some breakpoint_intervals_bytes
(low, high]) on curves of one or two switches: large jumps, a small one (+19%), a new slope alone; how many
breakpoint intervals are the grid's bracket (they cover whatever lies in the gap) is said beside; fit_packet
(payload_interval_bytes holds the payload) on the packet curves above, where it reports a period (it
refuses where it finds the curve does not step at its best payload; how often is said). The issue's
target: 93-97%.
Run: .venv/bin/python benchmarks/findings_validation.py [--curves N] [--coverage-curves N] [--workers N]
     [--show-false] (every false finding, with its seed)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, replace
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from commlens.analysis import models
from commlens.analysis.anomalies import PRACTICAL, detect_launches
from commlens.analysis.modes import MODE_FACTOR
from commlens.data import synthetic as syn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_validation import NOISE, rate  # noqa: E402  (benchmarks/ is no package: one noise, one interval)

KiB, MiB = 1024, 2**20
HEAVY = replace(NOISE, tail_df=1.5, outlier_fraction=0.05, outlier_scale=10)
SAMPLES = 30
SLOW_MODE = 1.65
BEND = 1.5           # the bandwidth falls this much over the bend's octave
PACKET_OVERHEAD = 250   # bytes of wire time a packet adds (see the module's docstring)


@dataclass(frozen=True)
class Family:
    """A grid and the machine drawn on it, and the octave where its curves bend in the bends condition."""

    grid: np.ndarray
    latency_s: float
    bandwidth_Bps: float
    bend_bytes: int          # the octave bend_bytes .. 2 bend_bytes


NETPIPE = Family(syn.netpipe(1, 4 * MiB), 3e-6, 5e9, 512 * KiB)
PACKET = Family(syn.linear(128, 8 * KiB, 128), 50e-6, 50e6 / 8, 2 * KiB)
DENSE = Family(syn.linear(8, 1 * KiB, 8), 2e-6, 5e9, 256)
FAMILIES = (NETPIPE, PACKET, DENSE)


@dataclass(frozen=True)
class Condition:
    """How a cell's curves are measured (see the module's docstring)."""

    launches: int
    noise: syn.Noise = NOISE
    slow_mode: bool = False
    bend: bool = False


CONDITIONS = {
    "1 launch": Condition(1),
    "3 launches": Condition(3),
    "two modes": Condition(3, slow_mode=True),
    "heavy tails": Condition(3, HEAVY),
    "bends": Condition(3, bend=True),
}
PLANTED = ("nothing", "protocol_switch", "regime_change", "packet_steps", "alignment", "spike")
# Every kind the detector reports: those with a practical size, and launches in two modes.
KINDS = (*PRACTICAL, "launch_modes")


@dataclass(frozen=True)
class Planted:
    """One curve's truth and where its planted finding lies."""

    family: Family
    truth: syn.GroundTruth
    at_bytes: int = 0            # where a switch or regime change starts (between grid sizes, as a rule), the
    #                              spike's size, the packets' payload
    modulus: int = 0


def index_of(grid: np.ndarray, size: float) -> int:
    """The grid index of the first size at or past `size` (a breakpoint's first size of its new regime)."""
    return int(np.searchsorted(grid, size))


def planted(kind: str, seed: int) -> Planted:
    """The truth of curve `seed` of a planted kind (the module's docstring says what each plants)."""
    rng = np.random.default_rng(10_000 + seed)
    if kind == "nothing":
        family = FAMILIES[seed % len(FAMILIES)]
        return Planted(family, syn.GroundTruth(family.latency_s, family.bandwidth_Bps))
    if kind == "packet_steps":
        payload = int(rng.integers(900, 1501)) - 52
        return Planted(PACKET, syn.GroundTruth(PACKET.latency_s, PACKET.bandwidth_Bps,
                                               packets=syn.Packets(payload, PACKET_OVERHEAD)), at_bytes=payload)
    if kind == "alignment":
        modulus = (32, 64)[seed % 2]
        alignment = syn.Alignment(modulus, 0.05 * DENSE.latency_s, class_faster=seed % 4 >= 2)
        return Planted(DENSE, syn.GroundTruth(DENSE.latency_s, DENSE.bandwidth_Bps, alignment=alignment),
                       modulus=modulus)
    latency, bandwidth = NETPIPE.latency_s, NETPIPE.bandwidth_Bps
    if kind == "protocol_switch":
        at = int(np.exp(rng.uniform(np.log(1 * KiB), np.log(128 * KiB))))
        jump = 0.5 * (latency + at / bandwidth)
        return Planted(NETPIPE, syn.GroundTruth(latency, bandwidth, switches=(syn.Switch(at, jump, 1.6 * bandwidth),)),
                       at_bytes=at)
    if kind == "regime_change":
        at = int(np.exp(rng.uniform(np.log(32 * KiB), np.log(256 * KiB))))
        after = bandwidth * (2.0 if seed % 2 else 0.5)
        # The new line meets the old one at the switch: a new slope, no jump.
        switch = syn.Switch(at, at / bandwidth - at / after, after)
        return Planted(NETPIPE, syn.GroundTruth(latency, bandwidth, switches=(switch,)), at_bytes=at)
    if kind == "spike":
        choices = NETPIPE.grid[(NETPIPE.grid >= 64) & (NETPIPE.grid <= 128 * KiB)]
        at = int(rng.choice(choices))
        extra = 0.3 * (latency + at / bandwidth)
        return Planted(NETPIPE, syn.GroundTruth(latency, bandwidth, spikes=(syn.Spike(at, extra),)), at_bytes=at)
    raise ValueError(kind)


def bend_factor(family: Family) -> np.ndarray:
    """Per size, the bent curve's clean time over the straight one's: the line before the octave and the
    line after it (bandwidth / BEND, meeting the first at the octave's start) weighted by log2(size) across
    the octave. Applied to a curve's samples it carries whatever else the curve holds along."""
    sizes = family.grid.astype(float)
    start = family.bend_bytes
    after = syn.GroundTruth(family.latency_s + start / family.bandwidth_Bps - start * BEND / family.bandwidth_Bps,
                            family.bandwidth_Bps / BEND)
    before = syn.GroundTruth(family.latency_s, family.bandwidth_Bps)
    weight = np.clip(np.log2(sizes / start), 0.0, 1.0)
    bent = (1 - weight) * before.clean_time_s(sizes) + weight * after.clean_time_s(sizes)
    return bent / before.clean_time_s(sizes)


def curve_times(case: Planted, condition: Condition, seed: int) -> tuple[np.ndarray, int | None]:
    """(times (sizes, launches, samples), the slow launch or None) of one curve under `condition`."""
    curve = syn.generate(case.family.grid, case.truth, condition.noise, n_samples=SAMPLES,
                         n_launches=condition.launches, seed=seed)
    times = curve.times
    if condition.bend:
        # The noise is multiplicative: scaling a size's samples is drawing them around the bent time.
        times = times * bend_factor(case.family)[:, None, None]
    slow = None
    if condition.slow_mode:
        # One launch of three, not a random draw (synthetic.with_modes): every curve then holds the mode.
        slow = seed % condition.launches
        times = times.copy()
        times[:, slow] *= SLOW_MODE
    return times, slow


def is_planted(row: dict, kind: str, case: Planted) -> bool:
    """Whether a finding is the planted thing: its kind, within one grid step of where it is."""
    grid = case.family.grid
    if row["kind"] != kind:
        return False
    if kind in ("protocol_switch", "regime_change", "spike"):
        return abs(index_of(grid, row["size"]) - index_of(grid, case.at_bytes)) <= 1
    if kind == "packet_steps":
        return abs(row["period"] - case.at_bytes) <= grid[1] - grid[0]
    if kind == "alignment":
        return row["modulus"] == case.modulus and row["residue"] == 0
    return False


def is_bend(row: dict, case: Planted) -> bool:
    """A regime change where the curve bends: allowed, the bend is a new slope."""
    grid = case.family.grid
    first, last = index_of(grid, case.family.bend_bytes), index_of(grid, 2 * case.family.bend_bytes)
    return row["kind"] == "regime_change" and first - 1 <= index_of(grid, row["size"]) <= last + 1


def names_slow_launch(row: dict, slow: int) -> bool:
    return row["kind"] == "launch_modes" and row["launches"] == 1 and str(row["note"]).startswith(f"launch {slow} ")


def measured_relative(row: dict, sizes: np.ndarray, times: np.ndarray) -> float:
    """What a finding is worth, recomputed from the measured curve (not the detector's model): its magnitude
    against the median of the launches' medians at its size; packet steps against one period's wire time
    at the curve's mean slope; regime changes and launch modes as they state themselves."""
    with np.errstate(all="ignore"):
        medians = np.nanmedian(np.nanmedian(times, axis=2), axis=1)
    if row["kind"] == "launch_modes":
        return row["magnitude"] - 1
    if row["kind"] == "regime_change":
        before, after = row["bandwidth_before_Bps"], row["bandwidth_after_Bps"]
        return max(before / after, after / before) - 1
    if row["kind"] == "packet_steps":
        per_byte = (medians[-1] - medians[0]) / (sizes[-1] - sizes[0])
        return abs(row["magnitude"]) / (per_byte * row["period"])
    return abs(row["magnitude"]) / medians[min(index_of(sizes, row["size"]), sizes.size - 1)]


def practical_size(kind: str) -> float:
    return MODE_FACTOR - 1 if kind == "launch_modes" else PRACTICAL[kind]


def one_curve(task: tuple[str, str, int]) -> dict:
    """Detect on one curve as the report does; what the table counts of it."""
    condition_name, kind, seed = task
    condition = CONDITIONS[condition_name]
    case = planted(kind, seed)
    times, slow = curve_times(case, condition, seed)
    sizes = case.family.grid
    rows = detect_launches(sizes, times).to_dict("records")
    found = any(is_planted(row, kind, case) for row in rows)
    modes_found = slow is not None and any(names_slow_launch(row, slow) for row in rows)
    false = [row for row in rows if not (is_planted(row, kind, case) or (condition.bend and is_bend(row, case))
                                         or (slow is not None and names_slow_launch(row, slow)))]
    small = {}
    for row in rows:
        counts = small.setdefault(row["kind"], [0, 0, 0])
        counts[0] += 1
        counts[1] += row["relative"] < practical_size(row["kind"])
        counts[2] += measured_relative(row, sizes, times) < practical_size(row["kind"])
    return {"condition": condition_name, "kind": kind, "found": found, "modes_found": modes_found,
            "false": bool(false), "false_kinds": sorted({row["kind"] for row in false}), "small": small,
            "seed": seed, "at_bytes": case.at_bytes, "false_rows": [described(row) for row in false]}


def described(row: dict) -> str:
    """A finding in one line (--show-false)."""
    where = f"{row['size']:.0f} B"
    if row["kind"] == "packet_steps":
        where = f"period {row['period']:.0f} B"
    elif row["kind"] == "alignment":
        where = f"size % {row['modulus']:.0f} == {row['residue']:.0f}"
    return f"{row['kind']} at {where}, relative {row['relative']:.2f}, score {row['score']:.1f}" + (
        f", {row['note']}" if row["note"] else "")


def findings(curves: int, pool, show_false: bool = False) -> None:
    tasks = [(condition, kind, seed) for condition in CONDITIONS for kind in PLANTED for seed in range(curves)]
    results = pool.map(one_curve, tasks, chunksize=4)
    print(f"Findings of detect_launches, {curves} curves a cell (seeds 0-{curves - 1}); recall: the planted thing "
          "reported, its kind, within one grid step; false: any other finding (on bend curves a regime change "
          "in the bend's octave is allowed, a protocol switch there is false); 95% intervals (Clopper-Pearson)")
    print(f"  {'condition':<12} {'planted':<20} {'recall':>21} {'false findings':>21}  false kinds")
    for condition in CONDITIONS:
        for kind in PLANTED:
            cell = [r for r in results if r["condition"] == condition and r["kind"] == kind]
            recall = "-" if kind == "nothing" else rate(sum(r["found"] for r in cell), len(cell))
            kinds = {}
            for r in cell:
                for name in r["false_kinds"]:
                    kinds[name] = kinds.get(name, 0) + 1
            named = ", ".join(f"{name} {n}" for name, n in sorted(kinds.items())) or "-"
            shown = "nothing (bend alone)" if kind == "nothing" and CONDITIONS[condition].bend else kind
            print(f"  {condition:<12} {shown:<20} {recall:>21} {rate(sum(r['false'] for r in cell), len(cell)):>21}"
                  f"  {named}")
        if CONDITIONS[condition].slow_mode:
            cell = [r for r in results if r["condition"] == condition]
            print(f"  {condition:<12} {'launch_modes':<20} {rate(sum(r['modes_found'] for r in cell), len(cell)):>21}"
                  f" {'(every curve above)':>21}")
    if show_false:
        print("Every false finding (condition, planted, seed, where it was planted):")
        for r in results:
            for row in r["false_rows"]:
                print(f"  {r['condition']:<12} {r['kind']:<16} seed {r['seed']:3d} at {r['at_bytes']:7d} B: {row}")
    print("Findings below their kind's practical size (must be 0), every curve above: as reported (relative) / "
          "recomputed from the measured curve")
    totals = {}
    for r in results:
        for kind, counts in r["small"].items():
            totals[kind] = [a + b for a, b in zip(totals.get(kind, [0, 0, 0]), counts)]
    for kind in KINDS:
        found, reported, measured = totals.get(kind, [0, 0, 0])
        print(f"  {kind:<16} practical size {practical_size(kind):5.0%}: {found:5d} findings, {reported} below "
              f"as reported, {measured} below as measured{'  NOT 0' if reported or measured else ''}")


# --------------------------------------------------------------------------- coverage of the model intervals

HOCKNEY_MACHINES = (syn.GroundTruth(1.5e-6, 12e9), syn.GroundTruth(4e-6, 2.5e9), syn.GroundTruth(25e-6, 1.1e8))
REGIME_LAYOUTS = (
    (syn.Switch(16384, 6e-6, 5e9),),                                    # eager -> rendezvous: a jump
    (syn.Switch(65536, 8e-6, 9e9),),                                    # a jump and a faster path
    (syn.Switch(3000, 5e-6, 5e9),),                                     # between grid points
    (syn.Switch(8192, 4e-6, 5e9), syn.Switch(524288, 25e-6, 12e9)),     # two switches
    (syn.Switch(16384, 1e-6, 5e9),),                                    # a small jump (+19%)
    (syn.Switch(262144, 262144 / 5e9 - 262144 / 2.5e9, 2.5e9),),        # a new slope alone: the lines meet
)


def covers(interval, value) -> bool:
    low, high = interval
    return bool(low <= value <= high)


def one_coverage(seed: int) -> dict:
    """Which of one seed's intervals hold the truth (None: the fit reported none)."""
    grid = NETPIPE.grid
    machine = HOCKNEY_MACHINES[seed % len(HOCKNEY_MACHINES)]
    curve = syn.generate(grid, machine, NOISE, n_samples=SAMPLES, n_launches=3, seed=20_000 + seed)
    hockney = models.fit_hockney(curve.sizes, curve.times)
    out = {"hockney latency": covers(hockney.latency_interval_s, machine.latency_s),
           "hockney bandwidth": covers(hockney.bandwidth_interval_Bps, machine.bandwidth_Bps)}

    truth = syn.GroundTruth(2e-6, 5e9, switches=REGIME_LAYOUTS[seed % len(REGIME_LAYOUTS)])
    curve = syn.generate(grid, truth, NOISE, n_samples=SAMPLES, n_launches=3, seed=30_000 + seed)
    regimes = models.fit_regimes(curve.sizes, curve.times)
    out["regimes first latency"] = covers(regimes.latency_interval_s, truth.latency_s)
    out["regimes last bandwidth"] = covers(regimes.bandwidth_interval_Bps, truth.switches[-1].bandwidth_Bps)
    pieces = models.fit_piecewise(curve.sizes, curve.times)
    # (low, high]: a breakpoint's interval holds a switch between the grid's sizes when low < switch <= high.
    out["piecewise breakpoints"] = [any(low < switch <= high for low, high in pieces.breakpoint_intervals_bytes)
                                    for switch in truth.breakpoints_bytes]
    # An interval no wider than the grid's bracket covers every switch it is placed at: its coverage says
    # little, so the table says how many there were.
    out["bracket only"] = [int(np.searchsorted(grid, high)) - int(np.searchsorted(grid, low)) == 1
                           for low, high in pieces.breakpoint_intervals_bytes]

    case = planted("packet_steps", 40_000 + seed)
    curve = syn.generate(case.family.grid, case.truth, NOISE, n_samples=SAMPLES, n_launches=3, seed=40_000 + seed)
    try:
        packet = models.fit_packet(curve.sizes, curve.times)
        out["packet payload"] = covers(packet.payload_interval_bytes, case.at_bytes)
    except ValueError:
        out["packet payload"] = None
    return out


def coverage(curves: int, pool) -> None:
    results = pool.map(one_coverage, range(curves), chunksize=4)
    print(f"Coverage of the models' 95% intervals, {curves} curves of 3 launches each (3% launch shifts, 1% per "
          "point); the issue's target 93-97%")
    for name in results[0]:
        if name == "bracket only":
            continue
        values = []
        for result in results:
            value = result[name]
            values += value if isinstance(value, list) else [value]
        reported = [value for value in values if value is not None]
        refused = len(values) - len(reported)
        note = f" ({refused} of {len(values)} curves: no period reported)" if refused else ""
        if name == "piecewise breakpoints":
            bracket = [value for result in results for value in result["bracket only"]]
            note = f" ({sum(bracket)} of {len(bracket)} intervals the grid's bracket: no narrower can be)"
        verdict = "" if not reported else ("" if 0.93 <= np.mean(reported) <= 0.97 else "  outside 93-97%")
        print(f"  {name:<24} {rate(sum(reported), len(reported)):>21} of {len(reported):3d} intervals{note}{verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--curves", type=int, default=40, help="curves per condition and planted kind")
    parser.add_argument("--coverage-curves", type=int, default=600, help="curves for the intervals' coverage")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes (default: every core)")
    parser.add_argument("--show-false", action="store_true", help="list every false finding")
    args = parser.parse_args()
    start = time.perf_counter()
    with get_context("fork").Pool(args.workers) as pool:
        findings(args.curves, pool, args.show_false)
        coverage(args.coverage_curves, pool)
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
