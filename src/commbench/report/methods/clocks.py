"""Methods' words for collectives timed in windows (--method window): how well the ranks' clocks were
synchronised, from what each launch recorded (its kernel_info's clock_sync), never from the code."""

from __future__ import annotations

import json

from commbench.report.methods.facts import NOT_RECORDED, _Facts


def clock_sync_words(facts: _Facts, kernel: str) -> str:
    """"clocks synchronised to rank 0's ...": the recorded fits of `kernel`'s launches that gave data."""
    if "kernel_info" not in facts.ds:
        return f"clock synchronisation {NOT_RECORDED}"
    infos = facts.ds["kernel_info"].sel(kernel=kernel)
    gave_data = facts.measured.sel(kernel=kernel)
    gave_data = (gave_data.any("size") if "size" in gave_data.dims else gave_data).transpose(*infos.dims)
    fits = [json.loads(info).get("clock_sync") for info, ok in zip(infos.values.ravel(), gave_data.values.ravel())
            if ok and info]
    ranks = [rank for fit in fits if fit for rank in fit.get("ranks", [])]
    if not ranks:
        return f"clock synchronisation {NOT_RECORDED}"
    first = next(fit for fit in fits if fit)
    offset = max(abs(rank["offset_s"]) for rank in ranks)
    offset_error = max(rank["offset_error_s"] for rank in ranks)
    drift = max(abs(rank["drift"]) for rank in ranks)
    drift_error = max(rank["drift_error"] for rank in ranks)
    return (f"each rank's clock fitted against rank 0's (offset and drift) from {first['rounds']} bursts of "
            f"{first['pings']} ping-pongs in {len(fits)} launch(es): offsets up to {offset * 1e6:.3g} us "
            f"(stated error at most {offset_error * 1e6:.2g} us), drifts up to {drift:.2g} (error at most "
            f"{drift_error:.2g}); windows some rank entered late are left out")
