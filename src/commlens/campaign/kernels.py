"""A campaign's kernel entries: which kernel an entry runs, and the sizes a schedule covers. Which kernels
there are is the kernel catalogue's to say (commlens.launch.catalogue)."""

from __future__ import annotations

from commlens.units import parse_size


def kernel_of(entry: str) -> str:
    """The kernel a campaign entry runs: 'pingpong.send@nocache' runs 'pingpong.send'."""
    return entry.split("@", 1)[0]


# Ranges a schedule covers when the campaign gives no min or max.
SCHEDULE_DEFAULT_RANGE = {"powers": (1, 4 * 2**20), "netpipe": (1, 4 * 2**20),
                          "small": (4, 8000), "large": (1, 4 * 2**20)}


def schedule_range(sizes: dict) -> tuple[int, int]:
    low, high = SCHEDULE_DEFAULT_RANGE[sizes["schedule"]]
    return parse_size(sizes.get("min", low)), parse_size(sizes.get("max", high))


def timing_args(spec: dict) -> list[str]:
    """commlens-kernels' options for an entry's `timing`, `iterations` and `warmup`: only those the entry
    gives, so that the harness applies its own defaults for the timing (OSU's counts with timing osu)."""
    args = ["--osu"] if spec.get("timing") == "osu" else []
    for key, option in (("iterations", "-i"), ("warmup", "-x")):
        if key in spec:
            args += [option, str(spec[key])]
    return args
