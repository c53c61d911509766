localrules: mpi_environment  # on a cluster: on the submitting host, where pip has the network (workflow/profiles/slurm)

rule mpi_environment:
    """One environment per MPI installation spec (envs/mpi/<mpi>.yaml), never made by hand."""
    input:
        spec="envs/mpi/{mpi}.yaml",
    output:
        record=BUILD / "envs" / "{mpi}" / "library.json",
    log:
        BUILD / "envs" / "{mpi}" / "create.log",
    script:
        "../scripts/create_mpi_environment.py"
