"""What a dataset says of each kernel: its catalogue entry (kernels/catalogue.def) as the launches
recorded it, so that bandwidths, figures and Methods read the kernel as it was measured.

A launch's run record carries its kernel's description (the harness writes it); a kernel that no
launch measured takes it from a library's build record, and a launch written before descriptions
were recorded from the catalogue of these sources (commlens.launch.catalogue)."""

from __future__ import annotations

import json

from commlens.campaign import kernel_of
from commlens.launch.catalogue import CatalogueError, catalogue, describe_kernel


def description_of(kernel: str, recorded: dict | None, builds: dict[str, dict]) -> dict:
    """The description of campaign entry `kernel` (an @label is ignored): as recorded, as a build
    describes it, or as the catalogue does; {} where none knows it."""
    if recorded:
        return recorded
    name = kernel_of(kernel)
    for build in builds.values():
        for described in build.get("kernels", []):
            if isinstance(described, dict) and described.get("kernel") == name and "bytes_moved" in described:
                return described
    current = describe_kernel(name)
    if current is None:
        return {}
    return {"family": current.family, "tags": list(current.tags), "options": list(current.options),
            "windowed": current.windowed, "bytes_moved": {"factor": current.bytes_factor, "per": current.bytes_per}}


def is_windowed(kernel: str, recorded: dict | None) -> bool:
    """Whether the kernel keeps a window of messages in flight (--window, --window-buffers)."""
    if recorded and "windowed" in recorded:
        return bool(recorded["windowed"])
    current = describe_kernel(kernel_of(kernel))
    return bool(current and current.windowed)


def kernel_coordinates(kernels: list[str], descriptions: list[dict]) -> dict:
    """Coordinates over `kernel` from each kernel's description (see description_of)."""
    def moved(description, key, default):
        return description.get("bytes_moved", {}).get(key, default)

    return {
        "kernel_family": ("kernel", [d.get("family", "") for d in descriptions],
                          {"long_name": "kernels/<family>.c that holds the kernel"}),
        "kernel_tags": ("kernel", [" ".join(d.get("tags", [])) for d in descriptions],
                        {"long_name": "what the report groups the kernel with"}),
        "kernel_options": ("kernel", [" ".join(d.get("options", [])) for d in descriptions],
                           {"long_name": "the kernel options (commlens-kernels --help) the kernel reads"}),
        "windowed": ("kernel", [bool(d.get("windowed", False)) for d in descriptions]),
        "bytes_factor": ("kernel", [float(moved(d, "factor", 1.0)) for d in descriptions],
                         {"units": "1", "long_name": "bytes moved per unit of the metric, in message sizes, "
                                                     "times 1, the ranks or the pairs (bytes_per)"}),
        "bytes_per": ("kernel", [moved(d, "per", "") for d in descriptions],
                      {"long_name": "what bytes_factor is multiplied by: once, rank or pair"}),
    }


def windowed_kernels(ds) -> list[str]:
    """The kernels of a dataset that keep a window of messages in flight, as it recorded them (a dataset
    written before says nothing, and the catalogue of these sources is asked)."""
    kernels = [str(k) for k in ds["kernel"].values]
    if "windowed" in ds.coords:
        return [k for k, windowed in zip(kernels, ds["windowed"].values) if bool(windowed)]
    return [k for k in kernels if is_windowed(k, None)]


def recorded_bytes_factor(ds, kernel: str, nprocs: float) -> float:
    """bytes_factor of one kernel of a dataset on `nprocs` ranks, from what the dataset recorded."""
    from commlens.data.quantities import bytes_factor

    if "bytes_factor" in ds.coords and "bytes_per" in ds.coords:
        at = ds.sel(kernel=kernel)
        return bytes_factor(kernel, nprocs, float(at["bytes_factor"]), str(at["bytes_per"].values))
    return bytes_factor(kernel, nprocs)


def _words_per_kernel(ds, coordinate: str, attribute: str) -> dict[str, set[str]]:
    kernels = [str(k) for k in ds["kernel"].values]
    if coordinate in ds.coords:
        return {k: set(str(words).split()) for k, words in zip(kernels, ds[coordinate].values)}
    described = {k: describe_kernel(kernel_of(k)) for k in kernels}
    return {k: set(getattr(d, attribute)) if d else set() for k, d in described.items()}


def kernel_tags(ds) -> dict[str, set[str]]:
    """Each kernel's tags (what the report groups it with), as the dataset recorded them."""
    return _words_per_kernel(ds, "kernel_tags", "tags")


def kernel_options(ds) -> dict[str, set[str]]:
    """The kernel options (--help) each kernel reads, as the dataset recorded them."""
    return _words_per_kernel(ds, "kernel_options", "options")


def catalogue_kernels_tagged(tag: str) -> list[str]:
    """Every kernel of the catalogue tagged `tag`, for messages that say what a figure needs ([] where
    the catalogue cannot be read here)."""
    try:
        return [kernel.name for kernel in catalogue().values() if tag in kernel.tags]
    except CatalogueError:
        return []


# What the harness records of how it timed a kernel (kernels/harness/records.c, the launch record's args).
TIMING_KEYS = ("timing", "warmup", "iterations", "warmup_large", "iterations_large", "large_above", "rse_of")
TIMING_LONG_NAME = ("how the harness timed each kernel, from its launch record (JSON: timing precision|osu, warmup, "
                    "iterations and, for osu, their values above large_above bytes; rse_of: the statistic whose "
                    "relative standard error the stopping rule met, median, null where the harness predates it: "
                    "the mean); empty where no launch gave data or the harness predates the record")


def stopping_statistics(ds) -> dict[str, str]:
    """{kernel: the statistic whose relative standard error its launches' stopping rule met}, read from the
    dataset's `timing` coordinate: "median", or "mean" where the harness recorded no `rse_of` (it stopped on
    the mean's before it recorded which); kernels with no recorded timing are left out."""
    if "timing" not in ds.coords:
        return {}
    found = {}
    for kernel, recorded in zip(ds["kernel"].values.tolist(), ds["timing"].values.tolist()):
        if recorded:
            found[str(kernel)] = json.loads(recorded).get("rse_of") or "mean"
    return found


def recorded_timing(args: dict) -> str:
    """The timing part of a launch record's args, as JSON; empty where the record has none."""
    if "timing" not in args:
        return ""
    return json.dumps({key: args.get(key) for key in TIMING_KEYS}, sort_keys=True)
