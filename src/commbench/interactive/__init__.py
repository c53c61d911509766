"""Interactive exploration: kernels on ipyparallel MPI engines, results in the campaign schema.

    from commbench.interactive import start_engines, run

    with start_engines(library="mpich-5.0.2", placement="1N2P") as cluster:
        ds = run(cluster, "pingpong.send", sizes={"schedule": "powers", "max": "64Ki"})

The engines are Python processes started by the library's own mpiexec (or inside a
Slurm job), in the library's venv, whose mpi4py loads that library's libmpi (see
commbench.launch.libraries.engine_python). A kernel runs through libcommbench-kernels.so: the
same harness as the commbench-kernels binary, called with mpi4py's communicator, and
writing the same JSON Lines records. Those records become a raw launch file, which
commbench.io.raw reads and commbench.data.collect turns into a dataset, exactly as a campaign's.
commbench.data.merge.append_to_campaign adds such a dataset to a campaign's as one more library row.
"""

import commbench.analysis  # noqa: F401  (registers ds.commbench on the datasets runs return)
from commbench.data.merge import append_to_campaign
from commbench.interactive.engines import Engines, parse_placement, start_engines
from commbench.interactive.runs import run

__all__ = ["Engines", "append_to_campaign", "parse_placement", "run", "start_engines"]
