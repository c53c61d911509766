"""`make validate`: what the models and the anomaly detector recover from curves whose truth is known.

Synthetic curves (commlens.data.synthetic) with heavy-tailed noise (Student t with 3 degrees of
freedom, 2% rare delays of up to 5x, launch-to-launch shifts), each with a fixed seed. For each
case the table gives the true value, the recovered one and the error. The tests in
tests/test_models.py and tests/test_anomalies.py assert the acceptance bounds over wider
sweeps; this prints representative figures a reader can check a report against.
Run: .venv/bin/python benchmarks/ground_truth.py
"""

from __future__ import annotations

import numpy as np

from commlens.analysis import anomalies
from commlens.analysis import models
from commlens.data import synthetic as syn

HEAVY = dict(tail_df=3.0, outlier_fraction=0.02, outlier_scale=5.0)
NOISE_LEVELS = (0.003, 0.01, 0.03)


def noise(relative: float) -> syn.Noise:
    return syn.Noise(relative=relative, launch_relative=0.002, **HEAVY)


def curve(grid, truth: syn.GroundTruth, relative: float, seed: int) -> syn.SyntheticCurve:
    return syn.generate(grid, truth, noise(relative), n_samples=30, n_launches=3, seed=seed)


def hockney() -> None:
    print("Hockney fit, NetPIPE grid 1 B .. 4 MiB: latency (us) and bandwidth (GB/s), true -> recovered")
    machines = {"shared memory": syn.GroundTruth(1.5e-6, 12e9), "fast network": syn.GroundTruth(4e-6, 2.5e9),
                "1 Gbit TCP": syn.GroundTruth(25e-6, 1.1e8)}
    grid = syn.netpipe(1, 4 * 2**20)
    for name, truth in machines.items():
        for n, level in enumerate(NOISE_LEVELS):
            fit = models.fit_hockney(grid, curve(grid, truth, level, seed=10 + n).times, n_boot=200)
            low, high = fit.latency_interval_s
            print(f"  {name:14s} noise {level:5.1%}: latency {truth.latency_s * 1e6:6.2f} -> "
                  f"{fit.latency_s * 1e6:6.2f} ({fit.latency_s / truth.latency_s - 1:+6.2%}, 95% CI "
                  f"{low * 1e6:.2f}..{high * 1e6:.2f}); bandwidth {truth.bandwidth_Bps / 1e9:6.3f} -> "
                  f"{fit.bandwidth_Bps / 1e9:6.3f} ({fit.bandwidth_Bps / truth.bandwidth_Bps - 1:+6.2%})")


def piecewise() -> None:
    print("Piecewise fit, NetPIPE grid: breakpoints (B) and the segments' latency, true -> recovered")
    layouts = {
        "eager -> rendezvous at 16 KiB": (syn.Switch(16384, 6e-6, 5e9),),
        "jump and faster path at 64 KiB": (syn.Switch(65536, 8e-6, 9e9),),
        "slope change alone at 256 KiB": (syn.Switch(262144, 0.0, 2e9),),
        "two switches, 8 KiB and 512 KiB": (syn.Switch(8192, 4e-6, 5e9), syn.Switch(524288, 25e-6, 12e9)),
        "between grid points, 3000 B": (syn.Switch(3000, 5e-6, 5e9),),
    }
    grid = syn.netpipe(1, 4 * 2**20)
    for name, switches in layouts.items():
        truth = syn.GroundTruth(2e-6, 5e9, switches=switches)
        for n, level in enumerate(NOISE_LEVELS):
            fit = models.fit_piecewise(grid, curve(grid, truth, level, seed=20 + n).times)
            found = ", ".join(f"{b} ({low}..{b})" for b, (low, _) in
                              zip(fit.breakpoints_bytes, fit.breakpoint_intervals_bytes)) or "none"
            latencies = ", ".join(f"{s.latency_s * 1e6:.2f}" for s in fit.segments)
            print(f"  {name:32s} noise {level:5.1%}: {[s.size_bytes for s in switches]} -> {found}; "
                  f"segment latencies (us) {latencies}")


def regimes() -> None:
    print("Parameter table, NetPIPE grid: first regime's latency (us), last regime's bandwidth (GB/s), switches (B), "
          "and whether one Hockney line fits; true -> recovered")
    layouts = {
        "one regime": (),
        "eager -> rendezvous at 16 KiB": (syn.Switch(16384, 6e-6, 5e9),),
        "jump and faster path at 64 KiB": (syn.Switch(65536, 8e-6, 9e9),),
        "slope change alone at 256 KiB": (syn.Switch(262144, 0.0, 2e9),),
        "two switches, 8 KiB and 512 KiB": (syn.Switch(8192, 4e-6, 5e9), syn.Switch(524288, 25e-6, 12e9)),
    }
    grid = syn.netpipe(1, 4 * 2**20)
    for name, switches in layouts.items():
        truth = syn.GroundTruth(2e-6, 5e9, switches=switches)
        last_bandwidth = switches[-1].bandwidth_Bps if switches else truth.bandwidth_Bps
        for n, level in enumerate(NOISE_LEVELS):
            fit = models.fit_regimes(grid, curve(grid, truth, level, seed=50 + n).times, n_boot=200)
            within = fit.n_sizes - fit.beyond_noise
            verdict = (f"fits ({within} of {fit.n_sizes} sizes within noise)" if fit.hockney_fits
                       else f"flagged ({fit.beyond_noise} of {fit.n_sizes} sizes beyond noise; the line's latency "
                            f"{fit.hockney.latency_s * 1e6:.2f}, bandwidth {fit.hockney.bandwidth_Bps / 1e9:.2f})")
            print(f"  {name:32s} noise {level:5.1%}: latency {truth.latency_s * 1e6:.2f} -> {fit.latency_s * 1e6:.2f}; "
                  f"bandwidth {last_bandwidth / 1e9:.2f} -> {fit.bandwidth_Bps / 1e9:.2f}; switches "
                  f"{list(truth.breakpoints_bytes)} -> {list(fit.switches_bytes)}; Hockney "
                  f"{'flagged' if switches else 'fits'} -> {verdict}")


def packets() -> None:
    print("Packet fit, dense linear grid, 0.3% noise: payload P and per-packet overhead H (B), true -> recovered")
    cases = [(1448, 66, 20e-6, 12.5e6, 8), (1460, 54, 10e-6, 1.2e8, 8), (536, 40, 2e-6, 1.2e9, 4)]
    for payload, overhead, latency, bandwidth, step in cases:
        truth = syn.GroundTruth(latency, bandwidth, packets=syn.Packets(payload, overhead))
        grid = syn.linear(step, 6 * payload, step)
        fit = models.fit_packet(grid, curve(grid, truth, 0.003, seed=payload).times)
        print(f"  grid step {step} B: P {payload} -> {fit.payload_bytes} (interval {fit.payload_interval_bytes}), "
              f"H {overhead} -> {fit.overhead_bytes:.1f}, bandwidth {bandwidth / 1e6:g} -> "
              f"{fit.bandwidth_Bps / 1e6:.2f} MB/s")


def planted(truth: syn.GroundTruth) -> str:
    """What a curve was made with, in the units detect() reports."""
    if truth.packets:
        return f"period {truth.packets.payload_bytes} B, step {truth.packet_step_s * 1e6:+.2f} us"
    if truth.switches:
        at = truth.switches[0].size_bytes
        before = truth.latency_s + at / truth.bandwidth_Bps     # the first regime carried on to `at`
        return f"switch at {at} B, {(truth.clean_time_s([at])[0] - before) * 1e6:+.2f} us"
    if truth.alignment:
        a = truth.alignment
        return f"size mod {a.modulus} == {a.residue}, {a.penalty_s * 1e6:+.2f} us"
    if truth.spikes:
        return f"spike at {truth.spikes[0].size_bytes} B, {truth.spikes[0].extra_s * 1e6:+.2f} us"
    return "nothing"


def detector() -> None:
    print("Anomaly detector, 1% noise: each kind planted alone, true -> what detect() reports")
    base = dict(latency_s=5e-6, bandwidth_Bps=1e9)
    cases = {
        "packet_steps": (syn.GroundTruth(**base, packets=syn.Packets(2048, 400)), syn.linear(64, 16384, 64)),
        "protocol_switch": (syn.GroundTruth(**base, switches=(syn.Switch(32768, 10e-6, 2e9),)),
                            syn.netpipe(1, 4 * 2**20)),
        "alignment": (syn.GroundTruth(**base, alignment=syn.Alignment(8, 1e-6)), syn.linear(1, 512, 1)),
        "spike": (syn.GroundTruth(**base, spikes=(syn.Spike(4096, 20e-6),)), syn.powers_of_two(1, 2**20)),
        "none (clean)": (syn.GroundTruth(**base), syn.netpipe(1, 4 * 2**20)),
    }
    for name, (truth, grid) in cases.items():
        table = anomalies.detect(grid, curve(grid, truth, 0.01, seed=30).times)
        found = "; ".join(
            f"{row.kind} at {row.size:.0f} B, {row.magnitude * 1e6:+.2f} us"
            + (f", period {row.period:.0f} B ({row.period_low:.0f}..{row.period_high:.0f})"
               if np.isfinite(row.period) else "")
            + (f", modulus {row.modulus:.0f}" if np.isfinite(row.modulus) else "")
            for row in table.itertuples()) or "nothing"
        print(f"  {name:16s} planted: {planted(truth):34s} found: {found}")


def alignment_found(table) -> str:
    """The alignment findings of a detect() table, and what else it found."""
    classes = [f"size % {row.modulus:.0f} == {row.residue:.0f} {row.magnitude * 1e6:+.3f} us (score {row.score:.0f})"
               for row in table.itertuples() if row.kind == "alignment"]
    others = [f"{row.kind} at {row.size:.0f} B" for row in table.itertuples() if row.kind != "alignment"]
    return "; ".join(classes) or "no alignment", ", ".join(others) or "nothing"


def alignment() -> None:
    print("Alignment on dense grids, 1% noise: the class slower, or every other size slower (class faster, "
          "as aligned sizes are); true -> what detect() reports (magnitude: the class less the other sizes)")
    latency, bandwidth = 2e-6, 5e9
    plain = syn.GroundTruth(latency, bandwidth)
    cases = [  # modulus, grid (step), constant penalty (x latency), relative penalty (x time)
        (8, syn.linear(1, 2048, 1), 0.0, 0.10),
        (64, syn.linear(1, 2048, 1), 0.10, 0.0),
        (8, syn.linear(4, 8192, 4), 0.10, 0.0),
        (64, syn.linear(4, 8192, 4), 0.0, 0.05),
        (4096, syn.linear(512, 2**18, 512), 0.0, 0.10),
    ]
    for modulus, grid, constant, relative in cases:
        for class_faster in (False, True):
            planted = syn.Alignment(modulus, constant * latency, relative_penalty=relative, class_faster=class_faster)
            effect = planted.class_effect_s(grid, plain.clean_time_s(grid))
            table = anomalies.detect(grid, curve(grid, syn.GroundTruth(latency, bandwidth, alignment=planted), 0.01,
                                                 seed=40 + modulus).times)
            found, others = alignment_found(table)
            penalty = f"{relative:.0%} of the time" if relative else f"{constant * latency * 1e6:.2f} us"
            print(f"  {grid[1] - grid[0]} B grid to {grid[-1]} B, {'class faster' if class_faster else 'class slower'},"
                  f" penalty {penalty:>15s}: size % {modulus} == 0 {effect * 1e6:+.3f} us -> {found}; "
                  f"other findings: {others}")
    for grid in (syn.linear(1, 2048, 1), syn.linear(4, 8192, 4)):
        found, others = alignment_found(anomalies.detect(grid, curve(grid, plain, 0.01, seed=41).times))
        print(f"  {grid[1] - grid[0]} B grid to {grid[-1]} B, nothing planted -> {found}; other findings: {others}")


if __name__ == "__main__":
    hockney()
    piecewise()
    regimes()
    packets()
    detector()
    alignment()
