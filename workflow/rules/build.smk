rule build_kernels:
    """commbench-kernels compiled with this library's mpicc, warnings as errors."""
    input:
        library=BUILD / "envs" / "{mpi}" / "library.json",
        sources=KERNEL_SOURCES,
    output:
        binary=BUILD / "kernels" / "{mpi}" / "commbench-kernels",
        record=BUILD / "kernels" / "{mpi}" / "build.json",
    log:
        BUILD / "kernels" / "{mpi}" / "build.log",
    script:
        "../scripts/build_kernels.py"
