# Snakemake script: compile commlens-kernels against one MPI library; a failure is recorded.
import json
from pathlib import Path

from commlens.launch.build import build_kernels

library = json.loads(Path(snakemake.input.library).read_text())
build_kernels(library, Path(snakemake.output.record).parent, snakemake.log[0],
              kernels_dir=Path(snakemake.params.kernels_dir), strict=snakemake.params.strict)
