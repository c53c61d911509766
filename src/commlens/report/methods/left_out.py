"""Methods' words for the samples the harness took and left out: a sample shorter than half the calibrated
length (every calibration batch was slowed) starts its size's samples again (kernels/harness/measure.c),
and the point records how many it left out (`short_samples_dropped`)."""

from __future__ import annotations

import numpy as np
import xarray as xr

from commlens.report.methods.facts import count_of


def samples_left_out_words(ours: xr.Dataset, measured: int) -> str:
    """" No sample was left out ..." or " The samples of 2 measured points started again ...": over the measured
    points of commlens's own rows (`ours`, `measured` of them), as their launches recorded it; "" where
    none did (a dataset from before `short_samples_dropped`)."""
    if "short_samples_dropped" not in ours or not measured:
        return ""
    dropped = ours["short_samples_dropped"].where(ours["sample_count"] > 0).values
    recorded = np.isfinite(dropped)
    if not recorded.any():
        return ""
    restarted = int((dropped[recorded] > 0).sum())
    of = "" if recorded.sum() == measured else f" (of the {int(recorded.sum())} whose launches recorded it)"
    if not restarted:
        return f" No sample was left out{of}: no point's samples started again."
    return (f" The samples of {count_of(restarted, 'measured point')}{of} started again after one lasted less than "
            "half the calibrated length (every calibration batch was slowed, as when another process holds a core "
            f"throughout), and the harness left out the {count_of(int(dropped[recorded].sum()), 'sample')} so taken "
            "(`short_samples_dropped`).")
