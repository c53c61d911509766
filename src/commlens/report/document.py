"""results/<campaign>/report.html and figures/ from a campaign dataset, no benchmark rerun.

`write_report` is what notebooks/04-report.ipynb calls: it writes the report's pages
(commlens.report.html), the static copies of its figures (commlens.report.static_copies) and
figures/manifest.json, which lists them with the skipped figures.
"""

from __future__ import annotations

import json
from pathlib import Path

from commlens.io.atomic import write_text
from commlens.report.analysis_table import ReportData
from commlens.report.comparison_sections import ComparisonSection, comparison_sections
from commlens.report.elements import Figure, Skipped
from commlens.report.figures import all_figures
from commlens.report.html import render_figure_page, render_html
from commlens.report.pages import figure_pages, interactive_figures, page_file
from commlens.report.static_copies import StaticDrawing
from commlens.report.findings import findings_table
from commlens.report.conclusions import conclusions, report_title
from commlens.report.glance import at_a_glance
from commlens.report.tables import all_tables, failed_runs_table, integrity_table, provenance_tables


def write_report(data: ReportData, directory, title: str | None = None) -> dict:
    """report.html and figures/ (PNG, SVG, manifest.json) for `data` in `directory`; returns the manifest."""
    directory = Path(directory)
    figures_dir = directory / "figures"
    figures_dir.mkdir(parents=True, exist_ok=True)   # also when no figure can be drawn
    items = all_figures(data)
    figures = [item for item in items if isinstance(item, Figure)]
    skipped = [item for item in items if isinstance(item, Skipped)]
    study_tables, skipped_tables = all_tables(data)
    tables = study_tables + [findings_table(data), failed_runs_table(data.ds), integrity_table(data.ds)]
    skipped += skipped_tables
    comparisons, not_compared = comparison_sections(data)
    compared_figures = [figure for section in comparisons for figure in section.figures]
    manifest = {"campaign": data.ds.attrs.get("campaign", ""), "figures": [], "skipped": [],
                "tables": [t.name for t in tables], "comparisons": [comparison_entry(s) for s in comparisons]}
    skipped_everywhere = not_compared + [s for section in comparisons for s in section.skipped] + skipped
    manifest["skipped"] = [{"name": s.name, "title": s.title, "reason": s.reason} for s in skipped_everywhere]
    manifest["integrity_errors"] = int(len(tables[-1].frame))
    title = title or report_title(data)
    glance = at_a_glance(data)
    found = conclusions(data, glance, comparisons)
    static = compared_figures + figures
    pages = figure_pages(figures)
    interactive = interactive_figures(compared_figures + [f for members in pages.values() for f in members])
    more = [(page, page_file(page), len(members)) for page, members in pages.items() if page]
    on_page = {figure.name: page_file(page) if page else "report.html"
               for page, members in pages.items() for figure in members}
    with StaticDrawing(static, figures_dir) as drawing:     # beside the HTML's figures, in another process
        # What could not be drawn is listed on the first page, whichever page it would have gone on.
        first = render_html(data.ds, pages[""], skipped, tables, provenance_tables(data.ds), title, comparisons,
                            not_compared, interactive, drawing.image, more, glance=glance, found=found)
        written = {page_file(page): render_figure_page(title, page, members, interactive, drawing.image)
                   for page, members in pages.items() if page}
        manifest["figures"] = [{"name": figure.name, "title": figure.title, "files": names,
                                "page": on_page.get(figure.name, "report.html"),
                                "interactive": figure.name in interactive}
                               for figure, names in zip(static, drawing.files())]
    for old in directory.glob(page_file("*")):     # a previous, larger report's pages
        old.unlink()
    # Each file whole or not at all: a report cut short by a full disk is never taken for one.
    for name, text in written.items():
        write_text(directory / name, text)
    manifest["pages"] = ["report.html", *written]
    write_text(figures_dir / "manifest.json", json.dumps(manifest, indent=2))
    write_text(directory / "report.html", first)    # last: its links lead to the others
    return manifest


def comparison_entry(section: ComparisonSection) -> dict:
    comparison = section.comparison
    return {"name": comparison.name, "title": comparison.title, "counts": comparison.counts,
            "figures": [figure.name for figure in section.figures],
            "changed_ranges": section.table.frame.to_dict("records"), "warnings": list(comparison.warnings),
            "causes": list(comparison.causes)}
