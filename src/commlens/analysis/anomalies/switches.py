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


def continuity_score(x, y, w, left, right, dispersion) -> float:
    """How much worse one continuous line with a bend (y = a + b x + c max(0, x - k), the bend k anywhere
    from two sizes before the breakpoint to one after it) fits the two segments either side than two
    lines each of its own: the square root of the difference of their weighted residual sums, in noise
    variances, as a breakpoint's score is. Small: the curve may not jump there at all (a regime change);
    large: it must (a switch)."""
    index = np.arange(left[0], right[1] + 1)
    xs, ys, ws = x[index], y[index], np.sqrt(w[index])
    apart = _line_cost(x, y, w, [left]) + _line_cost(x, y, w, [right])
    low, high = x[max(right[0] - 2, left[0])], x[min(right[0] + 1, right[1])]
    bends = np.geomspace(low, high, 48) if low > 0 else np.linspace(low, high, 48)
    best = np.inf
    for bend in bends:
        design = np.column_stack([np.ones_like(xs), xs, np.maximum(0.0, xs - bend)]) * ws[:, None]
        coefficients, *_ = np.linalg.lstsq(design, ys * ws, rcond=None)
        best = min(best, float(((design @ coefficients - ys * ws) ** 2).sum()))
    return float(np.sqrt(max(best - apart, 0.0) / dispersion ** 2))


# A breakpoint is already significant when this asks whether the curve jumps there: one question at one
# place, not a search over every size, so it needs no more than a one-sided test at 0.15% (z = 3) rather
# than the search's threshold. Curves that barely show a breakpoint at all (a score of 6-7 at 7% noise)
# still show their 30% jump at 5-6.
JUMP_THRESHOLD = 3.0


def switch_rows(x, y, w, runs, scores, dispersion: float = 1.0) -> list[dict]:
    """One row per breakpoint: the jump between the two lines at its first size, and both bandwidths. Where
    one continuous line with a bend fits as well (continuity_score under JUMP_THRESHOLD), the curve need
    not jump there: its jump is 0, and only a new bandwidth can make it a finding (a regime change)."""
    lines = segment_lines(x, y, w, runs)
    rows = []
    for left, right, before, after, score in zip(runs[:-1], runs[1:], lines, lines[1:], scores):
        at = x[right[0]]
        jumps = continuity_score(x, y, w, left, right, dispersion) >= JUMP_THRESHOLD
        rows.append({"kind": "protocol_switch", "size": at, "size_low": x[right[0] - 1], "size_high": at,
                     "magnitude": (after[0] + after[1] * at) - (before[0] + before[1] * at) if jumps else 0.0,
                     "score": score, "bandwidth_before_Bps": _bandwidth(before[1]),
                     "bandwidth_after_Bps": _bandwidth(after[1])})
    return rows
