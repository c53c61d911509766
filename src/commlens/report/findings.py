"""The report's findings table: what commlens.analysis.anomalies found in each curve, in the units the
rest of the report uses (sizes in B/KiB/MiB, changes in microseconds, bandwidths in MB/s), with a
note where a finding may have another cause than its kind says.

Where the launches recorded the library's control variables, a protocol switch, regime change or packet
step names the size-valued settings of its row that lie where it was found, or says that none does
(commlens.analysis.configuration.explain_findings).

A protocol switch that every library shows at the same size on one node, and no off-node curve of the
kernel shows there, is more likely a cache than a protocol: the libraries' protocols differ, while the
size at which a message stops fitting a cache level is the machine's. The note says so as a
possibility, with its reason.
"""

from __future__ import annotations

import pandas as pd

from commlens.analysis.anomalies import PRACTICAL
from commlens.analysis.configuration import explain_findings
from commlens.report.analysis_table import ReportData
from commlens.report.elements import Table
from commlens.units import format_exact_size, format_mbps, format_number, format_us

CAPTION = ("Every packet boundary, protocol switch, regime change, alignment effect and spike "
           "commlens.analysis.anomalies found in each launch and the launches agree on (`launches`: how many of "
           "them show it), each significant against its curve's own noise and large enough to matter: `size` "
           "is its share of the time at its size (of a packet's wire time for packet steps, the bandwidth's "
           "change for a regime change), at least " + ", ".join(f"{share:.0%} for {kind.replace('_', ' ')}s"
                                                                for kind, share in PRACTICAL.items()) +
           ". `at`: where it starts (the first size past the first packet boundary or the switch, the first size "
           "of an alignment class, the spike's size), `between`: the measured sizes it lies between; `change` "
           "(microseconds): a packet step's height, the jump at a switch, an alignment class's time less the "
           "other sizes' (below 0: faster) or a spike's extra time; `score`: the change in units of the curve's "
           "noise. Launches in two modes are a finding too: the slow launches and by how much. Where the launches "
           "recorded the library's control variables, a switch, regime change or packet step says which size-valued "
           "setting lies within one step of the size grid of it (`note`: \"at 8 KiB: btl_sm_eager_limit = 8192\"), "
           "or that no recorded setting explains it.")


def findings_table(data: ReportData) -> Table:
    findings = data.findings
    notes = cache_notes(findings, data)
    settings = setting_notes(data)
    rows = [_row(finding, "; ".join(note for note in (settings.get(index, ""), notes.get(index, "")) if note))
            for index, finding in findings.iterrows()]
    frame = pd.DataFrame(rows, columns=["library", "placement", "kernel", "finding", "at", "between", "change (us)",
                                        "size", "score", "launches", "detail", "note"])
    frame = frame.loc[:, [column for column in frame if column in ("library", "placement", "kernel", "finding")
                          or (frame[column] != "").any()]]
    return Table("findings", "Findings", CAPTION, frame)


def _row(finding: pd.Series, note: str) -> dict:
    low, high = finding.get("size_low"), finding.get("size_high")
    between = (f"{format_exact_size(low)} and {format_exact_size(high)}"
               if _finite(low) and _finite(high) and low != high else "")
    modes = finding["kind"] == "launch_modes"
    shown = finding.get("launches"), finding.get("of_launches")
    own = str(finding.get("note") or "")
    return {"library": finding["library"], "placement": finding["placement"], "kernel": finding["kernel"],
            "finding": str(finding["kind"]).replace("_", " "),
            "at": "" if modes else format_exact_size(finding["size"]),
            "between": between, "change (us)": "" if modes else format_us(finding["magnitude"]),
            "size": f"{finding['relative']:.0%}" if _finite(finding.get("relative")) and not modes else "",
            "score": format_number(finding["score"], 3),
            "launches": f"{int(shown[0])} of {int(shown[1])}" if _finite(shown[0]) and _finite(shown[1]) else "",
            "detail": "" if modes else _detail(finding), "note": "; ".join(part for part in (own, note) if part)}


def _finite(value) -> bool:
    return value is not None and value == value and abs(value) != float("inf")


def _detail(finding: pd.Series) -> str:
    """What only some kinds have: a packet period, an alignment class, the bandwidths around a switch."""
    if _finite(finding.get("period")):
        low, high = finding.get("period_low"), finding.get("period_high")
        bounds = (f" [{format_exact_size(low)}, {format_exact_size(high) if _finite(high) else 'unbounded'}]"
                  if _finite(low) else "")
        return f"a packet every {format_exact_size(finding['period'])}{bounds}"
    if _finite(finding.get("modulus")):
        return f"sizes with size % {int(finding['modulus'])} == {int(finding['residue'])}"
    before, after = finding.get("bandwidth_before_Bps"), finding.get("bandwidth_after_Bps")
    if _finite(before) and _finite(after):
        return f"bandwidth {format_mbps(before)} -> {format_mbps(after)} MB/s"
    return ""


def setting_notes(data: ReportData) -> dict:
    """{row index: note} for the protocol switches, regime changes and packet steps: the size-valued control
    variables of the row that lie where it was found ("at 8 KiB: btl_sm_eager_limit = 8192"), or "no recorded
    setting explains it" (commlens.analysis.configuration.explain_findings); none where the dataset recorded
    no settings."""
    if data.findings.empty:
        return {}
    explained = explain_findings(data.ds, data.findings)
    return {index: text for index, text in explained["explanation"].items() if text}


def cache_notes(findings: pd.DataFrame, data: ReportData) -> dict:
    """{row index: note} for the on-node protocol switches every library shows at one size (two or more
    libraries) that no off-node curve of the kernel shows there."""
    if findings.empty:
        return {}
    ds = data.ds
    nodes = dict(zip(ds["placement"].values.tolist(), ds["nodes"].values.tolist())) if "nodes" in ds.coords else {}
    switches = findings[findings["kind"] == "protocol_switch"]
    curves = data.points[["library", "placement", "kernel"]].drop_duplicates()
    notes = {}
    for index, switch in switches.iterrows():
        if nodes.get(switch["placement"]) != 1:
            continue
        here = curves[(curves["placement"] == switch["placement"]) & (curves["kernel"] == switch["kernel"])]
        same = switches[(switches["placement"] == switch["placement"]) & (switches["kernel"] == switch["kernel"])
                        & _overlaps(switches, switch)]
        libraries = set(here["library"])
        if len(libraries) < 2 or set(same["library"]) != libraries:
            continue
        off_node = curves[(curves["kernel"] == switch["kernel"]) & curves["placement"].map(
            lambda p: nodes.get(p, 1) > 1)]
        elsewhere = switches[(switches["kernel"] == switch["kernel"])
                             & switches["placement"].isin(off_node["placement"]) & _overlaps(switches, switch)]
        if len(elsewhere):
            continue
        where = ("no off-node curve of the kernel shows it" if len(off_node) else "nothing was measured off-node")
        notes[index] = (f"may be a cache rather than a protocol: all {len(libraries)} libraries show it at this size "
                        f"on one node, and {where}")
    return notes


def _overlaps(switches: pd.DataFrame, switch: pd.Series) -> pd.Series:
    """Which of `switches` may be at the same size as `switch`: a switch between measured sizes a and b
    lies in (a, b], and two such intervals that only touch (2-4 KiB, 4-8 KiB) hold no size in common."""
    low, high = switches["size_low"].fillna(switches["size"] - 1), switches["size_high"].fillna(switches["size"])
    its_low = switch["size_low"] if _finite(switch["size_low"]) else switch["size"] - 1
    its_high = switch["size_high"] if _finite(switch["size_high"]) else switch["size"]
    return (low < its_high) & (high > its_low)
