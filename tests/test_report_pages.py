"""A report of a broad campaign: many kernel variants become small multiples, figures past one page go
on one page per kernel family, and figures past the interactive budget are shown as their static PNG;
every page opens in a real headless browser without errors. Synthetic campaigns keep it fast."""

import re
import time

import pytest
from PIL import Image

from commbench.report import ReportData, write_report
from commbench.report import pages as report_pages
from commbench.report.comparison_figures import MAX_PANELS
from commbench.report.plotting import MAX_CURVES

from test_compare_report import two_libraries
from test_report import RENDERED, _browser

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
    driver = _browser()
    try:
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
    finally:
        driver.quit()


def test_a_few_figures_of_many_panels_also_get_pages():
    """Three figures are few, but 40 panels each are more than one page holds."""
    from commbench.report import Figure

    figures = [Figure("library-comparison-1N2P", "t", "c", None, panels=2, page=""),
               Figure("variants-1N2P", "t", "c", None, panels=report_pages.MAX_PANELS_ONE_PAGE // 2,
                      page="point-to-point"),
               Figure("variants-2N1P", "t", "c", None, panels=report_pages.MAX_PANELS_ONE_PAGE // 2,
                      page="point-to-point")]
    assert list(report_pages.figure_pages(figures[:2])) == [""]
    pages = report_pages.figure_pages(figures)
    assert {page: [f.name for f in members] for page, members in pages.items()} == {
        "": ["library-comparison-1N2P"], "point-to-point": ["variants-1N2P", "variants-2N1P"]}
