"""Packet steps: a regular step wherever a message needs one packet more, found by the packet
model's search and confirmed boundary by boundary."""

from __future__ import annotations

import numpy as np

from commlens.analysis.models import best_packets, equivalent_payloads, runs_design, smallest_header
from commlens.analysis.models.packets import STEP_MISFIT, PacketSteps, local_steps


def packet_steps(x, y, sigma, baselines, threshold) -> PacketSteps | None:
    """Steps at a regular payload: the best packet model over each of `baselines`, confirmed
    boundary by boundary; the best confirmed one.

    Two baselines are tried because each fails where the other does not: one line
    for the whole curve is pulled off by a protocol switch, a line per segment of a
    first fit has already spent its segments on the steps when they are large.
    The evidence must pass `threshold` at most boundaries (PacketSteps.confirmed), so a single
    jump or a spike cannot make a staircase out of boundaries that have none; and line plus
    step must explain the typical window about as well as the noise allows.
    """
    confirmed = []
    for baseline in baselines:
        found = best_packets(x, y, 1 / sigma ** 2, baseline)
        if found is None:
            continue
        low, high = equivalent_payloads(x, *found)
        payload = (low + high) // 2
        header = smallest_header(x, *found, payload)
        heights, z, misfit = local_steps(x, y, sigma, payload, header)
        if z.size < 3:
            continue
        steps = PacketSteps(payload, header, (low, high), heights, z, payload / float(np.median(np.diff(x))))
        # A step holds its level until the next one; a slow size every period (alignment)
        # makes "steps" too, but a line and a step cannot follow it back down. Most boundaries must step
        # up, the typical one by a noise width or more: one large jump among flat boundaries is no staircase.
        if steps.confirmed(threshold) and np.median(misfit) <= STEP_MISFIT:
            confirmed.append(steps)
    return max(confirmed, key=lambda steps: steps.score, default=None)


def packet_row(x, steps: PacketSteps, height_s: float) -> dict:
    """The findings table's row of the steps: where the first one is, its height and the payloads."""
    low, high = steps.payload_interval
    first_boundary = (np.ceil((x[0] + steps.header) / steps.payload)) * steps.payload - steps.header
    first = np.searchsorted(x, first_boundary, side="right")
    return {"kind": "packet_steps", "size": x[first], "size_low": x[first - 1] if first else np.nan,
            "size_high": x[first], "magnitude": height_s, "score": steps.score,
            "period": float(steps.payload), "period_low": float(low), "period_high": float(high),
            "header": float(steps.header)}


def step_height(x, y, w, runs, packets) -> float:
    """Height of one packet step, fitted together with a line per segment (weighted least squares)."""
    design = np.column_stack([runs_design(x, runs), packets]) * np.sqrt(w)[:, None]
    return float(np.linalg.lstsq(design, y * np.sqrt(w), rcond=None)[0][-1])
