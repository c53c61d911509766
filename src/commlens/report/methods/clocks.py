"""Methods' words for collectives timed in windows (--method window): how well the ranks' clocks were
synchronised, from what each launch recorded (its kernel_info's clock_sync), never from the code."""

from __future__ import annotations

import json

import numpy as np

from commlens.report.methods.facts import NOT_RECORDED, Facts


def clock_sync_words(facts: Facts, kernel: str) -> str:
    """"clocks synchronised to rank 0's ...": the recorded fits of `kernel`'s launches that gave data."""
    if "kernel_info" not in facts.ds:
        return f"clock synchronisation {NOT_RECORDED}"
    infos = facts.ds["kernel_info"].sel(kernel=kernel)
    gave_data = facts.measured.sel(kernel=kernel)
    gave_data = (gave_data.any("size") if "size" in gave_data.dims else gave_data).transpose(*infos.dims)
    fits = [json.loads(info).get("clock_sync") for info, ok in zip(infos.values.ravel(), gave_data.values.ravel())
            if ok and info]
    fits = [fit for fit in fits if fit and "largest" in fit]
    if not fits:
        return f"clock synchronisation {NOT_RECORDED}"
    largest = {key: max(fit["largest"][key] for fit in fits) for key in fits[0]["largest"]}
    return (f"each rank's clock fitted against rank 0's (offset and drift) from {fits[0]['rounds']} bursts of "
            f"{fits[0]['pings']} ping-pongs in {len(fits)} launch(es): offsets up to "
            f"{largest['offset_s'] * 1e6:.3g} us (stated error at most {largest['offset_error_s'] * 1e6:.2g} us), "
            f"drifts up to {largest['drift']:.2g} (error at most {largest['drift_error']:.2g}); windows some rank "
            f"entered late are left out{_exit_skew_words(facts, kernel)}")


def _exit_skew_words(facts: Facts, kernel: str) -> str:
    """How far apart the ranks left their windows, over the points the launches recorded it for."""
    if "exit_skew_s" not in facts.ds:
        return ""
    skews = facts.ds["exit_skew_s"].where(facts.measured).sel(kernel=kernel).values
    skews = skews[np.isfinite(skews)]
    if not skews.size:
        return ""
    points = f"{skews.size} point{'s' if skews.size > 1 else ''}"
    return (f"; the ranks left a window {np.median(skews) * 1e6:.3g} us apart (exit skew, the last finish less "
            f"the first; median over {points}, {skews.min() * 1e6:.3g} to {skews.max() * 1e6:.3g} us)")
