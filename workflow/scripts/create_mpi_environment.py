# Snakemake script: make one MPI installation usable (see commbench.launch.libraries); a failure is recorded.
from pathlib import Path

from commbench.launch.libraries import record_environment

record_environment(snakemake.input.spec, Path(snakemake.output.record).parent, snakemake.log[0])
