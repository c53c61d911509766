"""Methods: the order launches ran in (commbench.campaign.rounds), stated from what the launches recorded:
their rounds, their positions, the seed and their start times."""

from __future__ import annotations

import numpy as np
import xarray as xr

from commbench.io.conventions import timestamps
from commbench.report.methods.facts import NOT_RECORDED

RUN_ORDER = ("library", "placement", "kernel", "launch")


def rounds_paragraph(ds: xr.Dataset) -> str:
    """How the launches were ordered: in rounds, with the seed, how many launches recorded their place,
    and whether their start times keep the rounds apart; or that the order was not recorded."""
    if "round" not in ds or "round_position" not in ds:
        return f"Order of launches: {NOT_RECORDED}."
    rounds = ds["round"].transpose(*RUN_ORDER).values.ravel()
    placed = rounds >= 0
    if not placed.any():
        return f"Order of launches: {NOT_RECORDED} (no launch recorded a round)."
    seed = ds.attrs.get("round_seed")
    count = len(np.unique(rounds[placed]))
    text = (f"Launches ran in {count} round{'s' if count != 1 else ''}: each round ran every library, placement "
            f"and kernel once, in an order drawn at random per round from round_seed "
            f"{NOT_RECORDED if seed is None else seed}, and the next round started once it had ended. "
            f"{int(placed.sum())} launches recorded their round and position in it")
    if "status" in ds:   # launches that left a record (not missing, not skipped) without a round
        status = ds["status"].transpose(*RUN_ORDER).values.ravel()[~placed]
        unplaced = int(np.isin(status, ["missing", "skipped"], invert=True).sum())
        if unplaced:
            text += f"; {unplaced} launches recorded none"
    apart = _rounds_apart(ds, rounds, placed)
    if apart is not None:
        text += ("; by their recorded start times, no launch of a round started before one of the round "
                 "before it" if apart else "; by their recorded start times, rounds overlap")
    return text + "."


def _rounds_apart(ds: xr.Dataset, rounds: np.ndarray, placed: np.ndarray) -> bool | None:
    """Whether every launch of a round started after every launch of the round before it (None: too
    few recorded start times to tell)."""
    if "started" not in ds:
        return None
    started = ds["started"].transpose(*RUN_ORDER).values.ravel()
    started = started if started.dtype.kind == "M" else timestamps(started)
    known = placed & ~np.isnat(started)
    numbers = sorted(set(rounds[known].tolist()))
    if len(numbers) < 2:
        return None
    spans = [(started[known & (rounds == r)].min(), started[known & (rounds == r)].max()) for r in numbers]
    return all(earlier[1] <= later[0] for earlier, later in zip(spans, spans[1:]))
