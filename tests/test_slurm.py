"""workflow/profiles/slurm end to end: a tiny campaign through a real Slurm controller and node on
this host, whose dataset must have the shape of the same campaign run without Slurm."""

import os
import re
import subprocess
import textwrap

import numpy as np
import pytest

from commbench.dataset import open_campaign

from conftest import REPO, snakemake, workflow_command

pytestmark = [pytest.mark.slurm, pytest.mark.mpi]

PROFILE = REPO / "workflow" / "profiles" / "slurm"
LIBRARIES = ("mpich-5.0.2", "openmpi-5.0.11")
PROFILE_MEM_MB = 8000   # what the profile asks for a launch


def campaign(name: str) -> str:
    return textwrap.dedent(f"""
        campaign: {name}
        libraries:
          mpich-5.0.2:    {{mpi: mpich-5.0.2}}
          openmpi-5.0.11: {{mpi: openmpi-5.0.11}}
        placements:
          - {{name: 1N2P, nodes: 1, ppn: 2}}
        kernels:
          pingpong.send: {{sizes: {{list: [8, 1Ki, 64Ki]}}}}
        launches: 1
        precision: {{rse: 0.05, min_samples: 5, max_samples: 200, max_point_time: 1}}
        timeout: 120
    """)


def node_memory_mb(cluster) -> int:
    out = subprocess.run(["scontrol", "show", "node", cluster.node], env=cluster.env,
                         capture_output=True, text=True, check=True).stdout
    return int(re.search(r"RealMemory=(\d+)", out).group(1))


def schema(ds) -> dict:
    """Everything about a dataset's layout, none of its measurements."""
    return {
        "dims": dict(ds.sizes) | {"sample": None},   # samples per point vary from run to run
        "coords": {name: (ds[name].dims, ds[name].dtype.kind) for name in ds.coords},
        "data_vars": {name: (ds[name].dims, ds[name].dtype.kind) for name in ds.data_vars},
        "labels": {dim: list(ds[dim].values) for dim in ("library", "placement", "kernel", "size", "launch")},
    }


def test_campaign_through_slurm_has_the_local_schema(workspace, built, local_slurm):
    files = {}
    for name in ("onslurm", "onhost"):
        files[name] = workspace / "config" / "campaigns" / f"{name}.yaml"
        files[name].write_text(campaign(name))

    snakemake(workspace, "results/onhost/onhost.nc", "--configfile", str(files["onhost"]))

    args = [*workflow_command(workspace, "--profile", str(PROFILE), "results/onslurm/onslurm.nc"),
            "--configfile", str(files["onslurm"]),
            "--default-resources", f"slurm_partition={local_slurm.partition}",
            # Seconds, not the profile's tens of seconds, between status checks of short jobs.
            "--slurm-init-seconds-before-status-checks", "2", "--seconds-between-status-checks", "2",
            "--slurm-keep-successful-logs"]
    if node_memory_mb(local_slurm) < PROFILE_MEM_MB:
        # A smaller test machine: the same request with the memory it has (the flag replaces the
        # profile's whole set-resources, so --exclusive is given again).
        args += ["--set-resources", f"run_launch:mem_mb={node_memory_mb(local_slurm) // 2}",
                 "run_launch:slurm_extra='--exclusive'"]
    run = subprocess.run(args, cwd=workspace, capture_output=True, text=True,
                         env={**local_slurm.env, "PYTHONUNBUFFERED": "1"}, timeout=600)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-8000:]

    # Through Slurm: the launches and the collection were jobs of this run, and they completed.
    run_id = re.search(r"SLURM run ID: (\S+)", output).group(1)
    submitted = dict(re.findall(r"Job (\d+) has been submitted with SLURM jobid (\d+)", output))
    assert len(submitted) == 3, output[-4000:]   # two launches and collect; builds are local rules
    jobs = {job["JobId"]: job for job in local_slurm.finished_jobs() if job.get("Name") == run_id}
    assert sorted(jobs) == sorted(submitted.values()), (jobs, submitted)
    assert all(job["JobState"] == "COMPLETED" and job["Partition"] == local_slurm.partition
               for job in jobs.values()), jobs
    launch_logs = sorted((workspace / ".snakemake" / "slurm_logs" / "rule_run_launch").rglob("*.log"))
    assert len(launch_logs) == 2, launch_logs
    launch_jobs = [jobs[log.stem] for log in launch_logs]
    # Shaped like the placement: one node, two ranks, one CPU each.
    assert all(job["NodeCnt"] == "1" and job["ProcCnt"] == "2" for job in launch_jobs), launch_jobs
    # Environments and builds stayed on this host.
    assert not (workspace / ".snakemake" / "slurm_logs" / "rule_mpi_environment").exists()
    assert not (workspace / ".snakemake" / "slurm_logs" / "rule_build_kernels").exists()

    on_slurm = open_campaign(workspace / "results" / "onslurm" / "onslurm.nc")
    on_host = open_campaign(workspace / "results" / "onhost" / "onhost.nc")
    assert schema(on_slurm) == schema(on_host)
    assert (on_host["status"] == "ok").all()
    mpich = on_slurm.sel(library="mpich-5.0.2")
    assert (mpich["status"] == "ok").all()
    assert mpich["sample_count"].min() >= 5
    assert (on_slurm["time"].values > 0).all() and np.isfinite(on_slurm["time"].values).all()
    # The launch ran on the allocated node, not merely somewhere.
    assert all(local_slurm.node in str(hosts) for hosts in mpich["hosts"].values.ravel())
    assert os.environ.get("SLURM_CONF") == str(local_slurm.conf)

    # Open MPI's mpiexec (PRRTE) takes its slots from SLURM_NODELIST and SLURM_TASKS_PER_NODE,
    # which the executor's job step drops: the launcher restores them from the allocation.
    openmpi = on_slurm.sel(library="openmpi-5.0.11")
    assert (openmpi["status"] == "ok").all(), openmpi["status"].values
    assert all(local_slurm.node in str(hosts) for hosts in openmpi["hosts"].values.ravel())
    assert not on_slurm["emulated"].any() and list(on_slurm["transport"].values) == ["shm"]
