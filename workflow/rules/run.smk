rule run_launch:
    """One launch of one kernel. It claims the whole machine: launches never overlap each
    other (machine=1, limited to 1 in the profile) nor builds (all cores as threads). A launch
    its library cannot run (failed environment or build, unsupported kernel or placement) is
    recorded as such without starting anything."""
    input:
        build=lambda w: build_record(CAMPAIGN.mpi_of(w.library)),
        library=lambda w: library_record(CAMPAIGN.mpi_of(w.library)),
        # Its turn in the campaign's rounds (commlens.campaign.rounds): the launch before it in the
        # design has ended, however it ended (a failed launch is recorded, so it counts as done). Round
        # r+1 thus starts after round r, each round in its drawn order, locally and under Slurm alike.
        # A launch redone (its settings changed, --forcerun) redoes the launches after it, so that the
        # recorded order stays the order they ran in; a resumed campaign redoes none that finished.
        previous=previous_launch,
    output:
        raw=RESULTS / "raw" / "{library}" / "{placement}" / "{kernel}" / "launch{launch}.jsonl",
    params:
        settings=launch_settings,
        attempt=launch_attempt,
    log:
        RESULTS / "logs" / "{library}" / "{placement}" / "{kernel}" / "launch{launch}.log",
    threads: workflow.cores
    resources:
        machine=1,
        # Under Slurm (workflow/profiles/slurm) a launch is one MPI job shaped like its placement,
        # one CPU per rank; its script runs in the allocation and commlens's mpiexec starts the
        # ranks there. The executor plugin takes tasks_per_node only above 1 and no one-task MPI
        # job, so ppn 1 asks for `nodes` tasks on `nodes` nodes (one each) and a one-rank
        # placement for two tasks. Locally these constrain nothing (0 reads as unset).
        nodes=lambda w: CAMPAIGN.placement(w.placement)["nodes"],
        tasks_per_node=lambda w: CAMPAIGN.placement(w.placement)["ppn"] if CAMPAIGN.placement(w.placement)["ppn"] > 1 else 0,
        tasks=lambda w: 0 if CAMPAIGN.placement(w.placement)["ppn"] > 1 else max(CAMPAIGN.placement(w.placement)["nodes"], 2),
        cpus_per_task=1,
        mpi="mpiexec",
        # Minutes: the launch's own timeout records a timed-out launch before Slurm's limit ends it.
        runtime=lambda w: -(-CAMPAIGN.config["timeout"] // 60) + 5,
    script:
        "../scripts/run_launch.py"

