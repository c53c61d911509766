"""A report of a broad campaign: many kernel variants become small multiples, figures past one page go
on one page per kernel family, and figures past the interactive budget are shown as their static PNG;
every page opens in a real headless browser without errors, and an all-pairs campaign's heatmap shows,
as rendered there, the node planted slow. Synthetic campaigns keep it fast."""

import io
import re
import time

import numpy as np
import pytest
from PIL import Image

from commlens.data import synthetic as syn
from commlens.data.pairs import PAIR_DIMS
from commlens.report import Figure, ReportData, all_figures, write_report
from commlens.report import pages as report_pages
from commlens.report.comparison_figures import MAX_PANELS
from commlens.report.plotting import MAX_CURVES

from test_compare_report import as_collected, two_libraries
from test_report import RENDERED, browser

# Two library rows x 13 variants: 26 curves in one overlay, more than a reader can tell apart, and
# 13 panels as small multiples, more than one interactive figure holds (MAX_PANELS).
VARIANTS = tuple(f"pingpong.send@v{n:02d}" for n in range(13))


@pytest.fixture(scope="module")
def broad(tmp_path_factory):
    directory = tmp_path_factory.mktemp("broad")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(report_pages, "MAX_FIGURES_ONE_PAGE", 2)        # this campaign's figures do not fit one page
        patch.setattr(report_pages, "MAX_INTERACTIVE_PANELS", 14)     # the comparison's panels spend most of it
        manifest = write_report(ReportData(two_libraries(kernels=VARIANTS, placements=("1N2P", "2N1P"))), directory)
    return directory, manifest


def test_many_variants_become_one_panel_per_kernel(broad):
    directory, manifest = broad
    variants = [figure for figure in manifest["figures"] if figure["name"].startswith("variants-")]
    assert [figure["name"] for figure in variants] == ["variants-1N2P", "variants-2N1P"]
    page = (directory / variants[0]["page"]).read_text()
    assert f"26 curves, more than {MAX_CURVES}: one panel per kernel (13), a curve per library" in page
    assert not any(figure["interactive"] for figure in variants)
    assert f"Drawn static: 13 panels, more than {MAX_PANELS} in one interactive figure" in page
    with Image.open(directory / "figures" / "variants-1N2P.png") as image:
        width, height = image.size
    assert height > width / 4     # 8 panels in two rows of 4 (in one row it would be under a fifth)


def test_figures_past_the_first_page_go_on_their_family_page(broad):
    directory, manifest = broad
    assert manifest["pages"] == ["report.html", "report-point-to-point.html"]
    first = (directory / "report.html").read_text()
    assert "<a href='report-point-to-point.html'>point-to-point</a>" in first
    on_page = {figure["name"]: figure["page"] for figure in manifest["figures"]}
    assert on_page["library-comparison-1N2P"] == on_page["placement-comparison-mpich-4.3.2"] == "report.html"
    assert on_page["variants-1N2P"] == on_page["throughput-2N1P"] == "report-point-to-point.html"
    family = (directory / "report-point-to-point.html").read_text()
    for name, page in on_page.items():
        if not name.startswith("compare-"):
            assert (f"id='fig-{name}'" in family) == (page != "report.html"), name
            assert (f"id='fig-{name}'" in first) == (page == "report.html"), name


def test_past_the_interactive_budget_a_figure_is_its_static_image(broad):
    directory, manifest = broad
    drawn = [figure for figure in manifest["figures"] if figure["interactive"]]
    static = [figure for figure in manifest["figures"] if not figure["interactive"]]
    assert drawn and static
    assert manifest["figures"][0]["interactive"]        # what changed comes first, and is interactive
    family = (directory / "report-point-to-point.html").read_text()
    images = re.findall(r"<img class='static' alt='[^']*' src='([^']+)'>", family)
    assert len(images) == sum(figure["page"] == "report-point-to-point.html" for figure in static)
    for source in images:            # the figure's own PNG in figures/, beside the page
        assert source.startswith("figures/") and source.endswith(".png")
        with Image.open(directory / source) as image:
            image.verify()
    first = (directory / "report.html").read_text()
    assert "Drawn static: the report's interactive figures are spent (at most 14 panels)" in first


def test_every_page_renders_in_headless_chromium(broad):
    directory, manifest = broad
    with browser() as driver:
        for page in manifest["pages"]:
            interactive = sum(f["interactive"] and f["page"] == page for f in manifest["figures"])
            driver.get((directory / page).resolve().as_uri())
            state = None
            for _ in range(120):
                loaded = driver.execute_script("return document.readyState === 'complete'")
                if not interactive:      # a page of static images only loads no Bokeh at all
                    if loaded:
                        break
                else:
                    state = driver.execute_script("return typeof Bokeh === 'undefined' ? null : true") and \
                        driver.execute_script(RENDERED)
                    if state and state["idle"] and state["roots"] >= interactive:
                        break
                time.sleep(0.5)
            errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
            assert not errors, (page, errors)
            if interactive:
                assert state and state["roots"] >= interactive, (page, state)
            shown = driver.execute_script("return [...document.images].filter(i => i.complete && i.naturalWidth > 0)"
                                          ".length")
            assert shown == sum(not f["interactive"] and f["page"] == page for f in manifest["figures"])


def test_a_few_figures_of_many_panels_also_get_pages():
    """Three figures are few, but 40 panels each are more than one page holds."""
    from commlens.report import Figure

    figures = [Figure("library-comparison-1N2P", "t", "c", None, panels=2, page=""),
               Figure("variants-1N2P", "t", "c", None, panels=report_pages.MAX_PANELS_ONE_PAGE // 2,
                      page="point-to-point"),
               Figure("variants-2N1P", "t", "c", None, panels=report_pages.MAX_PANELS_ONE_PAGE // 2,
                      page="point-to-point")]
    assert list(report_pages.figure_pages(figures[:2])) == [""]
    pages = report_pages.figure_pages(figures)
    assert {page: [f.name for f in members] for page, members in pages.items()} == {
        "": ["library-comparison-1N2P"], "point-to-point": ["variants-1N2P", "variants-2N1P"]}


def pair_campaign(times, kernel="allpairs.isolated", library="mpich-5.0.2", size=8192):
    """A campaign dataset of one all-pairs kernel on one node per rank, its pair times `times` (source,
    destination, launch) as collect writes them, each rank on its own node vnode<rank>."""
    nodes, _, launches = times.shape
    placement = f"{nodes}N1P"
    per_launch = np.nanmedian(times, axis=(0, 1))[None, :, None] * np.ones((1, launches, 3))
    ds = as_collected(syn.dataset_from_cubes({(library, placement, kernel): ([size], per_launch)}))
    ds = ds.assign_coords(pair_kernel=("pair_kernel", [kernel]), source_rank=np.arange(nodes),
                          destination_rank=np.arange(nodes), metric=("kernel", ["latency: one message each way"]))
    ds["pair_time"] = (PAIR_DIMS, np.moveaxis(times, 2, 0)[None, None, None, None])
    ds["hosts"] = (("library", "placement", "kernel", "launch"),
                   np.full((1, 1, 1, launches), ",".join(f"vnode{n}" for n in range(nodes))))
    return ds


def test_the_pair_heatmap_names_the_groups_of_two_leaf_switches_and_none_of_one():
    """Eight nodes on two leaves whose uplinks make every pair across them 1.8 times slower, and one link
    across 1.5 times as slow besides: the heatmap's caption names the two groups, and that link alone
    beyond them; one switch's matrix names none."""
    leaves = [0, 0, 0, 0, 1, 1, 1, 1]
    captions = {}
    for name, plants in (("two", {"groups": leaves, "across": 1.8, "slow_links": {(1, 6): 1.5}}), ("one", {})):
        times = syn.pair_times(8, 4, time_s=8192 / 100e6, seed=5, **plants)
        [figure] = [item for item in all_figures(ReportData(pair_campaign(times))) if item.name.startswith("pairs-")]
        captions[name] = figure.caption
    assert ("Nodes that share a switch, from the matrix (5% level, beyond 10%): 2 groups: vnode0 vnode1 vnode2 "
            "vnode3, vnode4 vnode5 vnode6 vnode7; pairs across groups 8") in captions["two"], captions["two"]
    assert "slow links below are named beyond the crossing between them" in captions["two"]
    named = captions["two"].split("false discovery rate): ")[1].split(". ")[0]    # findings are "; "-separated
    assert named.startswith("vnode1 - vnode6: 5") and ";" not in named, named
    assert named.endswith("beyond its nodes and the crossing between their switches")
    assert "share a switch" not in captions["one"]


def test_fan_kernels_get_their_own_figure_and_no_pair_matrix():
    """fan.in times each other rank with rank 0 only: its pair times make no node-by-node matrix (no
    heatmap, no slow node named from one column), and its aggregate bandwidth gets the figure of many
    ranks at once."""
    times = np.full((3, 3, 2), np.nan)
    times[1:, 0, :] = 2 * 8192 / 6e6            # two senders, each at half of one 6 MB/s link
    ds = pair_campaign(times, kernel="fan.in")
    data = ReportData(ds)
    figures = {item.name: item for item in all_figures(data) if isinstance(item, Figure)}
    assert "congestion-3N1P" in figures and not any(name.startswith("pairs-") for name in figures), sorted(figures)
    assert figures["congestion-3N1P"].curves == {("mpich-5.0.2", "3N1P", "fan.in")}
    with pytest.raises(ValueError, match="times some pairs of ranks, not every pair"):
        ds.commlens.pairs("mpich-5.0.2", "3N1P", "fan.in", 8192)


# The plot area of the Bokeh figure whose title ends with arguments[0], scrolled into view: where it is
# in the window (CSS pixels) and how many screen pixels a CSS pixel is.
PLOT_AREA = """
const found = [];
const walk = view => { found.push(view); (view.child_views || []).forEach(walk); };
(Bokeh.index.values ? [...Bokeh.index.values()] : Object.values(Bokeh.index)).forEach(walk);
const view = found.find(v => v.model.type === "Figure" && v.model.title && v.model.title.text.endsWith(arguments[0]));
if (!view) return null;
view.el.scrollIntoView();
const box = view.el.getBoundingClientRect(), frame = view.frame.bbox;
return {x: box.x + frame.x0, y: box.y + frame.y0, width: frame.width, height: frame.height,
        scale: window.devicePixelRatio};
"""


def test_the_pair_heatmap_as_the_browser_draws_it_shows_the_slow_node(tmp_path):
    """Eight nodes, five launches, node 3's pairs 1.6 times slower: in the screenshot of the rendered page,
    node 3's row and column are the darkest cells (viridis: the least bandwidth), the diagonal (no pair)
    is blank, and the caption names vnode3."""
    nodes, slow = 8, 3
    manifest = write_report(ReportData(pair_campaign(syn.pair_times(nodes, 5, time_s=8192 / 100e6,
                                                                    slow_nodes={slow: 1.6}, seed=2))), tmp_path)
    [heatmap] = [f for f in manifest["figures"] if f["name"].startswith("pairs-")]
    assert heatmap["interactive"]
    page = (tmp_path / heatmap["page"]).read_text()
    assert "vnode3: every pair through it" in page
    with browser() as driver:
        driver.set_window_size(1200, 900)
        driver.get((tmp_path / heatmap["page"]).resolve().as_uri())
        area = None
        for _ in range(120):
            state = driver.execute_script("return typeof Bokeh === 'undefined' ? null : true") and \
                driver.execute_script(RENDERED)
            if state and state["idle"] and (area := driver.execute_script(PLOT_AREA, "every pair's bandwidth")):
                break
            time.sleep(0.5)
        assert area, "the heatmap was never rendered"
        time.sleep(0.2)     # the scroll's repaint
        shot = Image.open(io.BytesIO(driver.get_screenshot_as_png())).convert("L")
        errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors
    scale = area["scale"]
    plot = np.asarray(shot.crop(tuple(round(v * scale) for v in (
        area["x"], area["y"], area["x"] + area["width"], area["y"] + area["height"])))).astype(float)
    height, width = plot.shape
    # Each cell's brightness: the median of its middle half (away from the edges' antialiasing).
    cells = np.array([[np.median(plot[int((i + 0.25) * height / nodes):int((i + 0.75) * height / nodes),
                                      int((j + 0.25) * width / nodes):int((j + 0.75) * width / nodes)])
                       for j in range(nodes)] for i in range(nodes)])     # row: source, top to bottom
    diagonal = np.eye(nodes, dtype=bool)
    through_slow = np.zeros((nodes, nodes), dtype=bool)
    through_slow[slow, :] = through_slow[:, slow] = True
    assert (cells[diagonal] > 250).all(), cells.round()                   # blank: the page's white
    assert (cells[~diagonal] < 240).all(), cells.round()                  # every pair drawn in colour
    assert cells[through_slow & ~diagonal].max() < cells[~through_slow & ~diagonal].min(), cells.round()
