localrules: build_kernels  # on a cluster: on the submitting host, right after its environment (workflow/profiles/slurm)

rule build_kernels:
    """commbench-kernels and libcommbench-kernels.so (for mpi4py engines) compiled with this
    library's mpicc, warnings as errors."""
    input:
        library=BUILD / "envs" / "{mpi}" / "library.json",
        sources=KERNEL_SOURCES,
    output:
        binary=BUILD / "kernels" / "{mpi}" / "commbench-kernels",
        shared_library=BUILD / "kernels" / "{mpi}" / "libcommbench-kernels.so",
        record=BUILD / "kernels" / "{mpi}" / "build.json",
    log:
        BUILD / "kernels" / "{mpi}" / "build.log",
    script:
        "../scripts/build_kernels.py"
