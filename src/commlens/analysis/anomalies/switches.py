"""Protocol switches: the breakpoints of a segmented fit that one line across them could not
explain, each with the jump there and the bandwidth either side."""

from __future__ import annotations

import numpy as np

from commlens.analysis.models import segment_lines, weighted_line


def _line_cost(x, y, w, runs) -> float:
    """Weighted RSS of one line through all the points of `runs`."""
    index = np.concatenate([np.arange(first, last + 1) for first, last in runs])
    return float(weighted_line(x[index], y[index], w[index])[2])


def significant_runs(x, y, w, runs, dispersion, threshold) -> tuple[list, list, np.ndarray]:
    """The breakpoints that pass `threshold`, with their scores, and the weights left for the fit.

    A breakpoint's evidence is how much worse one line would fit its two
    neighbouring segments (residual sum of squares, in noise variances); the
    square root of that is its score, and the weakest is dropped until all pass.
    A short segment whose two neighbours one line fits is a detour, not a switch (a
    switch changes the curve from then on): it is merged away and its sizes lose
    their weight, so it cannot tilt the line it interrupts. A segment longer than
    either neighbour is not a detour: a rendezvous switch adds a latency that
    relative errors can no longer see at the largest sizes, so one line can fit the
    sizes before the switch and the last few sizes after it.
    """
    runs, w = list(runs), w.copy()

    def score(left, right):
        gain = _line_cost(x, y, w, [left, right]) - _line_cost(x, y, w, [left]) - _line_cost(x, y, w, [right])
        return np.sqrt(max(gain, 0.0) / dispersion ** 2)

    while True:
        scores = [score(left, right) for left, right in zip(runs[:-1], runs[1:])]
        if scores and min(scores) < threshold:
            weakest = int(np.argmin(scores))
            runs[weakest:weakest + 2] = [(runs[weakest][0], runs[weakest + 1][1])]
            continue
        length = [last - first + 1 for first, last in runs]
        detours = [k for k in range(1, len(runs) - 1)
                   if length[k] <= min(length[k - 1], length[k + 1]) and score(runs[k - 1], runs[k + 1]) < threshold]
        if not detours:
            return runs, scores, w
        k = detours[0]
        w[runs[k][0]:runs[k][1] + 1] = 0
        runs[k - 1:k + 2] = [(runs[k - 1][0], runs[k + 1][1])]


def _bandwidth(slope: float) -> float:
    return 1 / slope if slope > 0 else np.inf


def switch_rows(x, y, w, runs, scores) -> list[dict]:
    """One row per breakpoint: the jump between the two lines at its first size, and both bandwidths."""
    lines = segment_lines(x, y, w, runs)
    rows = []
    for (first, _), (a_before, b_before), (a_after, b_after), score in zip(runs[1:], lines, lines[1:], scores):
        at = x[first]
        rows.append({"kind": "protocol_switch", "size": at, "size_low": x[first - 1], "size_high": at,
                     "magnitude": (a_after + b_after * at) - (a_before + b_before * at), "score": score,
                     "bandwidth_before_Bps": _bandwidth(b_before), "bandwidth_after_Bps": _bandwidth(b_after)})
    return rows
