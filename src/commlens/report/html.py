"""The report's HTML: its first page (what changed, the Methods section, figures, tables,
provenance) and its figure pages. The HTML opens offline: BokehJS and its CSS are inlined; a
figure that is not drawn with Bokeh is shown as its static PNG from figures/ beside the page.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from datetime import datetime, UTC

import holoviews as hv
import xarray as xr

from commlens.report import pages as report_pages
from commlens.report.backends import current_backend
from commlens.report.comparison_figures import MAX_PANELS
from commlens.report.comparison_sections import ComparisonSection
from commlens.report.elements import Figure, Skipped, Table, readable
from commlens.report.conclusions import Conclusion, verdict_words
from commlens.report.glance import Glance, dataset_shape
from commlens.report.methods import methods_html

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1150px; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; vertical-align: top; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
.caption { color: #555; font-size: 0.9em; } .skipped { color: #555; font-size: 0.9em; }
/* A table wider than the page scrolls within it instead of being cut off at its edge. */
.table { overflow-x: auto; max-width: 100%; }
.flag { background: #fde2e2; border: 1px solid #d33; padding: 0.6em; }
.cause { background: #eef4fb; border-left: 3px solid #3a6ea5; padding: 0.4em 0.6em; }
pre { background: #f7f7f7; padding: 0.6em; overflow-x: auto; font-size: 0.8em; }
img.static { max-width: 100%; }
"""


def _frame_html(frame) -> str:
    return f"<div class='table'>{readable(frame).to_html(index=False, na_rep='', escape=True)}</div>"


def _table_html(table: Table) -> str:
    body = "<p class='caption'>none</p>" if table.frame.empty else _frame_html(table.frame)
    return (f"<h3 id='{table.name}'>{html.escape(table.title)}</h3>"
            f"<p class='caption'>{html.escape(table.caption)}</p>{body}")


def _glance_html(glance: Glance | None) -> str:
    """The report's opening: headline numbers, or what gave no data and why."""
    if glance is None:
        return ""
    parts = ["<h2 id='at-a-glance'>At a glance</h2>"]
    if glance.no_data is not None:
        parts.append("<p class='flag'><b>No launch gave data</b>: nothing below was measured. Each row of the "
                     "campaign, with how many of its launches ended how, and why:</p>")
        parts.append(_frame_html(glance.no_data) if not glance.no_data.empty else "")
    else:
        parts.append("<p class='caption'>Per curve: the median time at its smallest size, and its peak bandwidth "
                     "(per launch the median of its bandwidths at the three sizes that read fastest, then the "
                     "median over launches), each with its 95% interval over launches: within one launch where "
                     "there was one, and in words where too few launches make it span more than a factor of ten "
                     "(Methods, Intervals).</p>" + _frame_html(glance.headline))
    parts += [f"<p>{html.escape(line)}</p>" for line in glance.lines]
    parts += [f"<p class='flag'><b>Read with care</b>: {html.escape(line)}</p>" for line in glance.warnings]
    return "".join(parts)


def _conclusions_html(found: Sequence[Conclusion]) -> str:
    """The report's opening: what it found, a sentence each, each linked to what it rests on."""
    if not found:
        return ""
    items = "".join(f"<li>{html.escape(c.text)} <a class='evidence' href='#{html.escape(c.evidence)}'>evidence</a></li>"
                    for c in found)
    return f"<h2 id='conclusions'>Conclusions</h2><ul class='conclusions'>{items}</ul>"


def _sanity_html(found: Sequence[Conclusion]) -> str:
    """The checks the conclusions point to, each as a flag, under one anchor."""
    checks = [c.text for c in found if c.evidence == "sanity"]
    if not checks:
        return ""
    return "<div id='sanity'>" + "".join(f"<p class='flag'>{html.escape(text)}</p>" for text in checks) + "</div>"


def _skipped_html(skipped: list[Skipped]) -> str:
    """What could not be drawn, in one line: each title with what it needs."""
    if not skipped:
        return ""
    listed = "; ".join(f"{html.escape(s.title)} ({html.escape(s.reason)})" for s in skipped)
    # Figures a campaign did not ask the data for are no fault of it: said once, in the appendix, not flagged.
    return (f"<h3 id='not-drawn'>Figures not drawn</h3><p class='skipped'>The report draws these where a campaign "
            f"measures what they need ({len(skipped)}): {listed}.</p>")


def _figure_html(figure: Figure, div: str) -> str:
    return (f"<section class='figure' id='fig-{figure.name}'><h3>{html.escape(figure.title)}</h3>{div}"
            f"<p class='caption'>{html.escape(figure.caption)} Static copies: figures/{figure.name}.png, .svg</p>"
            "</section>")


def _comparisons_html(sections: list[ComparisonSection], skipped: list[Skipped], divs: dict[str, str]) -> str:
    """The 'What changed' section: per comparison its verdict counts, ratio figures, changed size
    ranges, and the method and false-discovery statement under them."""
    if not sections and not skipped:
        return ""
    update = any(section.comparison.asked for section in sections)
    heading = "What changed" if update else "How they differ"
    parts = [f"<h2 id='what-changed'>{heading}</h2><p class='caption'>"
             + ("Each candidate against its baseline (the campaign's `compare:` pairs: an update), "
                if update else "Each library row against the first (two libraries, not an update), ")
             + "cell by cell (kernel, placement, size): the ratio of their times with the interval its verdict "
               "was read off, at the level that controls the false discovery rate over all the comparison's "
               "cells.</p>"]
    for section in sections:
        comparison = section.comparison
        counts = ", ".join(f"{n} {verdict_words(verdict, comparison.asked)}"
                           for verdict, n in comparison.counts.items() if n)
        parts.append(f"<h3 id='{comparison.name}'>{html.escape(comparison.title)}</h3><p class='caption'>"
                     f"Matched: {html.escape(comparison.matched)}. Cells: {html.escape(counts)}.</p>")
        parts += [f"<p class='flag'><b>Measured differently</b>: {html.escape(line)}</p>"
                  for line in comparison.warnings]
        parts += [_figure_html(figure, divs[figure.name]) for figure in section.figures]
        parts += [f"<p class='skipped'>{html.escape(s.title)}: skipped, {html.escape(s.reason)}</p>"
                  for s in section.skipped]
        table = section.table
        body = "<p class='caption'>No size range changed.</p>" if table.frame.empty else _frame_html(table.frame)
        parts.append(f"<h4 id='{table.name}'>{html.escape(table.title)}</h4>{body}"
                     f"<p class='caption'>{html.escape(comparison.statement)}</p>")
        parts += [f"<p class='cause'>{html.escape(line)}</p>" for line in comparison.causes]
        parts += [f"<p class='cause'>Settings: {html.escape(line.rstrip('.'))}.</p>" for line in comparison.settings]
    parts += [f"<p class='skipped'><b>{html.escape(s.title)}</b>: not compared, {html.escape(s.reason)}</p>"
              for s in skipped]
    return "".join(parts)


def figure_divs(figures: list[Figure], interactive: set[str] | None = None,
                image=None) -> tuple[str, str, dict[str, str]]:
    """(resources, script, div per figure name): Bokeh for the figures in `interactive` (all when None),
    the static PNG `image(name)` gives (a data URI) for the others."""
    from bokeh.embed import components
    from bokeh.embed.bundle import bundle_for_objs_and_resources
    from bokeh.resources import INLINE

    live = [figure for figure in figures if interactive is None or figure.name in interactive]
    with current_backend("bokeh"):
        models = [hv.render(figure.build(), backend="bokeh") for figure in live]
    script, divs = components(models) if models else ("", [])
    # Only the BokehJS these models use, inlined. All registered extensions (INLINE.render())
    # would pull in one that loads a module shim from a relative URL, an error offline.
    bundle = bundle_for_objs_and_resources(models, INLINE) if models else None
    resources = (bundle.scripts() + "".join(f"<style>{css}</style>" for css in bundle.css_raw)) if bundle else ""
    by_name = dict(zip((figure.name for figure in live), divs))
    for figure in figures:
        if figure.name not in by_name:
            why = (f"{figure.panels} panels, more than {MAX_PANELS} in one interactive figure"
                   if figure.panels > MAX_PANELS else
                   f"the report's interactive figures are spent (at most {report_pages.MAX_INTERACTIVE_PANELS} panels)")
            by_name[figure.name] = (f"<img class='static' alt='{html.escape(figure.title)}' src='{image(figure.name)}'>"
                                    f"<p class='caption'>Drawn static: {why}; notebooks/01-explore.ipynb draws any "
                                    "curve interactively.</p>")
    return resources, script, by_name


def render_html(ds: xr.Dataset, figures: list[Figure], skipped: list[Skipped], tables: list[Table],
                provenance: list[Table], title: str, comparisons: Sequence[ComparisonSection] = (),
                comparisons_skipped: Sequence[Skipped] = (), interactive: set[str] | None = None, image=None,
                pages: Sequence[tuple[str, str, int]] = (), glance: Glance | None = None,
                found: Sequence[Conclusion] = ()) -> str:
    """The report's first page: its conclusions (`found`, commlens.report.conclusions), then the headline
    numbers (`glance`), the figures, the comparisons and the tables; how it was measured (Methods) and
    Provenance last, as a technical report's appendix. `pages`: (title, file, figures) of the figure pages
    it links to."""
    every_figure = [figure for section in comparisons for figure in section.figures] + list(figures)
    resources, script, divs = figure_divs(every_figure, interactive, image)
    sections = [_figure_html(figure, divs[figure.name]) for figure in figures]
    if pages:
        sections.append("<p>More figures, one page per kernel family:</p><ul>" + "".join(
            f"<li><a href='{html.escape(file)}'>{html.escape(name)}</a>: {count} figures</li>"
            for name, file, count in pages) + "</ul>")
    changed = _comparisons_html(list(comparisons), list(comparisons_skipped), divs)
    integrity = next(t for t in tables if t.name == "integrity-errors")
    flags = ""
    if not integrity.frame.empty:
        flags = (f"<p class='flag'><b>Integrity errors</b>: {len(integrity.frame)} point(s) received corrupted "
                 f"messages; see <a href='#integrity-errors'>the table</a>. Do not trust those curves.</p>")
    if "library_status" in ds.coords:
        for lib, status, why in zip(ds.library.values, ds["library_status"].values, ds["library_reason"].values):
            if status != "ok":
                flags += (f"<p class='flag'><b>Library row {html.escape(str(lib))} is missing</b> "
                          f"({html.escape(str(status))}): {html.escape(str(why))}</p>")
    failed = next(t for t in tables if t.name == "failed-runs")
    if not failed.frame.empty:
        flags += (f"<p class='flag'><b>{len(failed.frame)} launch(es) gave no data</b>; see "
                  f"<a href='#failed-runs'>failed launches</a>.</p>")
    config = json.loads(ds.attrs.get("campaign_config", "{}"))
    notes = "".join(f"<li>{html.escape(note)}</li>" for note in config.get("report", {}).get("notes", []))
    notes = f"<h2>Scale and limits</h2><ul>{notes}</ul>" if notes else ""
    config = json.dumps(config, indent=2)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
{resources}
<style>{STYLE}</style>
{script}
</head><body>
<h1>{html.escape(title)}</h1>
<p class='caption'>{html.escape(config_description(ds))}
Report written {datetime.now(UTC).isoformat(timespec="seconds")} from the dataset alone.</p>
{_conclusions_html(found)}
{flags}
{_sanity_html(found)}
{_glance_html(glance)}
<h2 id='figures'>Figures</h2>
{"".join(sections) or "<p>No figure could be drawn from this dataset.</p>"}
{changed}
{notes}
<h2>Tables</h2>
{"".join(_table_html(t) for t in tables)}
<h2 id='appendix'>Appendix: how it was measured and analysed</h2>
{methods_html(ds)}
<h2>Provenance</h2>
<p class='caption'>The dataset: {html.escape(dataset_shape(ds))}.</p>
{"".join(_table_html(t) for t in provenance)}
<h3>Campaign configuration</h3><pre>{html.escape(config)}</pre>
{_skipped_html(skipped)}
</body></html>
"""


def render_figure_page(title: str, page: str, figures: list[Figure], interactive: set[str] | None, image) -> str:
    """A page of the report's figures of one kernel family, linked from and back to report.html."""
    resources, script, divs = figure_divs(figures, interactive, image)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}: {html.escape(page)}</title>
{resources}
<style>{STYLE}</style>
{script}
</head><body>
<h1>{html.escape(title)}: {html.escape(page)}</h1>
<p><a href='report.html'>Back to the report</a> (what changed, tables, provenance).</p>
{"".join(_figure_html(figure, divs[figure.name]) for figure in figures)}
</body></html>
"""


def config_description(ds: xr.Dataset) -> str:
    return str(json.loads(ds.attrs.get("campaign_config", "{}")).get("description", ""))
