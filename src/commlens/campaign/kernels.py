"""A campaign's kernel entries: which kernel an entry runs, and the sizes a schedule covers. Which kernels
there are is the kernel catalogue's to say (commlens.launch.catalogue)."""

from __future__ import annotations

import itertools

from commlens.units import parse_size


def kernel_of(entry: str) -> str:
    """The kernel a campaign entry runs: 'pingpong.send@nocache' runs 'pingpong.send'."""
    return entry.split("@", 1)[0]


# Ranges a schedule covers when the campaign gives no min or max.
# The powers schedule starts where the harness's default MIN does (kernels/harness/options.c): at 0 B for a
# kernel read as a time (osu_latency and IMB's PingPong measure 0 B), at 1 B for bandwidths and collectives;
# here 0, so that a count of its sizes is at most one more than a launch measures.
SCHEDULE_DEFAULT_RANGE = {"powers": (0, 4 * 2**20), "netpipe": (1, 4 * 2**20),
                          "small": (4, 8000), "large": (1, 4 * 2**20)}


# The harness's defaults for a schedule's options (kernels/harness/options.c): a campaign passes on only
# those it gives.
SCHEDULE_DEFAULT_OPTIONS = {"per_octave": 2, "perturbation": 3, "step": 32}


def size_range_option(sizes: dict) -> str:
    """commlens-kernels' -m for a schedule: MIN:MAX, MIN left to the harness where the campaign gives none
    on the powers schedule (its default depends on the kernel: see SCHEDULE_DEFAULT_RANGE)."""
    low, high = schedule_range(sizes)
    return f"{'' if sizes['schedule'] == 'powers' and 'min' not in sizes else low}:{high}"


def schedule_range(sizes: dict) -> tuple[int, int]:
    low, high = SCHEDULE_DEFAULT_RANGE[sizes["schedule"]]
    return parse_size(sizes.get("min", low)), parse_size(sizes.get("max", high))


def size_count(sizes: dict) -> int:
    """How many sizes a kernel entry's `sizes` gives each launch, as the harness expands its schedule
    (kernels/harness/sizes.c): `small` in steps of 1 up to 4Mi is four million sizes, counted here
    without listing them; the other schedules step geometrically (at most 64 points an octave), so
    listing theirs costs little however large their range."""
    if "list" in sizes:
        return len(sizes["list"])
    low, high = schedule_range(sizes)
    if low > high:
        return 0
    option = {**SCHEDULE_DEFAULT_OPTIONS, **sizes}
    start = max(low, 1)
    if sizes["schedule"] == "small":        # min, then every multiple of step above it up to max
        return 1 + high // option["step"] - low // option["step"]
    if sizes["schedule"] == "powers":       # (0,) min, 2 min, 4 min ... up to max
        return (low == 0) + (high // start).bit_length()
    if sizes["schedule"] == "large":        # (0,) 1, 2, 3, 4, 6, 8, 12 ...: 2^k and 3 * 2^(k-1)
        points = [1] + [point for k in range(1, high.bit_length() + 1) for point in (1 << k, 3 << (k - 1))]
        return (low == 0) + sum(low <= point <= high for point in points)
    # netpipe: per_octave points an octave from max(min, 1), each also perturbation bytes below and above
    per_octave, perturbation = option["per_octave"], option["perturbation"]
    distinct: set[int] = {0} if low == 0 else set()
    for step in itertools.count():
        try:
            centre = int(start * 2.0 ** (step / per_octave) + 0.5)     # C's round() of a positive double
        except OverflowError:       # past what a double holds, and so past any max the harness takes
            break
        if centre > high:
            break
        distinct.update(point for point in (centre - perturbation, centre, centre + perturbation)
                        if low <= point <= high and point > 0)
    return len(distinct)


def timing_args(spec: dict) -> list[str]:
    """commlens-kernels' options for an entry's `timing`, `iterations` and `warmup`: only those the entry
    gives, so that the harness applies its own defaults for the timing (OSU's counts with timing osu)."""
    args = ["--osu"] if spec.get("timing") == "osu" else []
    for key, option in (("iterations", "-i"), ("warmup", "-x")):
        if key in spec:
            args += [option, str(spec[key])]
    return args
