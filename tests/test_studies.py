"""The report campaigns: a shrunken copy of each (one library, two placements per kernel, two
sizes per kernel, one launch, loose precision) runs through the whole workflow to its report, which
draws the study's own figures and tables and states its scale and limits."""

import html
import json

import pytest
import yaml

from commbench.units import parse_size

from conftest import REPO, snakemake

pytestmark = pytest.mark.mpi

# What each study's report must show: figures (file stems) and tables (ids in the page).
EXPECTED = {
    "library-update": ({"send-ssend-1N2P", "one-sided-1N2P", "multipair-aggregate", "multipair-per-pair"},
                       {"performance-table", "multipair-table"}),
    "netpipe": ({"throughput-1N2P", "throughput-2N1P"}, {"performance-table", "findings"}),
    "collectives": ({"collective-bounds-1N2P", "collectives", "variants-1N2P"}, {"findings"}),
    "io-and-patterns": ({"io", "io-strategies-1N2P", "patterns-1N2P"}, {"halo-speedup"}),
    "switch-tables": ({"throughput-1N2P", "multipair-aggregate"}, {"performance-table", "multipair-table"}),
}


def shrink(config: dict) -> dict:
    """The same study at the smallest scale that still draws its figures: its first library, each
    kernel on the first two of its placements, two sizes per kernel."""
    first = next(iter(config["libraries"]))
    config["libraries"] = {first: config["libraries"][first]}
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


@pytest.mark.parametrize("study", sorted(EXPECTED))
def test_shrunken_study_runs_to_its_report(workspace, built, study):
    config = shrink(yaml.safe_load((REPO / "config" / "campaigns" / f"{study}.yaml").read_text()))
    campaign = workspace / "config" / "campaigns" / f"{study}-shrunk.yaml"
    campaign.write_text(yaml.safe_dump(config))
    snakemake(workspace, "--configfile", str(campaign))

    results = workspace / "results" / study
    manifest = json.loads((results / "figures" / "manifest.json").read_text())
    drawn = {figure["name"] for figure in manifest["figures"]}
    figures, tables = EXPECTED[study]
    assert figures <= drawn, (figures - drawn, manifest["skipped"])
    page = (results / "report.html").read_text()
    assert all(f"id='{table}'" in page for table in tables), tables
    assert config["report"]["study"] in page
    assert all(html.escape(note) in page for note in config["report"]["notes"])
    assert "Provenance" in page and "launch(es) gave no data" not in page
