# Snakemake script: make one MPI installation usable (see commbench.libraries).
from pathlib import Path

from commbench.libraries import create_environment

with open(snakemake.log[0], "w") as log:
    create_environment(snakemake.input.spec, Path(snakemake.output.record).parent, log=log)
