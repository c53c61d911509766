"""Methods: the order launches ran in (commlens.campaign.rounds), stated from what the launches recorded:
their rounds, their positions, the seed and their start times."""

from __future__ import annotations

import json

import numpy as np
import xarray as xr

from commlens.analysis.sequential import DECIDED, UNDECIDED
from commlens.io.conventions import timestamps
from commlens.report.methods.facts import NOT_RECORDED

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


def until_decided_paragraph(ds: xr.Dataset, until: dict) -> str:
    """How a campaign of launches until decided chose its rounds, from the looks its dataset recorded
    (commlens.orchestrate.until_decided)."""
    text = f"Launches until decided: at least {until['min']} and at most {until['max']} rounds."
    recorded = ds.attrs.get("until_decided")
    if recorded is None:
        return text + f" The looks that chose the rounds: {NOT_RECORDED} (the workflow was run without commlens run)."
    text += (f" From round {until['min']} on, each round was followed by a look at the compare: pairs (commlens."
             f"analysis.sequential: the false discovery rate spent over the looks), and another round ran while a "
             f"compared cell was undecided and could still be decided.")
    record = json.loads(recorded)
    for look in record.get("looks", []):
        pairs = "; ".join(f"{pair['candidate']} against {pair['baseline']}: " + ", ".join(
            f"{pair[name]} {name}" for name in (*DECIDED, UNDECIDED) if pair.get(name))
            + (f" ({pair['could_still_decide']} could still be decided)" if pair.get("could_still_decide") else "")
            for pair in look.get("pairs", []))
        text += f" After {look['rounds']} rounds: {pairs or 'no compared cell'}."
    if "stopped" in record:
        text += f" Stopped after {record['rounds']} rounds: {record['stopped']}."
    return text
