rule run_launch:
    """One launch of one kernel. It claims the whole machine: launches never overlap each
    other (machine=1, limited to 1 in the profile) nor builds (all cores as threads)."""
    input:
        binary=lambda w: kernel_binary(CAMPAIGN.mpi_of(w.library)),
        library=lambda w: library_record(CAMPAIGN.mpi_of(w.library)),
    output:
        raw=RESULTS / "raw" / "{library}" / "{placement}" / "{kernel}" / "launch{launch}.jsonl",
    params:
        settings=launch_settings,
    log:
        RESULTS / "logs" / "{library}" / "{placement}" / "{kernel}" / "launch{launch}.log",
    threads: workflow.cores
    resources:
        machine=1,
    script:
        "../scripts/run_launch.py"
