"""The kernel catalogue (kernels/catalogue.def) is the one description of each kernel: the catalogue
tool and every build print it, the campaign is checked against it, and a kernel added in C alone
(its function and its catalogue entry) runs through a campaign, the report and export."""

import json
import shutil
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from commlens import open_campaign
from commlens.launch.catalogue import catalogue, launch_needs, tool

from conftest import LIBRARIES, REPO, campaign_error, snakemake

TAGS = {"variant", "throughput", "reference", "synchronous", "table", "peak", "one-sided", "multipair", "pairs",
        "pattern", "halo", "baseline", "collective", "fan-out", "fan-in", "congestion", "io", "threads", "overlap",
        "availability"}


def test_every_kernel_is_described_once_with_what_python_needs():
    kernels = catalogue()
    names = [k.name for k in kernels.values()]
    assert len(names) == len(set(names)) > 40
    for kernel in kernels.values():
        assert (REPO / kernel.source).is_file(), kernel
        assert kernel.metric and kernel.min_ranks >= 1 and kernel.bytes_per in ("once", "rank", "pair")
        assert set(kernel.tags) <= TAGS, kernel
    assert kernels["stream.bi"].bytes_moved(2) == 2 and kernels["multipair.stream"].bytes_moved(8) == 4
    assert kernels["io.own_file"].bytes_moved(4) == 8 and kernels["pingpong.send"].bytes_moved(2) == 1
    assert {k.name for k in kernels.values() if k.windowed} == {"stream.uni", "stream.bi", "multipair.stream",
                                                               "rma.put", "rma.get", "allpairs.shifted",
                                                               "allpairs.isolated", "fan.in", "fan.out", "bisection"}
    assert {k.name for k in kernels.values() if k.pair_times} == {"allpairs.shifted", "allpairs.isolated", "fan.in",
                                                                  "fan.out", "bisection"}
    assert kernels["allpairs.shifted"].bytes_moved(6) == 6 and kernels["allpairs.isolated"].bytes_moved(6) == 1


def test_the_tool_checks_options_as_the_harness_does_and_sizes_buffers_as_it_allocates():
    need = launch_needs(["coll.alltoall", "--sizes", "1048576"], 4)
    assert need["slots"] == 4 and need["buffer_bytes"] == 4 * 2**20
    assert need["memory_per_rank"] == 2 * (4 * 2**20 + 4096)
    with pytest.raises(ValueError, match="--window 0: must be from 1 to 1024"):
        launch_needs(["stream.uni", "--window", "0"], 2)
    with pytest.raises(ValueError, match="too few ranks"):
        launch_needs(["coll.bcast"], 1)
    listing = subprocess.run([str(tool()), "--list"], capture_output=True, text=True, check=True).stdout
    assert len(listing.splitlines()) == len(catalogue()) and listing.startswith("pingpong.send ")


def test_a_campaign_naming_no_kernel_of_the_catalogue_is_refused(tmp_path):
    message = campaign_error(tmp_path, """
        campaign: typo
        libraries: {a: {mpi: mpich-5.0.2}}
        placements: [{name: 1N2P, nodes: 1, ppn: 2}]
        kernels: {pingpong.sned: {}}
    """)
    assert "'pingpong.sned' is not a kernel (did you mean 'pingpong.send'?)" in message


EXTRA_FAMILY = """
    /* A kernel added for the catalogue test: a ping-pong, as pingpong.send. */
    #include "patterns.h"

    double extra_pingpong(struct cl_context *ctx, size_t size, long iterations)
    {
        if (ctx->rank > 1) return 2;
        return cl_pingpong(ctx, size, iterations, 1 - ctx->rank, ctx->rank == 0, CL_SEND, CL_RECV);
    }
"""
EXTRA_ENTRY = """
KERNEL(extra_pingpong, no_setup, no_teardown, .name = "extra.pingpong", .family = "extra", .min_ranks = 2,
       .metric = "half round trip of the extra kernel, timed at rank 0", .bytes_moved = {3, CL_ONCE})
"""


@pytest.mark.mpi
@pytest.mark.slow
def test_a_kernel_added_only_in_c_runs_through_a_campaign_the_report_and_export(workspace, built, tmp_path):
    kernels = tmp_path / "kernels"
    shutil.copytree(REPO / "kernels", kernels)
    (kernels / "extra.c").write_text(textwrap.dedent(EXTRA_FAMILY))
    with open(kernels / "catalogue.def", "a") as catalogue_file:
        catalogue_file.write(EXTRA_ENTRY)
    # Its own build folder (other sources), with the session's environments: no second install.
    build = tmp_path / "build"
    shutil.copytree(workspace / "build" / "envs" / LIBRARIES[0], build / "envs" / LIBRARIES[0], symlinks=True)
    campaign = tmp_path / "extra.yaml"
    campaign.write_text(textwrap.dedent(f"""
        campaign: extra
        libraries: {{{LIBRARIES[0]}: {{mpi: {LIBRARIES[0]}}}}}
        placements: [{{name: 1N2P, nodes: 1, ppn: 2}}]
        kernels:
          extra.pingpong: {{sizes: {{list: [8, 1024, 65536]}}}}
          pingpong.send: {{sizes: {{list: [8, 1024, 65536]}}}}
        launches: 1
        precision: {{rse: 0.1, min_samples: 3, max_samples: 20, max_point_time: 0.5}}
    """))
    snakemake(tmp_path, "--configfile", str(campaign), "--config", f"kernels_dir={kernels}",
              f"build_dir={build}")
    ds = open_campaign(tmp_path / "results" / "extra" / "extra.nc")
    assert (ds["status"].sel(kernel="extra.pingpong") == "ok").all()
    assert (str(ds["metric"].sel(kernel="extra.pingpong").values)
            == "half round trip of the extra kernel, timed at rank 0")
    assert float(ds["bytes_factor"].sel(kernel="extra.pingpong")) == 3
    summary = ds.commlens.summary(ci=False)
    ratio = summary["bandwidth"].sel(kernel="extra.pingpong") * summary["median"].sel(kernel="extra.pingpong")
    assert float((ratio / ds["size"]).isel(size=-1).squeeze()) == pytest.approx(3)
    report = (tmp_path / "results" / "extra" / "report.html").read_text()
    assert "extra.pingpong" in report
    table = tmp_path / "extra.csv"
    subprocess.run([sys.executable, "-m", "commlens.cli", "export", str(tmp_path / "results" / "extra" / "extra.nc"),
                    "--output", str(table)], check=True, capture_output=True)
    rows = pd.read_csv(table)
    assert set(rows[rows["kernel"] == "extra.pingpong"]["size"]) == {8, 1024, 65536}
    # The build records it as its own catalogue does; the repository's catalogue does not have it.
    described = json.loads((build / "kernels" / LIBRARIES[0] / "build.json").read_text())["kernels"]
    assert any(k["kernel"] == "extra.pingpong" and k["available"] for k in described)
    assert "extra.pingpong" not in catalogue()
