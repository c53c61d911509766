"""The notebooks as a reader gets them from `jupyter nbconvert --to html --execute`: each runs top to bottom
on a campaign found where the notebooks look for theirs (results/quick/quick.nc, here under
$COMMLENS_RESULTS), and its HTML export shows every figure as an image under the heading that introduces
it. A widget or a Bokeh plot alone is not enough: exported, a widget-driven one is blank. No table is
wider than a reader can take in (06-compare once showed one curve as 34 columns of coordinates).

Each notebook's kernel is stopped at once when its last cell has run (KERNEL_SHUTDOWN, as the report's is):
05-interactive needs MPI engines and runs under the `mpi` marker on the tiny campaign, its engines stopped
before its kernel whether or not every cell ran (a kernel stopped at once has no exit handlers to stop them)."""

import base64
import re
import struct
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbconvert import HTMLExporter

from commlens.data import synthetic as syn
from commlens.io.netcdf import write_dataset
from commlens.report.notebook import KERNEL_SHUTDOWN

from conftest import REPO
from test_compare_report import as_collected

# Each notebook's headings under which a figure is drawn.
FIGURES = {
    "01-explore": ["Curves"],
    "02-models": ["Fitted curves over the medians, and relative residuals"],
    "03-anomalies": ["Curves with their findings"],
    "04-report": ["Figures", "Comparisons"],
    "06-compare": ["The ratio figure"],
}
INTERACTIVE_FIGURES = ["A sweep, plotted as it arrives", "Against the batch campaign"]
# Run in 05-interactive's kernel after its cells, the last of which stops the engines (stop() is safe twice).
STOP_ENGINES = "if 'cluster' in globals():\n    cluster.stop()"
WIDEST = 12                 # columns a table may have (its index column aside)
FIGURE_PIXELS = 200         # an image at least this wide is a figure, not a logo from a notebook extension
# What HoloViews, hvPlot, Panel and Bokeh show a figure as (a progress bar is a widget too, and no figure).
LIVE_OUTPUTS = ("application/vnd.holoviews_exec.v0+json", "application/vnd.bokehjs_exec.v0+json")

# Two libraries on one node (a figure or two of each kind, kept few: each takes about a second to draw), each
# curve with a protocol switch at 16 KiB for 03-anomalies to find.
GRID = syn.powers_of_two(1, 1 << 20)
SWITCHED = syn.GroundTruth(1e-6, 5e9, switches=(syn.Switch(16384, 6e-6, 8e9),))
NOISE = syn.Noise(relative=0.01, tail_df=3, outlier_fraction=0.01, launch_relative=0.02, launch_point_relative=0.005)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """A results folder holding a campaign named as the notebooks' default dataset names it."""
    curves = {(library, "1N2P", "pingpong.send"): syn.generate(GRID, SWITCHED, NOISE, 20, 3, seed=seed)
              for seed, library in enumerate(("mpich-5.0.2", "openmpi-5.0.11"))}
    folder = tmp_path_factory.mktemp("results")
    (folder / "quick").mkdir()
    write_dataset(as_collected(syn.campaign_dataset(curves), campaign="quick"), folder / "quick" / "quick.nc",
                  keep_previous=False)
    return folder


def exported(name: str, parameters: str = "", teardown: str = "") -> tuple[nbformat.NotebookNode, str]:
    """notebooks/<name>.ipynb executed where JupyterLab runs it (notebooks/), and its HTML export;
    `parameters`: code run after the parameters cell, as papermill injects it; `teardown`: code run in the
    kernel after the cells, whether or not they all ran, before the kernel is stopped."""
    notebook = nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4)
    if parameters:
        tagged = next(i for i, cell in enumerate(notebook.cells) if "parameters" in cell.metadata.get("tags", []))
        notebook.cells.insert(tagged + 1, nbformat.v4.new_code_cell(parameters))
    client = NotebookClient(notebook, timeout=600, kernel_name="python3", shutdown_kernel=KERNEL_SHUTDOWN,
                            resources={"metadata": {"path": str(REPO / "notebooks")}})
    if not teardown:
        client.execute()
    else:
        with client.setup_kernel():
            try:
                for index, cell in enumerate(notebook.cells):
                    client.execute_cell(cell, index)
            finally:       # a cell of its own for the while it runs (nbclient keeps what it executes in place)
                notebook.cells.append(nbformat.v4.new_code_cell(teardown))
                try:
                    client.execute_cell(notebook.cells[-1], len(notebook.cells) - 1)
                finally:
                    notebook.cells.pop()
    page, _ = HTMLExporter().from_notebook_node(notebook)
    return notebook, page


def sections(page: str) -> dict[str, str]:
    """The page's HTML after each heading, up to the next one, by the heading's text."""
    parts = re.split(r"<h[1-6][^>]*>(.*?)</h[1-6]>", page, flags=re.DOTALL)
    return {_text(heading): body for heading, body in zip(parts[1::2], parts[2::2])}


def _text(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html).replace("¶", "").strip()


def figures(html: str) -> int:
    """Images in `html` a reader sees without a kernel or JavaScript: PNGs at least FIGURE_PIXELS wide,
    SVG images and inline SVG drawings (an icon's inline SVG is a few hundred bytes, a figure's tens of kB)."""
    pngs = [base64.b64decode(data) for data in re.findall(r'<img[^>]*src="data:image/png;base64,([^"]+)"', html)]
    wide = [png for png in pngs if struct.unpack(">I", png[16:20])[0] >= FIGURE_PIXELS]
    svgs = re.findall(r'<img[^>]*src="data:image/svg\+xml', html)
    inline = [svg for svg in re.findall(r"<svg.*?</svg>", html, flags=re.DOTALL) if len(svg) > 5000]
    return len(wide) + len(svgs) + len(inline)


def assert_every_figure_shown(name: str, notebook, page: str, headings: list[str]) -> None:
    shown = sections(page)
    for heading in headings:
        assert heading in shown, f"{name}: no heading {heading!r} in {list(shown)}"
        assert figures(shown[heading]), f"{name}: no figure under {heading!r} in the HTML export"
    # Any widget or Bokeh figure has its figure beside it as an image, under the same heading. (A figure's
    # output says in text what it is; the notebook extension's own output, loading it, has no text.)
    heading, live = "", {}
    for cell in notebook.cells:
        if cell.cell_type == "markdown" and re.match(r"#+ ", cell.source):
            heading = _text(re.match(r"#+ (.*)", cell.source).group(1))
        for output in cell.get("outputs", []):
            if set(output.get("data", {})) & set(LIVE_OUTPUTS) and "text/plain" in output.get("data", {}):
                live[heading] = shown.get(heading, "")
    alone = [heading for heading, html in live.items() if not figures(html)]
    assert not alone, f"{name}: a live figure and no image of it under {alone}"
    # No table wider than WIDEST columns; every table reads as the report's do: no exponents, no
    # infinities, no dims expanded into rows.
    for table in re.findall(r"<table.*?</table>", page, flags=re.DOTALL):
        header = re.search(r"<tr.*?</tr>", table, flags=re.DOTALL).group()
        names = [_text(cell) for cell in re.findall(r"<th.*?</th>", header, flags=re.DOTALL)]
        columns = len(names) - (names[:1] == [""])     # pandas's index column has no name
        assert columns <= WIDEST, f"{name}: a table of {columns} columns: {names}"
        cells = [_text(cell) for cell in re.findall(r"<td.*?</td>", table, flags=re.DOTALL)]
        assert not [c for c in cells if re.search(r"\d[eE][+-]\d", c) or c in ("inf", "-inf", "nan")], (name, cells)
        assert "<th>quantile</th>" not in table and "<th>bound</th>" not in table and "n_segments" not in table


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_the_html_export_shows_every_figure(results, name, monkeypatch):
    monkeypatch.setenv("COMMLENS_RESULTS", str(results))
    notebook, page = exported(name)
    errors = [output for cell in notebook.cells for output in cell.get("outputs", []) if output.output_type == "error"]
    assert not errors
    assert_every_figure_shown(name, notebook, page, FIGURES[name])


@pytest.mark.mpi
def test_the_interactive_notebooks_html_export_shows_every_figure(workspace, tiny_campaign):
    """05-interactive on MPI engines against the tiny campaign, run where JupyterLab runs it (notebooks/):
    engines, %%px, a live sweep with its progress bar, the comparison, and a stop that leaves the engines'
    logs in their file, not in the notebook; the sweep's live figure is drawn again as an image once the
    sweep ends, and the comparison is one."""
    parameters = (f"dataset = {str(workspace / 'results' / 'tiny' / 'tiny.nc')!r}\n"
                  f"workspace = {str(workspace)!r}\nmax_size = '4Ki'")
    notebook, page = exported("05-interactive", parameters, teardown=STOP_ENGINES)
    assert_every_figure_shown("05-interactive", notebook, page, INTERACTIVE_FIGURES)

    def text_of(output) -> str:          # streams carry `text`; %%px output is display data
        text = output.get("text", output.get("data", {}).get("text/plain", ""))
        return text if isinstance(text, str) else "".join(text)

    text = "".join(text_of(output) for cell in notebook.cells for output in cell.get("outputs", []))
    assert "rank 1 of 2" in text and "MPICH Version" in text   # %%px reached every engine
    assert "comparison skipped" not in text and "mpich-5.0.2 (interactive)" in text
    assert "IProgress not found" not in text                   # ipywidgets draws tqdm's bar
    assert "Output for ipengine" not in text and "[IPEngine" not in text
    log = Path(re.search(r"engine logs: (\S+)", text).group(1))
    assert log.is_relative_to(workspace / "results" / "interactive") and "IPEngine" in log.read_text()
