rule mpi_environment:
    """One environment per MPI installation spec (envs/mpi/<mpi>.yaml), never made by hand. Never
    fails the workflow: library.json says `status: env_failed` and why when it cannot be made."""
    localrule: True  # on a cluster: on the submitting host, where pip has the network (workflow/profiles/slurm)
    input:
        spec=lambda w: mpi_spec(w.mpi),
    params:
        # Changes after each failure, so the next run tries again (a failure never stops the campaign).
        retry=lambda w: retry_token(library_record(w.mpi)),
    output:
        record=BUILD / "envs" / "{mpi}" / "library.json",
    log:
        BUILD / "envs" / "{mpi}" / "create.log",
    script:
        "../scripts/create_mpi_environment.py"
