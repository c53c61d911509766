rule build_kernels:
    """commlens-kernels and libcommlens-kernels.so (for mpi4py engines) compiled with this
    library's mpicc. Never fails the workflow: build.json says ok, build_failed or env_failed,
    and which kernels (if any) this library could not build; only it is a declared output,
    since a failed build leaves no binary. `--config strict_build=true|NAME,...` (the tests,
    against the newest libraries) makes warnings errors."""
    localrule: True  # on a cluster: on the submitting host, right after its environment (workflow/profiles/slurm)
    input:
        library=BUILD / "envs" / "{mpi}" / "library.json",
        sources=KERNEL_SOURCES,
    output:
        record=BUILD / "kernels" / "{mpi}" / "build.json",
    params:
        strict=lambda w: w.mpi in STRICT_BUILD,
        kernels_dir=str(KERNELS),
        retry=lambda w: retry_token(build_record(w.mpi)),
    log:
        BUILD / "kernels" / "{mpi}" / "build.log",
    script:
        "../scripts/build_kernels.py"
