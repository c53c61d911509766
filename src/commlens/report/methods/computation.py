"""Methods' words for kernels that compute between their calls and compare that computation with the same
one before MPI started (availability.*): what MPI being up took from the computation with nothing in
flight (a progress thread's standing cost), per library row, from each launch's kernel_info."""

from __future__ import annotations

import json

import numpy as np

from commlens.report.methods.facts import Facts


def standing_cost_words(facts: Facts) -> str:
    """"With MPI up and nothing in flight, the computation ran at 0.46 of its rate before MPI started on
    row a, ...": rank 0's recorded rates over the launches that gave data; "" where none recorded them."""
    if "kernel_info" not in facts.ds:
        return ""
    infos = facts.ds["kernel_info"].transpose("library", "placement", "kernel", "launch")
    gave = (facts.measured.any("size") if "size" in facts.measured.dims else facts.measured)
    gave_data = gave.transpose(*infos.dims).values
    kept: dict[str, list[float]] = {}
    for index, info in np.ndenumerate(infos.values):
        rates = json.loads(info) if info and gave_data[index] else {}
        if "compute_unit_s_before_mpi" in rates and rates.get("compute_unit_s_with_mpi", 0) > 0:
            library = str(facts.ds["library"].values[index[0]])
            kept.setdefault(library, []).append(rates["compute_unit_s_before_mpi"] / rates["compute_unit_s_with_mpi"])
    if not kept:
        return ""
    rows = "; ".join(f"{np.median(ratios):.2f} on {library} ({_spread(ratios)})" for library, ratios in kept.items())
    return ("Availability kernels time their computation before MPI starts, when no library thread runs, and "
            "again once MPI is up with nothing in flight; the second ran at this share of the first's rate "
            f"(rank 0, median over launches): {rows}.")


def _spread(ratios: list[float]) -> str:
    if len(ratios) == 1:
        return "1 launch"
    return f"{len(ratios)} launches, {min(ratios):.2f} to {max(ratios):.2f}"
