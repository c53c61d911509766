"""Notebooks and the report: every notebook runs top to bottom on a small campaign's dataset,
and the report the workflow wrote renders in a real headless browser without errors."""

import json
import shutil
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import papermill
import pytest
from PIL import Image

from commbench import open_campaign
from commbench.report import ReportData, Skipped, all_figures, write_report

from conftest import REPO

pytestmark = pytest.mark.mpi

# 04-report is run by the workflow's report rule on every campaign; the tiny one's run is checked below.
NOTEBOOKS = ("01-explore", "02-models", "03-anomalies", "06-compare")


@pytest.fixture(scope="module")
def tiny(workspace, tiny_campaign) -> Path:
    return workspace / "results" / "tiny"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_top_to_bottom(tiny, tmp_path, name, monkeypatch):
    """As JupyterLab runs it: the kernel starts in notebooks/, and the dataset is named as the
    notebooks name theirs, results/<campaign>/<campaign>.nc (here kept under $COMMBENCH_RESULTS)."""
    monkeypatch.setenv("COMMBENCH_RESULTS", str(tiny.parent))
    papermill.execute_notebook(str(REPO / "notebooks" / f"{name}.ipynb"), str(tmp_path / f"{name}.ipynb"),
                               parameters={"dataset": "results/tiny/tiny.nc"}, cwd=str(REPO / "notebooks"),
                               progress_bar=False)


def test_bandwidth_captions_say_how_the_window_was_posted():
    from commbench.data import synthetic as syn

    truth, grid = syn.GroundTruth(1e-6, 1e10), [1024, 2**20]
    ds = syn.campaign_dataset({("lib", "1N2P", kernel): syn.generate(grid, truth, n_samples=5, n_launches=1)
                               for kernel in ("stream.uni", "stream.uni@distinct", "pingpong.send")})
    ds = ds.assign_coords(window_buffers=("kernel", ["", "shared", "distinct"]))
    note = ReportData(ds).window_note(["stream.uni", "stream.uni@distinct", "pingpong.send"])
    assert note == (" Window buffers: stream.uni shared (one buffer per window, as osu_bw); "
                    "stream.uni@distinct distinct (a buffer per message of the window).")
    assert ReportData(ds).window_note(["pingpong.send"]) == ""


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


def test_a_figure_without_its_data_is_skipped_and_says_why(tiny):
    one_library = open_campaign(tiny / "tiny.nc").isel(library=[0])
    items = {item.name: item for item in all_figures(ReportData(one_library))}
    assert isinstance(items["library-comparison"], Skipped)
    assert "two or more libraries" in items["library-comparison"].reason


def test_integrity_errors_are_flagged_in_the_report(tiny, tmp_path):
    ds = open_campaign(tiny / "tiny.nc")
    ds["errors"][0, 0, 0, 2, 0] = 3      # as an --integrity run that saw 3 corrupted messages records it
    manifest = write_report(ReportData(ds), tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert manifest["integrity_errors"] == 1
    assert "class='flag'><b>Integrity errors</b>" in page


def _browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (browser and driver):
        pytest.skip("needs Debian's chromium and chromium-driver (make test installs them as root: envs/system.txt)")
    options = Options()
    options.binary_location = browser
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=options)


RENDERED = """
const views = Bokeh.index.values ? [...Bokeh.index.values()] : Object.values(Bokeh.index);
return {roots: Bokeh.documents.reduce((n, doc) => n + doc.roots().length, 0),
        plots: views.filter(v => ["Figure", "GridPlot"].includes(v.model.type) && v.el.isConnected).length,
        idle: views.every(v => v.is_idle !== false)};
"""


def test_report_renders_in_headless_chromium(tiny):
    manifest = json.loads((tiny / "figures" / "manifest.json").read_text())
    driver = _browser()
    try:
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
    finally:
        driver.quit()
    assert not errors, errors
    # Every figure of the manifest became one rendered Bokeh plot (each a grid: time and bandwidth, or
    # the ratio of the two libraries in each placement).
    assert state == {"roots": 5, "plots": 5, "idle": True}, state
    assert sections == len(manifest["figures"]) == 5
    # Self-contained: no script or stylesheet comes from anywhere else.
    page = (tiny / "report.html").read_text()
    assert "<script src=" not in page and "<link rel=\"stylesheet\"" not in page
    assert all(label in page for label in ("mpich-5.0.2", "openmpi-5.0.11", "1N2P", "2N1P", "Provenance",
                                           "What changed"))
