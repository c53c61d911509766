"""Notebooks and the report: every notebook runs top to bottom on a small campaign's dataset; the
report the workflow wrote opens with its headline numbers, draws every point inside its own band and
renders in a real headless browser without errors; a one-curve campaign gets its curve, and a campaign
in which no launch gave data gets a report that says which rows gave none and why."""

import contextlib
import json
import os
import shutil
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import holoviews as hv
import pytest
from PIL import Image

from commlens import open_campaign
from commlens.launch.placement import Placement
from commlens.units import US, format_launch_interval
from commlens.report import ReportData, Skipped, all_figures, write_report
from commlens.report.backends import build_with
from commlens.report.figures import regime_lines
from commlens.report.plotting import FIT_LABEL

from conftest import LIBRARIES, REPO, launch

def test_bandwidth_captions_say_how_the_window_was_posted():
    from commlens.data import synthetic as syn

    truth, grid = syn.GroundTruth(1e-6, 1e10), [1024, 2**20]
    ds = syn.campaign_dataset({("lib", "1N2P", kernel): syn.generate(grid, truth, n_samples=5, n_launches=1)
                               for kernel in ("stream.uni", "stream.uni@distinct", "pingpong.send")})
    ds = ds.assign_coords(window_buffers=("kernel", ["", "shared", "distinct"]))
    note = ReportData(ds).window_note(["stream.uni", "stream.uni@distinct", "pingpong.send"])
    assert note == (" Window buffers: stream.uni shared (one buffer per window, as osu_bw); "
                    "stream.uni@distinct distinct (a buffer per message of the window).")
    assert ReportData(ds).window_note(["pingpong.send"]) == ""


@pytest.mark.mpi
def test_report_notebook_ran_top_to_bottom_in_the_workflow(tiny):
    cells = [cell for cell in json.loads((tiny / "report.ipynb").read_text())["cells"] if cell["cell_type"] == "code"]
    assert all(cell["execution_count"] for cell in cells)
    assert not [output for cell in cells for output in cell["outputs"] if output["output_type"] == "error"]
    assert (tiny / "report.html").stat().st_size > 0


def test_notebooks_are_committed_without_outputs():
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        assert not any(cell.get("outputs") for cell in cells if cell["cell_type"] == "code"), path
        tagged = [cell for cell in cells if "parameters" in cell.get("metadata", {}).get("tags", [])]
        assert len(tagged) == 1, f"{path.name}: one cell tagged 'parameters' for papermill"


@pytest.mark.mpi
def test_static_figures_are_valid_images(tiny):
    manifest = json.loads((tiny / "figures" / "manifest.json").read_text())
    names = {figure["name"] for figure in manifest["figures"]}
    # Two libraries and an on-node and an emulated off-node placement: both comparisons drawn, and
    # the report opens with the second library row against the first, both placements in one figure.
    assert names == {"compare-mpich-5.0.2-openmpi-5.0.11", "library-comparison-1N2P", "library-comparison-2N1P",
                     "placement-comparison-mpich-5.0.2", "placement-comparison-openmpi-5.0.11"}, names
    assert manifest["figures"][0]["name"] == manifest["comparisons"][0]["figures"][0]
    for figure in manifest["figures"]:
        png, svg = tiny / "figures" / f"{figure['name']}.png", tiny / "figures" / f"{figure['name']}.svg"
        with Image.open(png) as image:
            image.verify()
            assert image.format == "PNG" and min(image.size) > 100
        assert ElementTree.parse(svg).getroot().tag.endswith("svg")
    # What the tiny campaign lacks is skipped, each with its reason.
    skipped = {item["name"]: item["reason"] for item in manifest["skipped"]}
    assert "needs pingpong.send and pingpong.ssend" in skipped["send-ssend"]
    assert "multipair" in skipped["multipair-aggregate"] and "coll." in skipped["collectives"]


@pytest.mark.mpi
def test_a_figure_without_its_data_is_skipped_and_says_why(tiny):
    one_library = open_campaign(tiny / "tiny.nc").isel(library=[0])
    items = {item.name: item for item in all_figures(ReportData(one_library))}
    assert isinstance(items["library-comparison"], Skipped)
    assert "two or more libraries" in items["library-comparison"].reason


@pytest.mark.mpi
def test_integrity_errors_are_flagged_in_the_report(tiny, tmp_path):
    ds = open_campaign(tiny / "tiny.nc")
    ds["errors"][0, 0, 0, 2, 0] = 3      # as an --integrity run that saw 3 corrupted messages records it
    manifest = write_report(ReportData(ds), tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert manifest["integrity_errors"] == 1
    assert "class='flag'><b>Integrity errors</b>" in page


@contextlib.contextmanager
def browser():
    """Headless Chromium through Selenium, quit on the way out. Its temporary files go to a folder of its
    own, removed then: Chromium leaves its profile's singleton socket folder in $TMPDIR when chromedriver
    ends it (a hundred org.chromium.Chromium.* in /tmp after two days of runs)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    executable, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (executable and driver):
        pytest.skip("needs Debian's chromium and chromium-driver (make test installs them as root: envs/system.txt)")
    options = Options()
    options.binary_location = executable
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    folder = tempfile.mkdtemp(prefix="commlens-browser-")
    try:
        session = webdriver.Chrome(service=Service(driver, env={**os.environ, "TMPDIR": folder}), options=options)
        try:
            yield session
        finally:
            session.quit()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


RENDERED = """
const views = Bokeh.index.values ? [...Bokeh.index.values()] : Object.values(Bokeh.index);
return {roots: Bokeh.documents.reduce((n, doc) => n + doc.roots().length, 0),
        plots: views.filter(v => ["Figure", "GridPlot"].includes(v.model.type) && v.el.isConnected).length,
        idle: views.every(v => v.is_idle !== false)};
"""


@pytest.mark.mpi
def test_report_renders_in_headless_chromium(tiny):
    manifest = json.loads((tiny / "figures" / "manifest.json").read_text())
    with browser() as driver:
        driver.get((tiny / "report.html").resolve().as_uri())
        deadline, state = time.monotonic() + 60, None
        while time.monotonic() < deadline:
            state = driver.execute_script("return typeof Bokeh === 'undefined' ? null : true") and \
                driver.execute_script(RENDERED)
            if state and state["idle"] and state["roots"] >= len(manifest["figures"]):
                break
            time.sleep(0.5)
        sections = driver.execute_script("return document.querySelectorAll('section.figure').length")
        errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors
    # Every figure of the manifest became one rendered Bokeh plot (each a grid: time and bandwidth, or
    # the ratio of the two libraries in each placement).
    assert state == {"roots": 5, "plots": 5, "idle": True}, state
    assert sections == len(manifest["figures"]) == 5
    # Self-contained: no script or stylesheet comes from anywhere else.
    page = (tiny / "report.html").read_text()
    assert "<script src=" not in page and "<link rel=\"stylesheet\"" not in page
    assert all(label in page for label in ("mpich-5.0.2", "openmpi-5.0.11", "1N2P", "2N1P", "Provenance",
                                           "How they differ"))


@pytest.mark.mpi
def test_every_point_lies_inside_its_own_band(tiny):
    """The band around each line is the interval of the median the line draws (not of the mean): every
    point of the real campaign inside it, as drawn, time and bandwidth alike."""
    data = ReportData(open_campaign(tiny / "tiny.nc"))
    points = data.points
    inside = ((points["ci_low_us"] <= points["time_us"]) & (points["time_us"] <= points["ci_high_us"])
              & (points["bandwidth_low_MBps"] <= points["bandwidth_MBps"])
              & (points["bandwidth_MBps"] <= points["bandwidth_high_MBps"]))
    assert len(points) == 2 * 2 * 5 and inside.all(), points[~inside]
    checked = 0
    for figure in (item for item in all_figures(data) if not isinstance(item, Skipped)):
        drawn = build_with("bokeh", figure).traverse(lambda element: element, [hv.Curve])
        bands = {(e.label, e.vdims[0].name): e for e in drawn if isinstance(e, hv.Area)}
        # The dotted fitted-regimes lines are the model, not the medians: they have no band.
        for line in (e for e in drawn if type(e) is hv.Curve and e.vdims[0].name in ("time_us", "bandwidth_MBps")
                     and not e.label.endswith(FIT_LABEL)):
            low = "ci_low_us" if line.vdims[0].name == "time_us" else "bandwidth_low_MBps"
            band = bands[(line.label, low)]
            y = line.dimension_values(1)
            assert (band.dimension_values(1) <= y).all() and (y <= band.dimension_values(2)).all(), figure.name
            checked += len(y)
    assert checked >= 2 * len(points)


@pytest.mark.mpi
def test_the_report_opens_at_a_glance(tiny):
    page = (tiny / "report.html").read_text()
    assert "Dataset dims" not in page
    conclusions, glance, changed, methods = (page.index(mark) for mark in (
        "id='conclusions'", "id='at-a-glance'", "id='what-changed'", "id='methods'"))
    assert page.index("<h1>") < conclusions < glance < changed < methods
    ds = open_campaign(tiny / "tiny.nc")
    summary = ds.commlens.summary().sel(kernel="pingpong.send", size=1)
    for library in LIBRARIES:
        for placement in ("1N2P", "2N1P"):
            cell = summary.sel(library=library, placement=placement)
            # The median with its interval, or, over too few launches to give one, what the launches read.
            per_launch = ds["median"].sel(library=library, placement=placement, kernel="pingpong.send", size=1)
            latency = format_launch_interval(*(float(v) / US for v in (cell["median"], *cell["median_ci"].values)),
                                             int(cell["launches"]), per_launch.values / US)
            assert f"<td>{latency}</td>" in page[glance:changed], (library, placement, latency)
    measured = ds["sample_count"] > 0
    settled = int(ds["settled"].where(measured, False).sum())
    assert f"{settled} of {int(measured.sum())} points (one size in one launch) met the precision target" in page


@pytest.mark.mpi
@pytest.mark.browser
def test_a_one_curve_campaign_draws_its_latency_and_bandwidth(tiny, tmp_path):
    """The most basic OSU-style run, one library, one placement, pingpong.send at 4 sizes, 2 launches:
    its curve is drawn (time and bandwidth), in a real browser; what it cannot have is one line."""
    one = open_campaign(tiny / "tiny.nc").isel(library=[0], placement=[0]).sel(size=[1, 8, 1024, 65536])
    manifest = write_report(ReportData(one), tmp_path)
    assert [figure["name"] for figure in manifest["figures"]] == ["curves-1N2P"]
    page = (tmp_path / "report.html").read_text()
    assert "No figure could be drawn" not in page and "<li class='skipped'>" not in page
    assert page.count("<p class='skipped'>") == 1
    # Said once, after the appendix: what the campaign did not measure is no finding of the report.
    assert f"where a campaign measures what they need ({len(manifest['skipped'])}):" in page
    assert page.index("<h3 id='not-drawn'>") > page.index("<h2 id='appendix'>")
    # Every table scrolls within the page where it is wider than the page (it was cut off at 1,400 px).
    assert page.count("<table") == page.count("<div class='table'><table")
    with browser() as driver:
        driver.get((tmp_path / "report.html").resolve().as_uri())
        lines = None
        for _ in range(120):
            lines = driver.execute_script(DRAWN_LINES)
            if lines:
                break
            time.sleep(0.5)
        errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors
    # Two panels (time, bandwidth), each with its line through the 4 sizes, and its dotted fitted
    # regimes through the same sizes where the piecewise model could be fitted to them.
    fitted = bool(regime_lines(ReportData(one), ReportData(one).points, "library"))
    assert sorted(lines) == [4, 4] * (1 + fitted), lines


DRAWN_LINES = """
const views = typeof Bokeh === 'undefined' ? [] :
    (Bokeh.index.values ? [...Bokeh.index.values()] : Object.values(Bokeh.index));
const lines = [];
const walk = (view) => {
  if (view.model.type === 'GlyphRenderer' && view.model.glyph.type === 'Line' && view.el && view.is_idle !== false)
    lines.push(view.model.data_source.data[view.model.glyph.x.field].length);
  for (const child of (view.child_views || [])) walk(child);
  if (view.renderer_views) for (const child of view.renderer_views.values()) walk(child);
};
views.forEach(walk);
return lines;
"""


def no_data_dataset(tmp_path: Path, results: list):
    """The dataset collect makes of a campaign none of whose launches gave data."""
    from commlens.campaign import Campaign, validate_campaign
    from commlens.data.collect import build_dataset
    from commlens.io.netcdf import write_dataset

    config = validate_campaign({"campaign": "nothing", "launches": 1,
                                "libraries": {row: {"mpi": row} for row in LIBRARIES},
                                "placements": [{"name": "1N2P", "nodes": 1, "ppn": 2},
                                               {"name": "1N512P", "nodes": 1, "ppn": 512}],
                                "kernels": {"pingpong.send": {"sizes": {"list": [8, 1024]}},
                                            "multipair.stream": {"sizes": {"list": [8, 1024]}}}})
    campaign = Campaign(name="nothing", source="nothing.yaml", config=config)
    libraries = {row: {"name": row, "family": row.split("-")[0]} for row in LIBRARIES}
    builds = {row: {"mpi": row, "compiler": "gcc 12", "cflags": "-O2"} for row in LIBRARIES}
    write_dataset(build_dataset(campaign, results, libraries, builds), tmp_path / "nothing.nc")
    return open_campaign(tmp_path / "nothing.nc")


def test_a_campaign_where_no_launch_gave_data_gets_a_report_that_says_so(tmp_path):
    """Every launch unsupported (a setting the library lacks) or beyond the machine (512 ranks): the
    report is written, draws nothing and opens with each row, how its launches ended and why."""
    from commlens.io.raw import read_raw
    from commlens.launch.run import record_not_run

    results = []
    for row in LIBRARIES:
        for placement, status, reason in (("1N2P", "unsupported", f"{row} does not know the setting X"),
                                          ("1N512P", "failed", "512 ranks on 2 cores: killed")):
            for kernel in ("pingpong.send", "multipair.stream"):
                path = tmp_path / "raw" / row / placement / kernel / "launch0.jsonl"
                record_not_run(path, {"library": row, "placement": placement, "kernel": kernel, "launch": 0},
                               status, reason)
                results.append(read_raw(path))
    ds = no_data_dataset(tmp_path, results)
    manifest = write_report(ReportData(ds), tmp_path / "report")
    page = (tmp_path / "report" / "report.html").read_text()
    assert manifest["figures"] == [] and "No figure could be drawn from this dataset." in page
    glance = page[page.index("id='at-a-glance'"):page.index("id='methods'")]
    assert "<b>No launch gave data</b>" in glance and "0 of 8 launches gave data" in glance
    for row in LIBRARIES:
        for placement, status, reason in (("1N2P", "unsupported", f"{row} does not know the setting X"),
                                          ("1N512P", "failed", "512 ranks on 2 cores: killed")):
            for kernel in ("pingpong.send", "multipair.stream"):
                assert (f"<td>{row}</td>\n      <td>{placement}</td>\n      <td>{kernel}</td>\n      <td>{status}</td>"
                        f"\n      <td>1</td>\n      <td>{reason}</td>") in glance, (row, placement, kernel)
    assert "no launch gave data, so how it ran is not recorded" in page


@pytest.mark.mpi
def test_launches_the_launcher_refuses_give_a_report_of_why(workspace, built, tmp_path):
    """The real launcher refusing every launch (a setting neither library knows): the report says so."""
    settings = {"mpich-5.0.2": {"MPIR_CVAR_NO_SUCH_SETTING": "1"}, "openmpi-5.0.11": {"OMPI_MCA_no_such_setting": "1"}}
    results = []
    for row in LIBRARIES:
        for placement in (Placement("1N2P", 1, 2), Placement("1N512P", 1, 512)):
            for kernel in ("pingpong.send", "multipair.stream"):
                folder = tmp_path / row / placement.name / kernel
                folder.mkdir(parents=True)
                result = launch(workspace, row, placement, [kernel, "-m", "8:1024"], folder,
                                library_env=settings[row])
                assert result.status == "unsupported", result.launch
                results.append(result)
    write_report(ReportData(no_data_dataset(tmp_path, results)), tmp_path / "report")
    page = (tmp_path / "report" / "report.html").read_text()
    # At a glance ends where the figures begin (the Failed launches table, further down, lists them again).
    glance = page[page.index("id='at-a-glance'"):page.index("id='figures'")]
    assert "<b>No launch gave data</b>" in glance and "0 of 8 launches gave data" in glance
    assert glance.count("<td>unsupported</td>") == 8
    assert "MPIR_CVAR_NO_SUCH_SETTING" in glance and "OMPI_MCA_no_such_setting" in glance


def test_a_switch_every_library_shows_at_one_size_on_node_may_be_a_cache():
    """Each library's own protocol switch (8 KiB, 4 KiB) is a protocol; the bandwidth drop both show at
    1 MiB on one node and neither off-node is more likely the cache, and the findings table says so."""
    from commlens.data import synthetic as syn
    from commlens.report.findings import findings_table

    grid, noise = syn.powers_of_two(1, 4 * 2**20), syn.Noise(0.01)
    cache = syn.Switch(2**20, 0.0, 4e9)
    truths = {("liba", "1N2P"): syn.GroundTruth(1e-6, 1e10, (syn.Switch(8192, 2e-6, 1.2e10), cache)),
              ("libb", "1N2P"): syn.GroundTruth(0.5e-6, 1e10, (syn.Switch(4096, 2e-6, 1.2e10), cache)),
              ("liba", "2N1P"): syn.GroundTruth(10e-6, 1e9), ("libb", "2N1P"): syn.GroundTruth(10e-6, 1e9)}
    ds = syn.campaign_dataset({(library, placement, "pingpong.send"): syn.generate(grid, truth, noise, 30, 3, seed=n)
                               for n, ((library, placement), truth) in enumerate(truths.items())})
    ds = ds.assign_coords(nodes=("placement", [1, 2]), ppn=("placement", [2, 1]), nprocs=("placement", [2, 2]),
                          emulated=("placement", [False, True]))
    table = findings_table(ReportData(ds)).frame.set_index(["library", "at"])
    assert sorted(table.index) == [("liba", "1 MiB"), ("liba", "8 KiB"), ("libb", "1 MiB"), ("libb", "4 KiB")]
    for library in ("liba", "libb"):
        assert table.loc[(library, "1 MiB"), "note"] == (
            "may be a cache rather than a protocol: all 2 libraries show it at this size on one node, and no "
            "off-node curve of the kernel shows it")
        assert table.loc[(library, "1 MiB"), "between"] == "512 KiB and 1 MiB"
    assert table.loc[("liba", "8 KiB"), "note"] == table.loc[("libb", "4 KiB"), "note"] == ""
    assert all("e+" not in str(value) and "e-" not in str(value) for value in table.to_numpy().ravel())
