"""The report's Methods section states what the dataset recorded, and only that: a real campaign's
timer resolution, launches, stopping target, placements, binding and libraries; a dataset measured
another way says so; a dataset that lacks a record says "not recorded" instead of guessing."""

import json
from pathlib import Path

import pytest

from commbench.data import synthetic as syn
from commbench.campaign import Campaign, validate_campaign
from commbench.data.collect import build_dataset, read_all
from commbench.io.netcdf import write_dataset
from commbench import open_campaign
from commbench.launch.placement import Placement
from commbench.report.methods import NOT_RECORDED, methods, methods_html, methods_markdown

from conftest import launch

HEADINGS = ["Kernels and what one sample is", "Timer", "Stopping rule", "Launches and order",
            "Placements, binding and emulation", "Buffers and cache", "Intervals and verdicts",
            "Machine and software"]
SHARED = "stream.uni shared (one buffer per window, as osu_bw)"
DISTINCT = "stream.uni distinct (a buffer per message of the window)"


def nanoseconds(seconds: float) -> str:
    assert 1e-9 <= seconds < 1e-6, seconds      # the timers here tick in nanoseconds
    return f"{seconds / 1e-9:.3g} ns"


# ----------------------------------------------------------------------------- without MPI

def synthetic(kernels=("stream.uni", "pingpong.send"), launches=1):
    truth, grid = syn.GroundTruth(1e-6, 1e10), [1024, 2**20]
    return syn.campaign_dataset({("lib", "1N2P", kernel): syn.generate(grid, truth, n_samples=5, n_launches=launches)
                                 for kernel in kernels})


def test_a_dataset_without_provenance_says_not_recorded_instead_of_guessing():
    sections = methods(synthetic())
    assert [s.heading for s in sections] == HEADINGS
    text = methods_markdown(synthetic())
    for missing in ("Its resolution (the smallest nonzero step it showed, measured by every launch before "
                    "sampling): not recorded.", "Stopping rule and its target: not recorded.",
                    "Order of sizes within a launch: not recorded.", "Hosts: not recorded. CPU: not recorded. "
                    "OS: not recorded.", "stream.uni not recorded (older dataset)", "pingpong.send: not recorded.",
                    "1N2P: shape not recorded; transport: not recorded"):
        assert missing in text, missing
    # What the samples themselves hold is still stated.
    assert "2 sizes, 1 KiB to 1 MiB" in text and "Samples per point: 5" in text
    page = methods_html(synthetic())
    assert page.startswith("<h2 id='methods'>Methods</h2>") and page.count("<h3>") == len(HEADINGS)


def test_the_section_follows_the_recorded_configuration():
    ds = synthetic(("stream.uni", "stream.uni@distinct", "pingpong.send"), launches=3)
    ds = ds.assign_coords(window_buffers=("kernel", ["", "shared", "distinct"]))
    config = {"launches": 3, "shuffle": True, "timeout": 60,
              "precision": {"rse": 0.02, "min_samples": 7, "max_samples": 300, "max_point_time": 2},
              "kernels": {k: {"window": 16, "cache": "rotate" if "@" in k else "reuse", "timer": "mpi_wtime"}
                          for k in ("stream.uni", "stream.uni@distinct", "pingpong.send")}}
    ds.attrs["campaign_config"] = json.dumps(config)
    text = methods_markdown(ds)
    assert "shared (one buffer per window, as osu_bw)" in text and "stream.uni@distinct distinct" in text
    assert "at most 0.02 (2.0%) with at least 7 samples, or until 300 samples, or 2 s" in text
    assert "every library, placement and kernel: 3; the dataset holds 3 per cell" in text
    assert "rotate (NetPIPE's no-cache mode" in text and "for stream.uni@distinct" in text
    assert "bootstrap interval of the mean over launches" in text and "Time limit per launch: 60 s" in text

    config.update(launches=1, shuffle=False, precision={**config["precision"], "rse": 0.1})
    one = ds.isel(launch=[0])
    one.attrs["campaign_config"] = json.dumps(config)
    text = methods_markdown(one)
    assert "at most 0.1 (10.0%)" in text and "kernel: 1; the dataset holds 1 per cell" in text
    assert "measured in schedule order" in text and "normal interval of the mean over the samples" in text


# ----------------------------------------------------------------------------- on real campaigns

@pytest.fixture(scope="module")
def tiny(workspace, tiny_campaign) -> Path:
    return workspace / "results" / "tiny"


@pytest.mark.mpi
def test_a_real_campaign_states_what_it_recorded(tiny):
    ds = open_campaign(tiny / "tiny.nc")
    text = methods_markdown(ds)
    # The tiny campaign (tests/conftest.py): 2 launches, rse 0.05, 5 to 200 samples, 1 s per point.
    assert f"before sampling): {nanoseconds(float(ds.attrs['timer_resolution_s']))}" in text
    assert "every library, placement and kernel: 2; the dataset holds 2 per cell. 8 of 8 launches gave data" in text
    assert "at most 0.05 (5.0%) with at least 5 samples, or until 200 samples, or 1 s spent" in text
    measured = ds["sample_count"] > 0
    assert f"{int(ds['settled'].where(measured, False).sum())} of {int(measured.sum())} measured points" in text
    assert "Timer: MPI_Wtime for every kernel" in text and "Sizes were measured in a random order" in text
    assert "pingpong.send: half round trip of MPI_Send/MPI_Recv" in text and "5 sizes, 1 B to 1 MiB" in text
    assert "1N2P: 1 node(s) x 2 ranks per node; transport: shared memory" in text
    assert "2N1P: 2 node(s) x 1 ranks per node; transport: TCP over loopback; more than one node emulated" in text
    binding = {" | ".join(str(v).split()) for v in ds["cpu_binding"].sel(placement="1N2P").values.ravel()}
    assert len(binding) == 1 and f"as the launches recorded): {binding.pop()}." in text
    assert "OMPI_MCA_btl=self,tcp" in text and "MPIR_CVAR_NOLOCAL=1" in text
    assert "mpich-5.0.2: MPICH Version: 5.0.2; family mpich; launcher hydra" in text
    assert "openmpi-5.0.11: Open MPI v5.0.11" in text
    for key in ("hosts", "cpu_model", "os", "compiler_flags", "git_commit"):
        assert f"{ds.attrs[key]}" in text, key
    assert "Welch's t test on the logarithms" in text and "This dataset holds 2 launches per cell" in text


@pytest.mark.mpi
def test_the_report_notebook_shows_the_section(tiny):
    cells = json.loads((tiny / "report.ipynb").read_text())["cells"]
    shown = ["".join(output.get("data", {}).get("text/markdown", "")) for cell in cells
             if cell["cell_type"] == "code" for output in cell["outputs"]]
    ds = open_campaign(tiny / "tiny.nc")
    methods_cell = [text for text in shown if text.startswith("## Methods")]
    assert len(methods_cell) == 1 and nanoseconds(float(ds.attrs["timer_resolution_s"])) in methods_cell[0]


@pytest.mark.mpi
def test_the_campaigns_report_has_the_section_before_its_figures(tiny):
    page = (tiny / "report.html").read_text()
    ds = open_campaign(tiny / "tiny.nc")
    start, figures = page.index("<h2 id='methods'>Methods</h2>"), page.index("<h2>Figures</h2>")
    assert start < figures
    assert f"before sampling): {nanoseconds(float(ds.attrs['timer_resolution_s']))}" in page[start:figures]


@pytest.mark.mpi
def test_a_dataset_that_lost_its_records_says_not_recorded(tiny):
    ds = open_campaign(tiny / "tiny.nc")
    older = ds.drop_vars(["cpu_binding", "timer_resolution_s", "harness_overhead_s", "position", "metric",
                          "launcher"])
    older.attrs = {key: value for key, value in ds.attrs.items()
                   if key not in ("campaign_config", "timer_resolution_s", "cpu_model")}
    text = methods_markdown(older)
    assert "before sampling): not recorded." in text and "Stopping rule and its target: not recorded." in text
    assert "as the launches recorded): not recorded." in text and "pingpong.send: not recorded." in text
    assert "CPU: not recorded." in text and "launcher not recorded" in text
    assert f"OS: {ds.attrs['os']}." in text       # what it kept is still stated


def stream_dataset(workspace, tmp_path, campaign_name: str, spec: dict, shuffle: bool):
    """A one-launch campaign of stream.uni on 1N2P with MPICH, measured for real and collected."""
    config = validate_campaign({
        "campaign": campaign_name, "libraries": {"mpich-5.0.2": {"mpi": "mpich-5.0.2"}},
        "placements": [{"name": "1N2P", "nodes": 1, "ppn": 2}], "launches": 1, "shuffle": shuffle,
        "precision": {"rse": 0.2, "min_samples": 3, "max_samples": 20, "max_point_time": 0.5},
        "kernels": {"stream.uni": {"sizes": {"list": [1024, 4096, 16384, 65536]}, "window": 8, **spec}}})
    campaign = Campaign(name=campaign_name, source=f"{campaign_name}.yaml", config=config)
    (tmp_path / campaign_name).mkdir()
    result = launch(workspace, "mpich-5.0.2", Placement("1N2P", 1, 2), campaign.kernel_args("stream.uni", 0),
                    tmp_path / campaign_name, timeout_s=120)
    assert result.status == "ok", result.launch.get("console_tail")
    records = {name: {"mpich-5.0.2": json.loads((workspace / "build" / kind / "mpich-5.0.2" / name).read_text())}
               for kind, name in (("envs", "library.json"), ("kernels", "build.json"))}
    results, refused = read_all([result.path])
    ds = build_dataset(campaign, results, records["library.json"], records["build.json"], refused)
    write_dataset(ds, tmp_path / campaign_name / f"{campaign_name}.nc")
    return open_campaign(tmp_path / campaign_name / f"{campaign_name}.nc")


@pytest.mark.mpi
def test_a_campaign_measured_another_way_says_so(workspace, built, tmp_path):
    shared = stream_dataset(workspace, tmp_path, "shared", {}, shuffle=True)
    distinct = stream_dataset(workspace, tmp_path, "distinct", {"window_buffers": "distinct", "cache": "rotate"},
                              shuffle=False)
    shared_text, distinct_text = methods_markdown(shared), methods_markdown(distinct)
    assert SHARED in shared_text and DISTINCT not in shared_text
    assert DISTINCT in distinct_text and SHARED not in distinct_text
    assert "Cache mode: reuse" in shared_text and "Cache mode: rotate" in distinct_text
    assert "Sizes were measured in a random order" in shared_text
    assert ("measured in schedule order; the recorded order (`position`) is not ascending size in 0 of 1"
            in distinct_text)
    for ds, text in ((shared, shared_text), (distinct, distinct_text)):
        assert f"before sampling): {nanoseconds(float(ds.attrs['timer_resolution_s']))}" in text
        assert "kernel: 1; the dataset holds 1 per cell" in text and "at most 0.2 (20.0%) with at least 3" in text
        assert "window (messages in flight per iteration): 8 messages for every kernel" in text
        assert "normal interval of the mean over the samples" in text and "What changed" not in text
        iterations = ds["iters_per_sample"].values[ds["sample_count"].values > 0]
        assert f"Iterations per sample here: {iterations.min()}" in text
