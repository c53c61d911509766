"""results/<campaign>/report.html and figures/ from a campaign dataset, no benchmark rerun.

`write_report` is what notebooks/04-report.ipynb calls; `run_report_notebook`
executes that notebook with papermill (the workflow's report rule and `make report`
both go through it), so the report is always the notebook's output.

Where the campaign has two or more library rows (or a baseline campaign is given), the
report opens with what changed: per compared pair, the ratio against size per kernel and
placement, and the size ranges that changed with their verdict and q value.

The HTML opens offline: BokehJS and its CSS are inlined. A campaign with more figures (or panels)
than fit one page gets report.html (what changed, the overview figures, tables, provenance) and one
report-<family>.html per kernel family; past MAX_INTERACTIVE_PANELS Bokeh panels in all, or past
MAX_PANELS in one figure, a figure is shown as its static PNG from figures/ beside the page, so
neither the build nor the page grows without bound.
Static copies of every figure (PNG and SVG, drawn with matplotlib by commbench.static, in
a forked process while the HTML is built) go to figures/, listed with the skipped figures
in figures/manifest.json.
"""

from __future__ import annotations

import html
import importlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import holoviews as hv
import matplotlib.pyplot as plt
import pandas as pd
import xarray as xr

from .figures import (MAX_PANELS, Comparison, Figure, ReportData, Skipped, Table, all_figures, all_tables,
                      changed_ranges_table, ratio_figures)
from .methods import methods_html
from .provenance import REPO_ROOT

NOTEBOOK = REPO_ROOT / "notebooks" / "04-report.ipynb"
STATIC_FORMATS = ("png", "svg")
STATIC_DPI = 150


def report_dir(dataset_path) -> Path:
    """Where a dataset's report goes: next to it (results/<campaign>/), wherever that is found from
    the working directory (a notebook's kernel starts in notebooks/, see commbench.locations)."""
    from .locations import resolve

    path = resolve(dataset_path)
    return path if path.is_dir() else path.parent


def load_backend(backend: str) -> None:
    """HoloViews' plotting for `backend`, registered without hv.extension's notebook output (which a
    forked drawing process must not send: the kernel's channels belong to its parent)."""
    if backend not in hv.Store.renderers:
        importlib.import_module({"bokeh": "holoviews.plotting.bokeh", "matplotlib": "holoviews.plotting.mpl"}[backend])


def build_with(backend: str, figure: Figure):
    """The figure's HoloViews object with `backend`'s options (hvPlot styles for the current one)."""
    load_backend(backend)
    previous = hv.Store.current_backend
    hv.Store.set_current_backend(backend)
    try:
        return figure.build()
    finally:
        hv.Store.set_current_backend(previous)


class StaticDrawing:
    """save_static for every figure, in a forked worker process while the caller builds the HTML:
    on two cores the report takes about as long as its slower half instead of both halves.
    Where fork is not available (or a single core), the figures are drawn in files(), in turn."""

    def __init__(self, figures: list[Figure], directory: Path):
        self.figures, self.directory, self.pool, self.pending, self.drawn = figures, directory, None, None, None

    def __enter__(self):
        import multiprocessing
        import os

        if self.figures and (os.cpu_count() or 1) > 1 and "fork" in multiprocessing.get_all_start_methods():
            load_backend("matplotlib")     # once, before the fork
            global _FORKED_FIGURES
            _FORKED_FIGURES = (self.figures, self.directory)    # inherited by the fork, not pickled
            # As many workers as cores: the parent's Bokeh rendering is the shorter half, and the
            # workers have every core to themselves once it is done.
            workers = min(len(self.figures), os.cpu_count() or 2)
            self.pool = multiprocessing.get_context("fork").Pool(workers)
            self.pending = self.pool.map_async(_save_forked, range(len(self.figures)), chunksize=1)
        return self

    def files(self) -> list[list[str]]:
        if self.drawn is None:
            self.drawn = ([save_static(figure, self.directory) for figure in self.figures] if self.pending is None
                          else self.pending.get())
        return self.drawn

    def image(self, name: str) -> str:
        """Where a page that shows a figure static finds its PNG: figures/ beside the page. Linked, not
        inlined: a broad campaign's small multiples are megabytes each, and a page inlining them is slow
        to open."""
        return f"{self.directory.name}/{name}.png"

    def __exit__(self, *exc):
        if self.pool is not None:
            if exc[0]:
                self.pool.terminate()    # the HTML failed: the drawings are not wanted
            else:
                self.pool.close()
            self.pool.join()
        return False


_FORKED_FIGURES: tuple = ()


def _save_forked(index: int) -> list[str]:
    figures, directory = _FORKED_FIGURES
    return save_static(figures[index], directory)


def save_static(figure: Figure, directory: Path) -> list[str]:
    """The figure as PNG (150 dpi) and SVG, drawn once by matplotlib (directly: commbench.static;
    through HoloViews' renderer where it has an element that does not know) and written in each format."""
    from .static import Unsupported, draw

    directory.mkdir(parents=True, exist_ok=True)
    built = build_with("matplotlib", figure)
    try:
        drawn = draw(built)
    except Unsupported:
        drawn = hv.render(built, backend="matplotlib")
    paths = []
    for fmt in STATIC_FORMATS:
        path = directory / f"{figure.name}.{fmt}"
        drawn.savefig(path, format=fmt, dpi=STATIC_DPI, bbox_inches="tight")
        paths.append(path.name)
    plt.close(drawn)
    return paths


# ----------------------------------------------------------------------------- tables

def findings_table(data: ReportData) -> Table:
    findings = data.findings
    columns = ["library", "placement", "kernel", "kind", "size", "size_low", "size_high", "magnitude", "score",
               "period", "period_low", "period_high", "modulus", "residue"]
    frame = findings[[c for c in columns if c in findings]].dropna(axis=1, how="all")
    return Table("findings", "Findings", "Every packet boundary, protocol switch, alignment effect and spike "
                 "commbench.anomalies found (sizes in bytes, magnitude in seconds, score in noise units).", frame)


def failed_runs_table(ds: xr.Dataset) -> Table:
    failed = ds.commbench.failed_runs().reset_index()
    return Table("failed-runs", "Failed launches", "Launches that gave no data (failed, timed out, refused, "
                 "missing, or never run: their library's environment or build failed, or the library does not "
                 "support the kernel, placement or a setting), with the reason; their cells are empty in every "
                 "figure.", failed)


def integrity_table(ds: xr.Dataset) -> Table:
    """Points whose integrity check counted corrupted bytes: any is a reason to distrust the run."""
    return Table("integrity-errors", "Integrity errors",
                 "Points measured with --integrity whose messages arrived corrupted (count of bad messages).",
                 ds.commbench.integrity_errors())


def provenance_tables(ds: xr.Dataset) -> list[Table]:
    libraries = pd.DataFrame({
        "library": ds["library"].values,
        "version": [str(v).strip().splitlines()[0] if str(v).strip() else "" for v in ds["library_version"].values],
        "family": ds["family"].values, "compiler": ds["compiler"].values, "environment": ds["library_env"].values})
    for extra in ("launcher", "library_status", "build_warnings"):   # datasets collected before these had none
        if extra in ds.coords:
            libraries[extra] = ds[extra].values
    placement_coords = [c for c in ("nodes", "ppn", "nprocs", "transport", "emulated", "network_rate", "mtu")
                        if c in ds.coords]
    placements = ds[placement_coords].reset_coords()[placement_coords].to_dataframe().reset_index() \
        if placement_coords else pd.DataFrame({"placement": ds["placement"].values})
    keys = ("campaign", "campaign_file", "git_commit", "kernel_source_hash", "config_hash", "commbench_version",
            "hosts", "cpu_model", "os", "compilers", "compiler_flags", "build_warnings", "timer_resolution_s",
            "first_launch", "created")
    run = pd.DataFrame({"key": [k for k in keys if k in ds.attrs], "value": [str(ds.attrs[k]) for k in keys
                                                                            if k in ds.attrs]})
    return [Table("provenance-run", "Campaign and machine", "Recorded in the dataset when it was collected.", run),
            Table("provenance-libraries", "Libraries", "The library axis: each row its own environment and build.",
                  libraries),
            Table("provenance-placements", "Placements", "Nodes x processes per node; `emulated`: more than one "
                  "node emulated on one host over the network path.", placements)]


# ----------------------------------------------------------------------------- comparisons

@dataclass
class ComparisonSection:
    comparison: Comparison
    figures: list[Figure]
    skipped: list[Skipped]
    table: Table


# Ratio figures per report, kept bounded: each panel costs about a quarter of a second to draw in both
# backends, and a broad campaign has dozens of kernel-placement curves per pair. Pairs the campaign
# lists under `compare:` (and a baseline campaign) are drawn up to MAX_COMPARISON_FIGURES figures;
# the default pairs (first row against each other) up to MAX_PANELS panels in all. Past these, a
# comparison keeps its verdict counts and table; notebooks/06-compare.ipynb draws any comparison.
MAX_COMPARISON_FIGURES = 16


def comparison_sections(data: ReportData) -> tuple[list[ComparisonSection], list[Skipped]]:
    """Every comparison's ratio figures and changed size ranges; the pairs that could not be compared."""
    sections, skipped = [], []
    budget = {"figures": MAX_COMPARISON_FIGURES, "default panels": MAX_PANELS}
    for item in data.comparisons:
        if isinstance(item, Skipped):
            skipped.append(item)
            continue
        drawn = ratio_figures(item)
        kept, left_out = [], [f for f in drawn if isinstance(f, Skipped)]
        for figure in (f for f in drawn if isinstance(f, Figure)):
            reason = _over_budget(item, figure, budget)
            if reason:
                left_out.append(Skipped(figure.name, figure.title, reason))
            else:
                kept.append(figure)
        sections.append(ComparisonSection(item, kept, left_out, changed_ranges_table(item)))
    return sections, skipped


def _over_budget(comparison: Comparison, figure: Figure, budget: dict) -> str:
    """Why `figure` is left out of the report (empty: it is drawn, and spends from `budget`)."""
    if budget["figures"] == 0:
        return (f"the report draws at most {MAX_COMPARISON_FIGURES} comparison figures; "
                "notebooks/06-compare.ipynb draws this one")
    if not comparison.asked and figure.panels > budget["default panels"]:
        budget["default panels"] = 0      # the first kernels in campaign order, not a pick of small families
        return (f"the report draws {MAX_PANELS} panels of the comparisons a campaign does not list; list this "
                "pair under `compare:` in the campaign file, or see notebooks/06-compare.ipynb")
    budget["figures"] -= 1
    if not comparison.asked:
        budget["default panels"] -= figure.panels
    return ""


def baseline_warnings(dataset, baseline) -> list[str]:
    """What differs in how a baseline campaign was measured (commbench.compare.provenance_differences);
    raises ValueError when the two campaigns share no library row to compare."""
    from .compare import across, provenance_differences
    from .dataset import open_campaign

    base, current = open_campaign(baseline), open_campaign(dataset)
    across(base, current)
    return provenance_differences(base, current)


# ----------------------------------------------------------------------------- HTML

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1150px; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; vertical-align: top; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
.caption { color: #555; font-size: 0.9em; } .skipped { color: #8a5a00; }
.flag { background: #fde2e2; border: 1px solid #d33; padding: 0.6em; }
pre { background: #f7f7f7; padding: 0.6em; overflow-x: auto; font-size: 0.8em; }
img.static { max-width: 100%; }
"""


def _table_html(table: Table) -> str:
    body = ("<p class='caption'>none</p>" if table.frame.empty
            else table.frame.to_html(index=False, na_rep="", escape=True, float_format=lambda v: f"{v:.4g}"))
    return (f"<h3 id='{table.name}'>{html.escape(table.title)}</h3>"
            f"<p class='caption'>{html.escape(table.caption)}</p>{body}")


def _figure_html(figure: Figure, div: str) -> str:
    return (f"<section class='figure' id='fig-{figure.name}'><h3>{html.escape(figure.title)}</h3>{div}"
            f"<p class='caption'>{html.escape(figure.caption)} Static copies: figures/{figure.name}.png, .svg</p>"
            "</section>")


def _comparisons_html(sections: list[ComparisonSection], skipped: list[Skipped], divs: dict[str, str]) -> str:
    """The 'What changed' section: per comparison its verdict counts, ratio figures, changed size
    ranges, and the method and false-discovery statement under them."""
    if not sections and not skipped:
        return ""
    parts = ["<h2 id='what-changed'>What changed</h2><p class='caption'>Each candidate against its baseline, "
             "cell by cell (kernel, placement, size): the ratio of their times with its interval, and a verdict "
             "that controls the false discovery rate over all the comparison's cells.</p>"]
    for section in sections:
        comparison = section.comparison
        counts = ", ".join(f"{n} {verdict}" for verdict, n in comparison.counts.items() if n)
        parts.append(f"<h3 id='{comparison.name}'>{html.escape(comparison.title)}</h3><p class='caption'>"
                     f"Matched: {html.escape(comparison.matched)}. Cells: {html.escape(counts)}.</p>")
        parts += [f"<p class='flag'><b>Measured differently</b>: {html.escape(line)}</p>"
                  for line in comparison.warnings]
        parts += [_figure_html(figure, divs[figure.name]) for figure in section.figures]
        parts += [f"<p class='skipped'>{html.escape(s.title)}: skipped, {html.escape(s.reason)}</p>"
                  for s in section.skipped]
        table = section.table
        body = ("<p class='caption'>No size range changed.</p>" if table.frame.empty else
                table.frame.to_html(index=False, na_rep="", escape=True, float_format=lambda v: f"{v:.3g}"))
        parts.append(f"<h4 id='{table.name}'>{html.escape(table.title)}</h4>{body}"
                     f"<p class='caption'>{html.escape(comparison.statement)}</p>")
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
    models = [hv.render(build_with("bokeh", figure), backend="bokeh") for figure in live]
    script, divs = components(models) if models else ("", [])
    # Only the BokehJS these models use, inlined. All registered extensions (INLINE.render())
    # would pull in one that loads a module shim from a relative URL, an error offline.
    bundle = bundle_for_objs_and_resources(models, INLINE) if models else None
    resources = (bundle.scripts() + "".join(f"<style>{css}</style>" for css in bundle.css_raw)) if bundle else ""
    divs = dict(zip((figure.name for figure in live), divs))
    for figure in figures:
        if figure.name not in divs:
            why = (f"{figure.panels} panels, more than {MAX_PANELS} in one interactive figure"
                   if figure.panels > MAX_PANELS else
                   f"the report's interactive figures are spent (at most {MAX_INTERACTIVE_PANELS} panels)")
            divs[figure.name] = (f"<img class='static' alt='{html.escape(figure.title)}' src='{image(figure.name)}'>"
                                 f"<p class='caption'>Drawn static: {why}; notebooks/01-explore.ipynb draws any "
                                 "curve interactively.</p>")
    return resources, script, divs


def render_html(ds: xr.Dataset, figures: list[Figure], skipped: list[Skipped], tables: list[Table],
                provenance: list[Table], title: str, comparisons: list[ComparisonSection] = (),
                comparisons_skipped: list[Skipped] = (), interactive: set[str] | None = None, image=None,
                pages: list[tuple[str, str, int]] = ()) -> str:
    """The report's first page. `pages`: (title, file, figures) of the figure pages it links to."""
    every_figure = [figure for section in comparisons for figure in section.figures] + list(figures)
    resources, script, divs = figure_divs(every_figure, interactive, image)
    sections = [_figure_html(figure, divs[figure.name]) for figure in figures]
    if pages:
        sections.append("<p>More figures, one page per kernel family:</p><ul>" + "".join(
            f"<li><a href='{html.escape(file)}'>{html.escape(name)}</a>: {count} figures</li>"
            for name, file, count in pages) + "</ul>")
    changed = _comparisons_html(list(comparisons), list(comparisons_skipped), divs)
    skipped_html = "".join(f"<li class='skipped'><b>{html.escape(s.title)}</b>: skipped, {html.escape(s.reason)}</li>"
                           for s in skipped)
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
Dataset dims: {html.escape(", ".join(f"{k} {v}" for k, v in ds.sizes.items()))}.
Report written {datetime.now(timezone.utc).isoformat(timespec="seconds")} from the dataset alone.</p>
{flags}
{changed}
{notes}
{methods_html(ds)}
<h2>Figures</h2>
{"".join(sections) or "<p>No figure could be drawn from this dataset.</p>"}
<ul>{skipped_html}</ul>
<h2>Tables</h2>
{"".join(_table_html(t) for t in tables)}
<h2>Provenance</h2>
{"".join(_table_html(t) for t in provenance)}
<h3>Campaign configuration</h3><pre>{html.escape(config)}</pre>
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


# A report with more figures than this gets one page per kernel family (figures.PAGES) after its first.
MAX_FIGURES_ONE_PAGE = 40
MAX_PANELS_ONE_PAGE = 120     # or more panels than this (small multiples of many kernels)
# Bokeh panels in the whole report, in page order; figures past it are shown as their static PNG. A
# panel costs Bokeh about half a second to render and serialise (a grid of many panels more: its tools
# and legends are merged across them, and past about 20 panels serialising it overflows the stack), and
# a page with hundreds of them is slow to open as well. A figure of more than MAX_PANELS is always static.
MAX_INTERACTIVE_PANELS = 80


def interactive_figures(figures: list[Figure]) -> set[str]:
    """Names of the figures drawn with Bokeh: in report order, while their panels fit the budget."""
    chosen, spent = set(), 0
    for figure in figures:
        if figure.panels <= MAX_PANELS and spent + figure.panels <= MAX_INTERACTIVE_PANELS:
            chosen.add(figure.name)
            spent += figure.panels
    return chosen


def figure_pages(figures: list[Figure]) -> dict[str, list[Figure]]:
    """Figures per page, first page ("") first: all on it where they fit, else as figures.PAGES says."""
    if len(figures) <= MAX_FIGURES_ONE_PAGE and sum(figure.panels for figure in figures) <= MAX_PANELS_ONE_PAGE:
        return {"": list(figures)}
    pages: dict[str, list[Figure]] = {"": []}
    for figure in figures:
        pages.setdefault(figure.page, []).append(figure)
    return pages


def page_file(page: str) -> str:
    return f"report-{page}.html"


def config_description(ds: xr.Dataset) -> str:
    return str(json.loads(ds.attrs.get("campaign_config", "{}")).get("description", ""))


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
    study = data.config.get("report", {}).get("study")
    title = title or f"commbench report: {study or data.ds.attrs.get('campaign', 'campaign')}"
    static = compared_figures + figures
    pages = figure_pages(figures)
    interactive = interactive_figures(compared_figures + [f for members in pages.values() for f in members])
    more = [(page, page_file(page), len(members)) for page, members in pages.items() if page]
    on_page = {figure.name: page_file(page) if page else "report.html"
               for page, members in pages.items() for figure in members}
    with StaticDrawing(static, figures_dir) as drawing:     # beside the HTML's figures, in another process
        # What could not be drawn is listed on the first page, whichever page it would have gone on.
        first = render_html(data.ds, pages[""], skipped, tables, provenance_tables(data.ds), title, comparisons,
                            not_compared, interactive, drawing.image, more)
        written = {page_file(page): render_figure_page(title, page, members, interactive, drawing.image)
                   for page, members in pages.items() if page}
        manifest["figures"] = [{"name": figure.name, "title": figure.title, "files": names,
                                "page": on_page.get(figure.name, "report.html"),
                                "interactive": figure.name in interactive}
                               for figure, names in zip(static, drawing.files())]
    for old in directory.glob(page_file("*")):     # a previous, larger report's pages
        old.unlink()
    (directory / "report.html").write_text(first)
    for name, text in written.items():
        (directory / name).write_text(text)
    manifest["pages"] = ["report.html", *written]
    (figures_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def comparison_entry(section: ComparisonSection) -> dict:
    comparison = section.comparison
    return {"name": comparison.name, "title": comparison.title, "counts": comparison.counts,
            "figures": [figure.name for figure in section.figures],
            "changed_ranges": section.table.frame.to_dict("records"), "warnings": list(comparison.warnings)}


def run_report_notebook(dataset, output_dir=None, notebook: Path = NOTEBOOK, baseline=None) -> Path:
    """Executes notebooks/04-report.ipynb with papermill on `dataset`; the executed copy is kept
    beside the report (report.ipynb) as the record of how it was made. The figures are drawn
    into report.html and figures/ only, not into the executed notebook as well. With `baseline`
    (another campaign's dataset) the report also compares this campaign against it."""
    import papermill

    from .stderr_log import stderr_to

    output_dir = Path(output_dir) if output_dir else report_dir(dataset)
    output_dir.mkdir(parents=True, exist_ok=True)
    executed = output_dir / "report.ipynb"
    # The kernel's own warnings (transport, debugger, frozen modules) go to a log, not the terminal.
    with stderr_to(output_dir / "logs" / "report-kernel.log"):
        papermill.execute_notebook(str(notebook), str(executed), cwd=str(REPO_ROOT), progress_bar=False,
                                   parameters={"dataset": str(Path(dataset).resolve()),
                                               "output_dir": str(output_dir.resolve()), "show_figures": False,
                                               "baseline": str(Path(baseline).resolve()) if baseline else ""})
    return output_dir / "report.html"

