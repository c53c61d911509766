"""The report's 'What changed' section: library rows of one campaign, a baseline campaign, the
`compare:` pairs of a campaign file, and notebooks/06-compare, on synthetic campaigns whose changes
are known."""

import json
import re
import xml.etree.ElementTree as ElementTree

import holoviews as hv
import numpy as np
import papermill
import pytest
import xarray as xr
from PIL import Image

from commlens import cli
from commlens.data import synthetic as syn
from commlens.report import Comparison, ReportData, Skipped, ratio_figures, write_report
from commlens.report.backends import build_with
from commlens.report.notebook import KERNEL_SHUTDOWN
from commlens.report.comparison_figures import MAX_PANELS, comparison_panels
from commlens.report.comparison_sections import comparison_sections
from commlens.report.static import draw

from conftest import REPO, campaign_error

GRID = syn.powers_of_two(1, 2**20)
TRUTH = syn.GroundTruth(2e-6, 5e9, switches=(syn.Switch(16384, 4e-6, 8e9),))
NOISE = syn.Noise(relative=0.01, tail_df=3, outlier_fraction=0.01, outlier_scale=3, launch_relative=0.03)
BEFORE, AFTER = "mpich-4.3.2", "mpich-5.0.2"         # sorted: BEFORE is the first library row
SLOWER = (1.3, 4096, 65536)                          # the candidate's planted change: 30% slower there


def curve(seed, change=None, launches=4):
    drawn = syn.generate(GRID, TRUTH, NOISE, n_samples=40, n_launches=launches, seed=seed)
    return syn.with_change(drawn, *change) if change else drawn


def as_collected(ds: xr.Dataset, campaign: str = "synthetic", config: dict | None = None) -> xr.Dataset:
    """A synthetic dataset with what collect adds and the report reads: placement shapes, library
    provenance, launch status, integrity counts and the campaign's attributes."""
    placements = [str(p) for p in ds["placement"].values]
    nodes = [int(p.split("N")[0]) for p in placements]
    ppn = [int(p.split("N")[1].split("P")[0]) for p in placements]
    libraries = [str(v) for v in ds["library"].values]
    ds = ds.assign_coords(nodes=("placement", nodes), ppn=("placement", ppn),
                          nprocs=("placement", [n * p for n, p in zip(nodes, ppn)]),
                          emulated=("placement", [n > 1 for n in nodes]),
                          library_version=("library", [f"MPICH Version: {lib}" for lib in libraries]),
                          family=("library", ["mpich"] * len(libraries)),
                          compiler=("library", ["mpicc"] * len(libraries)),
                          library_env=("library", ["{}"] * len(libraries)))
    ds["status"] = xr.where((ds["sample_count"] > 0).any("size"), "ok", "skipped")
    ds["errors"] = xr.full_like(ds["sample_count"], np.nan, dtype=float)
    ds.attrs.update(campaign=campaign, commlens_version="test", hosts="node1",
                    campaign_config=json.dumps(config or {"campaign": campaign}))
    return ds


def two_libraries(kernels=("pingpong.send", "pingpong.ssend"), placements=("1N2P",), seed=0, **collected):
    """BEFORE and AFTER over `kernels` and `placements`; AFTER's pingpong.send is SLOWER."""
    curves = {}
    for p, placement in enumerate(placements):
        for k, kernel in enumerate(kernels):
            base = seed * 1000 + 10 * p + 2 * k * 50
            curves[BEFORE, placement, kernel] = curve(base)
            curves[AFTER, placement, kernel] = curve(base + 1, SLOWER if kernel == "pingpong.send" else None)
    return as_collected(syn.campaign_dataset(curves), **collected)


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    directory = tmp_path_factory.mktemp("report")
    manifest = write_report(ReportData(two_libraries()), directory)
    return directory, manifest, (directory / "report.html").read_text()


def test_the_report_opens_with_the_planted_change(reported):
    directory, manifest, page = reported
    [comparison] = manifest["comparisons"]
    assert comparison["title"] == f"{AFTER} against {BEFORE}"
    changes = [(row["change"], row["verdict"]) for row in comparison["changed_ranges"]]
    assert len(changes) == 1, changes                  # pingpong.ssend did not change
    line, verdict = changes[0]
    assert verdict in ("regressed", "slower")
    assert line.startswith("pingpong.send 1N2P: 4 KiB–64 KiB") and "slower" in line
    assert comparison["changed_ranges"][0]["q value"] <= 0.05
    # The report opens with it: a conclusion that names it and links to the comparison, before any figure.
    opening = page[page.index("id='conclusions'"):page.index("id='figures'")]
    assert re.search(r"1N2P pingpong\.send 4 KiB–64 KiB 1\.\d+x slower \(slower", opening), opening[:2000]
    assert f"href='#compare-{BEFORE}-{AFTER}'" in opening
    assert manifest["figures"][0]["name"] == comparison["figures"][0] == f"compare-{BEFORE}-{AFTER}"
    assert "pingpong.send 1N2P: 4 KiB–64 KiB" in page
    assert "Benjamini-Hochberg false discovery rate at 0.05 over 42 launch-level cells" in page
    assert "unpaired t test on the log of each launch" in page


def test_the_ratio_figure_is_a_valid_image(reported):
    directory, manifest, page = reported
    name = manifest["comparisons"][0]["figures"][0]
    with Image.open(directory / "figures" / f"{name}.png") as image:
        image.verify()
        assert image.format == "PNG" and image.size[0] > image.size[1] > 100     # two panels side by side
    assert ElementTree.parse(directory / "figures" / f"{name}.svg").getroot().tag.endswith("svg")
    assert f"id='fig-{name}'" in page


def test_one_library_row_has_no_comparison(tmp_path):
    manifest = write_report(ReportData(two_libraries().isel(library=[0])), tmp_path)
    assert manifest["comparisons"] == []
    assert not any(figure["name"].startswith("compare-") for figure in manifest["figures"])
    assert "What changed" not in (tmp_path / "report.html").read_text()


def test_the_campaign_files_compare_pairs_are_the_comparisons():
    pairs = [{"baseline": AFTER, "candidate": BEFORE}, {"baseline": BEFORE, "candidate": "mpich-3.4.3"}]
    curves = {(library, "1N2P", "pingpong.send"): curve(n) for n, library in enumerate((BEFORE, AFTER, "mpich-3.4.3"))}
    ds = as_collected(syn.campaign_dataset(curves), config={"compare": pairs})
    ds["sample_count"].loc[dict(library="mpich-3.4.3")] = 0          # its build failed: a row without data
    first, second = ReportData(ds).comparisons
    assert isinstance(first, Comparison) and first.title == f"{BEFORE} against {AFTER}"
    assert isinstance(second, Skipped) and "mpich-3.4.3 has no data" in second.reason


def test_the_compare_key_names_two_library_rows(tmp_path):
    text = """
        campaign: c
        libraries:
          mpich-4.3.2: {mpi: mpich-4.3.2}
          mpich-5.0.2: {mpi: mpich-5.0.2}
        placements: [{name: 1N2P, nodes: 1, ppn: 2}]
        kernels: {pingpong.send: {sizes: {schedule: small}}}
        compare:
          - {baseline: mpich-4.3.2, candidate: %s}
        """
    message = campaign_error(tmp_path, text % "mpich-5.0.3")
    assert ("compare[0].candidate: 'mpich-5.0.3' is not a library row (did you mean 'mpich-5.0.2'?); "
            "allowed values: mpich-4.3.2, mpich-5.0.2") in message
    assert "a pair compares two different library rows" in campaign_error(tmp_path, text % "mpich-4.3.2")
    assert "compare[0]: unknown key 'after'" in campaign_error(tmp_path, (text % "mpich-5.0.2").replace(
        "candidate: mpich-5.0.2", "after: mpich-5.0.2"))


def test_more_than_a_dozen_panels_make_one_figure_per_kernel_family():
    kernels = ("pingpong.send", "pingpong.ssend", "pingpong.isend", "rma.put", "rma.get")
    ds = two_libraries(kernels=kernels, placements=("1N2P", "2N1P", "1N4P"))
    comparison = next(item for item in ReportData(ds).comparisons if isinstance(item, Comparison))
    assert len(comparison_panels(comparison.result)) == 15 > MAX_PANELS
    figures = {figure.name: figure for figure in ratio_figures(comparison)}
    assert set(figures) == {f"compare-{BEFORE}-{AFTER}-pingpong", f"compare-{BEFORE}-{AFTER}-rma"}
    pingpong = figures[f"compare-{BEFORE}-{AFTER}-pingpong"]
    assert len(build_with("bokeh", pingpong)) == 9                 # a Layout of 3 kernels x 3 placements
    drawn = draw(build_with("matplotlib", pingpong))               # the static drawer knows every element
    assert sum(ax.get_visible() for ax in drawn.axes) == 9
    assert all(ax.get_xscale() == "log" and any(line.get_ydata()[0] == 1 for line in ax.get_lines())
               for ax in drawn.axes if ax.get_visible())
    assert hv.render(build_with("bokeh", figures[f"compare-{BEFORE}-{AFTER}-rma"]), backend="bokeh") is not None
    # The report draws a default pair (first row against another) up to 12 panels, in campaign order;
    # a pair the campaign lists, all of it.
    [section], _ = comparison_sections(ReportData(ds))
    assert [figure.name for figure in section.figures] == [pingpong.name]
    assert "list this pair under `compare:`" in section.skipped[0].reason
    listed = ds.assign_attrs(campaign_config=json.dumps({"compare": [{"baseline": BEFORE, "candidate": AFTER}]}))
    [section], _ = comparison_sections(ReportData(listed))
    assert {figure.name for figure in section.figures} == set(figures) and not section.skipped


def test_report_command_compares_against_a_baseline_campaign(tmp_path, capsys, monkeypatch):
    """`commlens report CANDIDATE --baseline BASELINE`: each library row against the baseline
    campaign's, one row each here with different names; hosts that differ are warned about. It says
    how far it has come, a line per notebook cell, and keeps its duration for the campaign's estimates."""
    monkeypatch.setenv("COMMLENS_CACHE", str(tmp_path / "cache"))
    base = two_libraries(seed=1, campaign="before").isel(library=[0])
    cand = two_libraries(seed=2, campaign="after").isel(library=[1])
    cand.attrs["hosts"] = "node2"
    base.to_netcdf(tmp_path / "before.nc")
    cand.to_netcdf(tmp_path / "after.nc")
    output = tmp_path / "report"
    args = ["report", str(tmp_path / "after.nc"), "--output-dir", str(output)]
    assert cli.main([*args, "--baseline", str(tmp_path / "before.nc")]) == 0
    printed = capsys.readouterr()
    assert "warning: measured differently: hosts: 'node1' against 'node2'" in printed.err
    cells = re.findall(r"^\[report\] cell (\d+)/(\d+), [\d.]+ (?:s|min): \S", printed.out, re.MULTILINE)
    assert [int(n) for n, _ in cells] == list(range(1, len(cells) + 1)) and {int(t) for _, t in cells} == {len(cells)}
    assert len(cells) >= 5 and re.search(rf"^report: {re.escape(str(output))}/report.html \([\d.]+ (?:s|min)\)$",
                                         printed.out, re.MULTILINE), printed.out
    [timing] = [json.loads(line) for line in (tmp_path / "cache" / "stage-durations.jsonl").read_text().splitlines()]
    curves = cand.sizes["library"] * cand.sizes["placement"] * cand.sizes["kernel"]
    assert timing["stage"] == "report" and timing["units"] == curves and timing["seconds"] > 1
    manifest = json.loads((output / "figures" / "manifest.json").read_text())
    [comparison] = manifest["comparisons"]
    assert comparison["title"] == f"{AFTER} against campaign before"
    assert [row["verdict"] for row in comparison["changed_ranges"]] == ["regressed"]
    assert comparison["changed_ranges"][0]["change"].startswith("pingpong.send 1N2P: 4 KiB–64 KiB")
    page = (output / "report.html").read_text()
    assert "<b>Measured differently</b>: hosts" in page and f"fig-baseline-before-{AFTER}" in page
    # Campaigns with nothing to match are refused before any report is written.
    two = two_libraries(seed=3, campaign="two").assign_coords(library=["openmpi-4.1.8", "openmpi-5.0.11"])
    two.to_netcdf(tmp_path / "two.nc")
    assert cli.main([*args, "--baseline", str(tmp_path / "two.nc")]) == 2
    assert "share no library row" in capsys.readouterr().err


def test_compare_notebook_runs_on_send_and_ssend(tmp_path):
    two_libraries().to_netcdf(tmp_path / "two.nc")
    executed = tmp_path / "06-compare.ipynb"
    papermill.execute_notebook(str(REPO / "notebooks" / "06-compare.ipynb"), str(executed),
                               parameters={"dataset": str(tmp_path / "two.nc")}, cwd=str(REPO), progress_bar=False,
                               shutdown_kernel=KERNEL_SHUTDOWN)
    streams = [output["text"] for cell in json.loads(executed.read_text())["cells"]
               for output in cell.get("outputs", []) if output["output_type"] == "stream"]
    text = "".join("".join(lines) if isinstance(lines, list) else lines for lines in streams)
    assert "regressed  pingpong.send 1N2P: 4 KiB–64 KiB" in text
    assert "compared along kernel" in text and "exit status: 0" in text
