"""What a careful reader checks before trusting a number, flagged where the data show it, each with what to
check: a variant faster than its plain kernel beyond both intervals (a variant does more, so it should not
be faster: a launch in another mode, a kernel that skipped its work), a bandwidth above what the path can
carry (the machine's own memcpy on one node, the emulated link's rate between nodes), points that rest on
one sample (their percentiles are that sample)."""

from __future__ import annotations

import numpy as np

from commlens.report.analysis_table import ReportData
from commlens.units import format_mbps, format_number, format_size

# A variant reads this much faster than its plain kernel, beyond both intervals, before it is flagged.
VARIANT_FASTER = 0.8
# A bandwidth this much above the path's ceiling is flagged (a ceiling measured with its own noise).
ABOVE_CEILING = 1.1
MEMCPY = "baseline.memcpy"


def sanity_flags(data: ReportData) -> list[str]:
    return _variants_faster(data) + _above_ceiling(data) + _one_sample(data)


def _variants_faster(data: ReportData) -> list[str]:
    points = data.points
    flags = []
    variants = sorted({kernel for kernel in points["kernel"] if "@" in kernel})
    for variant in variants:
        plain = variant.split("@", 1)[0]
        if plain not in set(points["kernel"]):
            continue
        mine = points[points["kernel"] == variant].set_index(["library", "placement", "size"])
        theirs = points[points["kernel"] == plain].set_index(["library", "placement", "size"])
        both = mine.add_suffix("_variant").join(theirs.add_suffix("_plain"), how="inner")
        faster = both[(both["ci_high_us_variant"] < both["ci_low_us_plain"])
                      & (both["time_us_variant"] < VARIANT_FASTER * both["time_us_plain"])]
        for (library, placement), rows in faster.groupby(level=[0, 1]):
            worst = rows.loc[(rows["time_us_variant"] / rows["time_us_plain"]).idxmin()]
            size = worst.name[2]
            flags.append(f"{library} {placement}: {variant} reads {format_number(worst['time_us_variant'])} us at "
                         f"{format_size(size)}, faster than plain {plain}'s {format_number(worst['time_us_plain'])} us "
                         f"beyond both intervals ({len(rows)} sizes); a variant does more than its plain kernel: check "
                         f"its launches (a mode of their own) and that it did its work.")
    return flags


def _above_ceiling(data: ReportData) -> list[str]:
    points, ds = data.points, data.ds
    flags = []
    memcpy = points[points["kernel"] == MEMCPY]
    rates = dict(zip(ds["placement"].values.tolist(), ds["network_rate"].values.tolist())) \
        if "network_rate" in ds.coords else {}
    for (library, placement, kernel), rows in points[points["kernel"] != MEMCPY].groupby(["library", "placement",
                                                                                         "kernel"]):
        nodes = int(rows["nodes"].iloc[0])
        ceiling, what = np.nan, ""
        if nodes == 1 and len(memcpy[memcpy["library"] == library]):
            ceiling, what = memcpy[memcpy["library"] == library]["bandwidth_Bps"].max(), "this machine's memcpy"
        rate = rates.get(placement)
        if nodes > 1 and isinstance(rate, (int, float)) and np.isfinite(rate) and rate > 0:
            ceiling, what = rate / 8, "the emulated link's rate"
        if not np.isfinite(ceiling):
            continue
        over = rows[rows["bandwidth_Bps"] > ABOVE_CEILING * ceiling]
        if len(over):
            top = over.loc[over["bandwidth_Bps"].idxmax()]
            flags.append(f"{library} {placement} {kernel}: {format_mbps(top['bandwidth_Bps'])} MB/s at "
                         f"{format_size(top['size'])}, above {what} ({format_mbps(ceiling)} MB/s) at {len(over)} "
                         f"sizes: check the bytes the kernel counts and whether its messages were sent at all.")
    return flags


def _one_sample(data: ReportData) -> list[str]:
    counts = data.ds["sample_count"]
    single = int((counts == 1).sum())
    if not single:
        return []
    measured = int((counts > 0).sum())
    return [f"{single} of {measured} points (one size in one launch) rest on one sample: their mean, median and "
            f"percentiles are that sample; raise the campaign's min_samples for tails."]
