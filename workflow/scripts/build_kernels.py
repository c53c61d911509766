# Snakemake script: compile commbench-kernels against one MPI library.
import json
from pathlib import Path

from commbench.build import build_kernels

library = json.loads(Path(snakemake.input.library).read_text())
with open(snakemake.log[0], "w") as log:
    build_kernels(library, Path(snakemake.output.binary).parent, log=log)
