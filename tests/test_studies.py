"""The report campaigns: a shrunken copy of each (one library, two placements per kernel, two
sizes per kernel, one launch, loose precision) runs through the workflow. Every study's own
figures are drawn from its dataset in both backends; one study goes on through the report rule
to its page, which is the same code for all of them (each report costs seconds per figure)."""

import html
import json

import holoviews as hv
import pytest
import yaml

from commlens import open_campaign
from commlens.report import Figure, ReportData, all_figures, all_tables
from commlens.report.backends import build_with
from commlens.report.static_copies import save_static
from commlens.units import parse_size

from conftest import REPO, snakemake

pytestmark = pytest.mark.mpi

# What each study's report must show: figures (file stems) and its own tables (ids in the page).
EXPECTED = {
    "library-update": ({"send-ssend-1N2P", "one-sided-1N2P", "multipair-aggregate", "multipair-per-pair"},
                       {"performance-table", "multipair-table"}),
    "netpipe": ({"throughput-1N2P", "throughput-2N1P"}, {"performance-table"}),
    "collectives": ({"collective-bounds-1N2P", "collectives", "variants-1N2P"}, set()),
    "io-and-patterns": ({"io", "io-strategies-1N2P", "patterns-1N2P"}, {"halo-speedup"}),
    "switch-tables": ({"throughput-1N2P", "multipair-aggregate"}, {"performance-table", "multipair-table"}),
}
# The study whose shrunken campaign goes all the way to report.html: the one with the fewest figures.
REPORTED = "switch-tables"


def shrink(config: dict) -> dict:
    """The same study at the smallest scale that still draws its figures: its first library, each
    kernel on the first two of its placements, two sizes per kernel."""
    first = next(iter(config["libraries"]))
    config["libraries"] = {first: config["libraries"][first]}
    config.pop("compare", None)          # its pairs name the rows just left out
    every = [placement["name"] for placement in config["placements"]]
    for spec in config["kernels"].values():
        spec["placements"] = spec.get("placements", every)[:2]
    kept = {name for spec in config["kernels"].values() for name in spec["placements"]}
    config["placements"] = [p for p in config["placements"] if p["name"] in kept]
    for spec in config["kernels"].values():
        sizes = spec.get("sizes", {})
        if "list" in sizes:
            listed = sorted(parse_size(s) for s in sizes["list"])
            spec["sizes"] = {"list": listed[:2]}
        else:                                    # a schedule: its first two powers of two
            low = max(parse_size(sizes.get("min", 1)), 1)
            spec["sizes"] = {"list": [low, 4 * low]}
    config["launches"] = 1
    config["precision"] = {"rse": 0.2, "min_samples": 3, "max_samples": 10, "max_point_time": 0.05}
    return config


def run_shrunken(workspace, study: str, *targets: str) -> dict:
    config = shrink(yaml.safe_load((REPO / "config" / "campaigns" / f"{study}.yaml").read_text()))
    campaign = workspace / "config" / "campaigns" / f"{study}-shrunk.yaml"
    campaign.write_text(yaml.safe_dump(config))
    snakemake(workspace, *targets, "--configfile", str(campaign))
    return config


@pytest.mark.parametrize("study", sorted(set(EXPECTED) - {REPORTED}))
def test_shrunken_study_draws_its_own_figures(workspace, built, tmp_path, study):
    run_shrunken(workspace, study, f"results/{study}/{study}.nc")
    ds = open_campaign(workspace / "results" / study / f"{study}.nc")
    assert set(ds["status"].values.ravel()) <= {"ok", "skipped"}, ds.commlens.failed_runs()
    data = ReportData(ds)
    figures, tables = EXPECTED[study]
    drawn = {item.name: item for item in all_figures(data) if isinstance(item, Figure)}
    assert figures <= set(drawn), figures - set(drawn)
    made, _ = all_tables(data)
    assert tables <= {table.name for table in made}
    for name in sorted(figures):   # as the report draws them: static files, then the page's Bokeh model
        assert save_static(drawn[name], tmp_path) == [f"{name}.png", f"{name}.svg"]
        assert hv.render(build_with("bokeh", drawn[name]), backend="bokeh") is not None


def test_shrunken_study_runs_to_its_report(workspace, built):
    config = run_shrunken(workspace, REPORTED)
    results = workspace / "results" / REPORTED
    manifest = json.loads((results / "figures" / "manifest.json").read_text())
    drawn = {figure["name"] for figure in manifest["figures"]}
    figures, tables = EXPECTED[REPORTED]
    assert figures <= drawn, (figures - drawn, manifest["skipped"])
    page = (results / "report.html").read_text()
    assert all(f"id='{table}'" in page for table in tables), tables
    assert config["report"]["study"] in page
    assert all(html.escape(note) in page for note in config["report"]["notes"])
    assert "Provenance" in page and "launch(es) gave no data" not in page
