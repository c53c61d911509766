"""Interactive engines: ipyparallel MPI engines on both libraries running the kernels' shared
library, datasets in the campaign schema, the same latency as the binary, and a clean stop."""

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from commlens.interactive import append_to_campaign, run, start_engines
from commlens.launch.families.mpich import Hydra
from commlens.launch.supervision import leftover_files
from commlens.launch.placement import Placement

from conftest import LIBRARIES, launch

pytestmark = pytest.mark.mpi

QUICK = dict(sizes=[8, 4096], min_samples=3, max_samples=20, max_point_time=0.5, min_sample_time=2e-5,
             warmup=2)


def _gone(pids, within_s=10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                os.kill(pid, 0)
                stat = open(f"/proc/{pid}/stat").read()
                if stat.rsplit(")", 1)[1].split()[0] != "Z":
                    alive.append(pid)
            except (ProcessLookupError, FileNotFoundError):
                pass
        if not alive:
            return True
        time.sleep(0.2)
    return False


# MPICH's alone: what its Hydra leaves in /tmp is looked for host-wide, where a neighbour's launch would be.
@pytest.mark.parametrize("library", [pytest.param(LIBRARIES[0], marks=pytest.mark.alone), LIBRARIES[1]])
def test_engines_give_a_dataset_in_the_campaign_schema(workspace, built, tmp_path, library):
    from commlens.campaign import Campaign, validate_campaign
    from commlens.data.collect import build_dataset

    topology_files = leftover_files(Hydra.leftovers)    # what Hydra's proxies leave in /tmp when killed
    with start_engines(library, "1N2P", workspace, activate=False) as engines:
        assert [i["rank"] for i in engines.info] == [0, 1]
        assert all(i["size"] == 2 for i in engines.info)
        points = []
        ds = run(engines, "pingpong.send", on_point=points.append, progress=False, **QUICK)
        pids = engines.pids
        # The MPI runtime's session files go to a directory of the engines' own (not the host's /tmp,
        # where a killed daemon's files failed a later one given its pid), removed when they stop.
        engines.view.execute("import os as _os\n_commlens_tmp = _os.environ.get('TMPDIR')")
        session = engines.session_directory
        assert session and Path(session).name.startswith("commlens-tmp-")
        assert engines.view.pull("_commlens_tmp") == [session, session]
    assert _gone(pids), "engine processes outlived stop()"
    assert not Path(session).exists()
    if library.startswith("mpich"):
        assert leftover_files(Hydra.leftovers) <= topology_files, "stopped engines left their topology files"

    # The same variables, coordinates and dims as a campaign's dataset built from the binary.
    result = launch(workspace, library, Placement("1N2P", 1, 2),
                    ["pingpong.send", "--sizes", "8,4096", "--min-samples", "3", "--max-samples", "20"], tmp_path)
    config = validate_campaign({"campaign": "c", "libraries": {library: {"mpi": library}},
                                "placements": [{"name": "1N2P", "nodes": 1, "ppn": 2}],
                                "kernels": {"pingpong.send": {"sizes": {"list": [8, 4096]}}}, "launches": 1})
    reference = build_dataset(Campaign("c", "<test>", config), [result], {}, {})
    assert set(ds.data_vars) == set(reference.data_vars)
    assert set(ds.coords) == set(reference.coords)
    assert ({name: ds[name].dims for name in ds.variables}
            == {name: reference[name].dims for name in reference.variables})
    assert ds["status"].item() == "ok"
    assert ds["library_version"].item() == result.run["library_version"].strip() != "unknown"
    assert ds["size"].values.tolist() == [8, 4096]
    assert [p.size for p in points] == [8, 4096]         # the live callback saw every point
    counts = ds["sample_count"].sel(library=library, placement="1N2P", kernel="pingpong.send", launch=0)
    assert (counts >= 3).all() and int(counts.sum()) == ds.sizes["sample"]
    assert float(ds["time"].max()) < 0.05 and float(ds["time"].min()) > 1e-9
    assert ds["family"].item() == ("mpich" if library.startswith("mpich") else "openmpi")

    combined = append_to_campaign(reference, ds)
    assert combined["library"].values.tolist() == [library, f"{library} (interactive)"]
    assert combined["status"].dtype == reference["status"].dtype and combined["settled"].dtype == bool
    for size in (8, 4096):   # the interactive row's samples, each in its place in the combined ragged array
        where = dict(placement="1N2P", kernel="pingpong.send", launch=0, size=size)
        np.testing.assert_array_equal(
            combined.commlens.samples(library=f"{library} (interactive)", **where).values,
            ds.commlens.samples(library=library, **where).values)
        np.testing.assert_array_equal(combined.commlens.samples(library=library, **where).values,
                                      reference.commlens.samples(library=library, **where).values)


@pytest.mark.alone
def test_shared_library_gives_the_binary_latency(workspace, built, tmp_path):
    """Small-message ping-pong through the engines and through mpiexec of the binary: alternated
    rounds, judged by the median ratio (the engines' Python idles while the kernel runs)."""
    library = LIBRARIES[0]
    sizes = [8, 64, 512]
    precision = ["--min-samples", "20", "--max-samples", "300", "--max-point-time", "0.5", "--rse", "0.02"]
    ratios = []
    with start_engines(library, "1N2P", workspace, activate=False) as engines:
        for _ in range(3):
            ds = run(engines, "pingpong.send", sizes=sizes, min_samples=20, max_samples=300,
                     max_point_time=0.5, rse=0.02, progress=False)
            shared = ds["median"].isel(library=0, placement=0, kernel=0, launch=0).values
            binary = launch(workspace, library, Placement("1N2P", 1, 2),
                            ["pingpong.send", "--sizes", ",".join(map(str, sizes)), *precision], tmp_path)
            assert binary.status == "ok"
            ratios.extend(shared / np.array([np.median(p.samples) for p in binary.points]))
    ratio = float(np.median(ratios))
    print(f"shared library / binary latency, median ratio over sizes {sizes} x 3 rounds: {ratio:.3f}")
    assert 0.5 < ratio < 2.0, ratios


def test_failed_kernel_is_a_failed_launch_and_engines_survive(workspace, built):
    with start_engines(LIBRARIES[1], "1N2P", workspace, activate=False) as engines:
        # rma.put with lock synchronisation has no integrity mode: the harness refuses it at set-up.
        ds = run(engines, "rma.put", sizes=[8], sync="lock", integrity=True, progress=False)
        assert ds["status"].item() == "failed" and ds.sizes["sample"] == 0 and (ds["sample_count"] == 0).all()
        ds = run(engines, "pingpong.send", progress=False, **QUICK)   # MPI still usable after the error
        assert ds["status"].item() == "ok"
        pids = engines.pids
    assert _gone(pids)


# Another process (a campaign's launch, as commlens.launch.run takes it) holding the machine for 3 s.
HOLD_S = 3.0
HOLDER = f"""
import time
from commlens.launch import locks
with locks.held(locks.machine_lock_path(), "a campaign's launch (test)"):
    print("held", flush=True)
    time.sleep({HOLD_S})
"""


def test_a_launch_on_engines_waits_while_another_holds_the_machine(workspace, built):
    """A notebook and a campaign on one host never measure at once: run() waits for the machine's lock
    and its launch record says how long."""
    from commlens.io.raw import read_launch_record

    with start_engines(LIBRARIES[0], "1N2P", workspace, activate=False) as engines:
        holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "held"
            ds = run(engines, "pingpong.send", progress=False, **QUICK)
        finally:
            holder.wait(timeout=60)
        raw = sorted((engines.results_dir / "raw" / LIBRARIES[0] / "1N2P" / "pingpong.send").glob("*.jsonl"))
    assert ds["status"].item() == "ok"
    # The holder's time, less what run() does before it asks for the lock (a campaign's validation: milliseconds).
    assert read_launch_record(raw[-1])["waited_for_machine_s"] >= HOLD_S - 1.5


def test_emulated_nodes_take_the_network_path(workspace, built):
    with start_engines(LIBRARIES[0], "2N1P", workspace, activate=False) as engines:
        assert engines.launch_env["MPIR_CVAR_NOLOCAL"] == "1"
        ds = run(engines, "pingpong.send", progress=False, **QUICK)
    assert ds["status"].item() == "ok"
    assert ds["transport"].item() == "tcp" and bool(ds["emulated"].item())


@pytest.mark.slurm
def test_engines_through_slurm(request, workspace, built):
    try:
        request.getfixturevalue("local_slurm")
    except pytest.FixtureLookupError:
        pytest.skip("no local_slurm fixture (a local Slurm controller and node) in this checkout")
    with start_engines(LIBRARIES[0], "1N2P", workspace, engines="slurm", activate=False, timeout=180) as engines:
        assert engines.engines == "slurm"
        ds = run(engines, "pingpong.send", progress=False, **QUICK)
        pids = engines.pids
    assert ds["status"].item() == "ok"
    assert _gone(pids, within_s=30)


def test_the_workspace_is_found_from_notebooks_as_datasets_are(tmp_path, monkeypatch):
    """JupyterLab starts a notebook's kernel in notebooks/: workspace "." is then the checkout above."""
    from commlens.interactive.engines import find_workspace

    checkout = tmp_path / "checkout"
    (checkout / "workflow").mkdir(parents=True)
    (checkout / "workflow" / "Snakefile").touch()
    record = checkout / "build" / "envs" / "mpich-5.0.2" / "library.json"
    record.parent.mkdir(parents=True)
    record.write_text("{}")
    (checkout / "notebooks").mkdir()
    monkeypatch.chdir(checkout / "notebooks")
    monkeypatch.delenv("COMMLENS_RESULTS", raising=False)
    assert find_workspace(".", "mpich-5.0.2") == checkout.resolve()
    assert find_workspace(str(checkout), "mpich-5.0.2") == checkout.resolve()
    with pytest.raises(FileNotFoundError, match=r"^build/envs/no-such-mpi/library.json: no environment of "
                                                r"no-such-mpi \(tried build/envs/no-such-mpi/library.json, "
                                                + str(checkout.resolve())):
        find_workspace(".", "no-such-mpi")
