"""Running benchmarks: MPI libraries and their families, kernel builds, placements, launches and their
supervision, virtual nodes and emulated links, progress. Never imports xarray or pandas: every launch
starts a Python that imports this layer."""
