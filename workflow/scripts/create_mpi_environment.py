# Snakemake script: make one MPI installation usable (see commlens.launch.libraries); a failure is recorded.
from pathlib import Path

from commlens.launch.libraries import record_environment

record_environment(snakemake.input.spec, Path(snakemake.output.record).parent, snakemake.log[0])
