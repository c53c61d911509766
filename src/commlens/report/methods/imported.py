"""The Methods section's statement of imported rows: which curves were read from other suites' files,
from which files and suite versions, and what their numbers are, as each launch recorded it
(commlens.data.origins); nothing is said of a dataset without imported rows."""

from __future__ import annotations

from commlens.data.origins import curve_origins
from commlens.report.methods.facts import NOT_RECORDED, Facts


def imported_paragraphs(facts: Facts) -> tuple[list[str], list[str]]:
    """(paragraphs, items): what holds for every imported row, then one item per imported curve;
    empty where the dataset has none."""
    origins = curve_origins(facts.ds)
    if not origins:
        return [], []
    paragraphs = [
        f"{len(origins)} curve{'s were' if len(origins) > 1 else ' was'} not measured by commlens but read "
        "from other suites' output files: each point holds the one value per size the file reports, so what "
        "the sections above say of the harness, the timer, the stopping rule and the intervals does not apply "
        f"to {'them' if len(origins) > 1 else 'it'}. What a value means as its suite measured it, and how that "
        "differs from the kernel's metric, is the row's `suite_metric`; every number the files print is kept in "
        "`reported`."]
    items = []
    for (library, placement, kernel), origin in origins.items():
        metric = str(facts.ds["suite_metric"].sel(library=library, kernel=kernel).values) \
            if "suite_metric" in facts.ds else ""
        files = "; ".join(_file(record) for record in origin.files)
        items.append(f"{library}, {placement}, {kernel}: {origin.label}; {origin.numbers()}. "
                     f"As the suite measured it: {metric or NOT_RECORDED}. Files: {files}.")
    return paragraphs, items


def _file(record: dict) -> str:
    """'/path/osu_latency.txt (sha256 95f0f8497c5b, ranks stated: 2)', as the launch recorded it."""
    ranks = record.get("ranks_stated")
    digest = str(record.get("sha256") or "")[:12] or NOT_RECORDED
    return (f"{record.get('file', NOT_RECORDED)} (sha256 {digest}, ranks stated: "
            f"{ranks if isinstance(ranks, int) else 'no, the placement assumed'})")
