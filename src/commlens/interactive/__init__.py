"""Interactive exploration: kernels on ipyparallel MPI engines, results in the campaign schema.

    from commlens.interactive import start_engines, run

    with start_engines(library="mpich-5.0.2", placement="1N2P") as cluster:
        ds = run(cluster, "pingpong.send", sizes={"schedule": "powers", "max": "64Ki"})

The engines are Python processes started by the library's own mpiexec (or inside a
Slurm job), in the library's venv, whose mpi4py loads that library's libmpi (see
commlens.launch.libraries.engine_python). A kernel runs through libcommlens-kernels.so: the
same harness as the commlens-kernels binary, called with mpi4py's communicator, and
writing the same JSON Lines records. Those records become a raw launch file, which
commlens.io.raw reads and commlens.data.collect turns into a dataset, exactly as a campaign's.
commlens.data.merge.append_to_campaign adds such a dataset to a campaign's as one more library row.
"""

import commlens.analysis  # noqa: F401  (registers ds.commlens on the datasets runs return)
from commlens.data.merge import append_to_campaign
from commlens.interactive.engines import Engines, parse_placement, start_engines
from commlens.interactive.runs import run

__all__ = ["Engines", "append_to_campaign", "parse_placement", "run", "start_engines"]
