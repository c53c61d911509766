"""What the report opens with: its title, saying what was measured on what, and its conclusions, one
sentence each, generated from the analysis and linked to the evidence further down (the headline table,
the findings table, each comparison, each flag).

Every number is the one the analysis printed beside it elsewhere in the report; nothing here is computed
afresh. Words for a comparison depend on what the campaign declared: pairs listed under `compare:` are an
update (what changed: regressed, improved), other pairs are two libraries (how they differ: slower, faster).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from commlens.analysis.anomalies import PRACTICAL
from commlens.analysis.ranges import changed_ranges
from commlens.launch.families import family_named
from commlens.report.analysis_table import ReportData
from commlens.report.comparison_sections import ComparisonSection
from commlens.report.glance import Glance
from commlens.units import format_factor, format_size, format_size_range

# Comparison sentences per pair: its largest changes, at most this many.
MOST_CHANGES = 3


@dataclass(frozen=True)
class Conclusion:
    text: str
    evidence: str      # the anchor in the report that holds what the sentence rests on


def verdict_words(verdict: str, update: bool) -> str:
    """A verdict as the report words it: an update's (regressed, improved) or two libraries' (slower, faster);
    a change of a known direction but an unsure size says so."""
    words = {"regressed": "regressed" if update else "slower", "improved": "improved" if update else "faster",
             "slower": "slower, by an amount under or near the margin", "faster": "faster, by an amount under or "
             "near the margin"}
    return words.get(verdict, verdict)


def library_names(data: ReportData) -> list[str]:
    """Each library row as its library reports itself ('MPICH 5.0.2'), where the dataset recorded it, else
    the row's name."""
    ds = data.ds
    if "family" not in ds.coords or "library_version" not in ds.coords:
        return list(data.libraries)
    names = []
    for row, family, version in zip(data.libraries, ds["family"].values.tolist(),
                                    ds["library_version"].values.tolist()):
        try:
            family_name = family_named(str(family)).display_name
        except (KeyError, ValueError):
            family_name = ""
        number = re.search(r"(\d+(?:\.\d+)+)", str(version or ""))
        names.append(f"{family_name} {number.group(1)}" if family_name and number else row)
    return names


def placement_words(data: ReportData) -> str:
    """'on one node and between two nodes': the placements' node counts in words."""
    ds = data.ds
    nodes = sorted(set(int(n) for n in ds["nodes"].values)) if "nodes" in ds.coords else []
    words = ["on one node" if n == 1 else f"between {n} nodes" if n > 2 else "between two nodes" for n in nodes]
    if "emulated" in ds.coords and bool(np.asarray(ds["emulated"].values).any()):
        words = [w + (" (emulated on one host)" if w.startswith("between") else "") for w in words]
    return " and ".join(words)


def report_title(data: ReportData) -> str:
    """What was measured on what: 'MPICH 5.0.2 and Open MPI 5.0.11, on one node and between two nodes
    (emulated on one host), 1 B to 4 MiB' (a study's name first where the campaign names one)."""
    names = list(dict.fromkeys(library_names(data)))
    libraries = ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else (names[0] if names else "")
    points = data.points
    sizes = ""
    if len(points):
        low, high = int(points["size"].min()), int(points["size"].max())
        sizes = f", {format_size(low)} to {format_size(high)}" if low != high else f", {format_size(low)}"
    study = data.config.get("report", {}).get("study")
    title = f"{libraries}, {placement_words(data)}{sizes}"
    return f"{study}: {title}" if study else title


def conclusions(data: ReportData, glance: Glance, comparisons: list[ComparisonSection]) -> list[Conclusion]:
    """The report's opening sentences (see the module's docstring)."""
    found = _headlines(glance) + _findings(data) + _comparisons(comparisons)
    return found + _flags(data)


def _headlines(glance: Glance) -> list[Conclusion]:
    if glance.no_data is not None or glance.headline.empty:
        return [Conclusion("No launch gave data: the campaign measured nothing (At a glance says why).",
                           "at-a-glance")]
    out = []
    for _, row in glance.headline.iterrows():
        text = (f"{row['library']} {row['placement']} ({row['kernel']}): at {row['smallest size']} "
                f"{_with_unit(row['latency (us) [95%]'], 'us')}")
        if row.get("peak bandwidth (MB/s) [95%]"):
            text += (f"; peak bandwidth over {row['peak over']} "
                     f"{_with_unit(row['peak bandwidth (MB/s) [95%]'], 'MB/s')}")
        out.append(Conclusion(text + ".", "at-a-glance"))
    return out


def _with_unit(text: str, unit: str) -> str:
    """The headline table's cell with its unit after the number and its interval, before any words."""
    for words in ("; too few launches", " within one launch"):
        if words in text:
            head, tail = text.split(words, 1)
            return f"{head} {unit}{words}{tail}"
    return f"{text} {unit}"


def _findings(data: ReportData) -> list[Conclusion]:
    table = data.findings
    out = []
    for _, row in table.iterrows():
        where = f"{row['library']} {row['placement']} ({row['kernel']})"
        seen = (f", in {int(row['launches'])} of {int(row['of_launches'])} launches"
                if np.isfinite(row.get("launches", np.nan)) and np.isfinite(row.get("of_launches", np.nan)) else "")
        kind = row["kind"]
        if kind == "protocol_switch":
            text = (f"{where}: a protocol switch at {format_size(row['size'])}{seen}, the time "
                    f"{'up' if row['magnitude'] > 0 else 'down'} by {row['relative']:.0%} there")
        elif kind == "regime_change":
            text = (f"{where}: a new regime from {format_size(row['size'])}{seen} "
                    f"(its bandwidth {row['relative']:.0%} apart)")
        elif kind == "packet_steps":
            text = (f"{where}: a step every {row['period']:.0f} B from {format_size(row['size'])}{seen} (packets "
                    f"of that payload; each step {row['relative']:.0%} of a packet's wire time)")
        elif kind == "launch_modes":
            text = f"{where}: launches ran in two modes, {row['note']}"
        elif kind == "alignment":
            text = f"{where}: sizes with size % {int(row['modulus'])} == {int(row['residue'])} differ{seen}"
        else:
            text = f"{where}: a {kind.replace('_', ' ')} at {format_size(row['size'])}{seen}"
        if row.get("note") and kind != "launch_modes":
            text += f" ({row['note']})"
        out.append(Conclusion(text + ".", "findings"))
    return out


def _comparisons(sections: list[ComparisonSection]) -> list[Conclusion]:
    out = []
    for section in sections:
        comparison = section.comparison
        update = comparison.asked
        ranges = changed_ranges(comparison.result)
        if ranges.empty:
            words = "nothing changed beyond the margin" if update else "no size range differs"
            out.append(Conclusion(f"{comparison.title}: {words} (the verdicts: {_counts(comparison, update)}).",
                                  comparison.name))
            continue
        ranges = ranges.assign(strength=np.abs(np.log(ranges["ratio"].astype(float))) * ranges["sizes"])
        largest = ranges.sort_values("strength", ascending=False).head(MOST_CHANGES)
        changes = "; ".join(
            f"{row['placement'] if 'placement' in row else ''} {row.get('kernel', '')} "
            f"{format_size_range(row['size_from'], row['size_to'])} {format_factor(row['ratio'])} "
            f"({verdict_words(row['verdict'], update)})".strip() for _, row in largest.iterrows())
        more = f", and {len(ranges) - len(largest)} more ranges" if len(ranges) > len(largest) else ""
        out.append(Conclusion(f"{comparison.title}: {changes}{more}.", comparison.name))
    return out


def _counts(comparison, update: bool) -> str:
    return ", ".join(f"{n} {verdict_words(verdict, update)}" for verdict, n in comparison.counts.items() if n)


def _flags(data: ReportData) -> list[Conclusion]:
    """What to check before trusting a number (commlens.report.sanity)."""
    from commlens.report.sanity import sanity_flags

    return [Conclusion(f"Check: {flag}", "sanity") for flag in sanity_flags(data)]


def practical_sizes() -> str:
    """The findings' practical sizes, as Methods and the findings table state them."""
    return ", ".join(f"{share:.0%} for {kind.replace('_', ' ')}s" for kind, share in PRACTICAL.items())
