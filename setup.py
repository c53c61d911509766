"""The package's layout, the one part of the build that pyproject.toml cannot say by itself.

The notebooks, the kernels' C sources, the campaign schema, the MPI library specs and the analysis lock are read by the
package at run time (`commlens report` runs notebooks/04-report.ipynb, campaign files are checked
against the schema, kernels are built from kernels/, interactive engines are pinned by the lock).
Their one copy in git stays at the top of the repository, where users, the workflow and the tests
find them; the wheel maps each folder into commlens/share/ at the same relative path
(commlens/share/notebooks/04-report.ipynb, ...), so that an installed package finds them under
commlens.locations.ROOT as a checkout finds its own. Mapping rather than moving them under src/
keeps one copy, no links and the repository's layout; share/ rather than the package's own folder
keeps a kernel started there (the report notebook's) from importing commlens's modules as
top-level ones. Packages under src/ are found, not listed, so a new one needs no edit here.
"""

from setuptools import find_namespace_packages, setup

# A folder of the repository -> the files of it the wheel carries under commlens/share/.
SHARED = {
    "notebooks": ["*.ipynb"],
    "kernels": ["Makefile", "*.c", "*.h", "*.def"],
    "kernels/harness": ["*.c", "*.h"],
    "kernels/emulation": ["*.c"],
    "workflow/schemas": ["*.yaml"],
    "envs": ["analysis.txt"],
    "envs/mpi": ["*.yaml"],
}


def shared_package(folder: str) -> str:
    return "commlens.share." + folder.replace("/", ".")


setup(
    packages=find_namespace_packages("src", include=["commlens", "commlens.*"], exclude=["*.__pycache__"])
    + [shared_package(folder) for folder in SHARED],
    package_dir={"": "src", **{shared_package(folder): folder for folder in SHARED}},
    package_data={"commlens": ["py.typed"], **{shared_package(folder): files for folder, files in SHARED.items()}},
)
