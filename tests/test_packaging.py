"""commlens as a package on its own: the wheel `pip install .` builds from a clean clone, installed
into a fresh virtual environment outside the checkout, runs the commands a user types from a folder
that is no checkout, on a dataset collected by the real workflow.

What this proves: the wheel carries every module, the notebooks, the kernels' sources and the
schema, and the installed package finds them without the checkout (nothing resolves to the
repository); the dependencies pyproject.toml declares cover everything the code and the notebooks
import, and pip finds them all satisfied by the exact lock (envs/analysis.txt) without an index.
What it does not: that the newest releases on PyPI of those dependencies work together. The fresh
environment reaches the analysis environment's packages through a path file rather than
downloading its own, so the versions are the lock's. Building the wheel fetches setuptools from
the package index into pip's isolated build environment, as `pip install .` does.
"""

import ast
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from commlens import __version__
from commlens import open_campaign
from conftest import REPO

PACKAGE = REPO / "src" / "commlens"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _run(command: list, cwd: Path, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(map(str, command))} failed ({proc.returncode}):\n" \
                                 f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from what a clean clone holds (the files git tracks, and new ones it does not
    ignore), copied out of the checkout first so the build leaves nothing in it; pip builds it in an
    isolated environment with the build requirements pyproject.toml names."""
    root = tmp_path_factory.mktemp("packaging")
    source, dist = root / "source", root / "dist"
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        if (REPO / name).is_file():                       # a tracked file deleted in the work tree is not there
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", dist, source], cwd=root,
         env=os.environ.copy())
    (built,) = dist.glob("commlens-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> dict:
    """A fresh venv with the wheel and its [report] extra installed by pip without an index: every
    dependency must be found, satisfied, among the analysis environment's packages (made visible
    through a path file). Returns the environment to run its commands with."""
    venv = tmp_path_factory.mktemp("venv") / "env"
    _run([sys.executable, "-m", "venv", venv], cwd=venv.parent, env=os.environ.copy())
    python = venv / "bin" / "python"
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # The analysis environment's site-packages, appended to the fresh one's path; the editable
    # install of commlens there is a path file inside it, which Python does not read from here.
    Path(purelib, "analysis-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "PYTHONPATH",
                                                                         "COMMLENS_RESULTS")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    _run([python, "-m", "pip", "install", "--no-index", "--quiet", f"commlens[report] @ {wheel.as_uri()}"],
         cwd=venv.parent, env=env)
    return {"env": env, "python": python, "venv": venv}


@pytest.fixture(scope="module")
def elsewhere(workspace, tiny_campaign, tmp_path_factory) -> Path:
    """A working folder outside the checkout with a campaign file and the tiny campaign's dataset
    (collected by the workflow) at results/tiny/tiny.nc."""
    folder = tmp_path_factory.mktemp("elsewhere")
    (folder / "results" / "tiny").mkdir(parents=True)
    shutil.copy2(workspace / "results" / "tiny" / "tiny.nc", folder / "results" / "tiny" / "tiny.nc")
    shutil.copy2(tiny_campaign[0], folder / "tiny.yaml")
    return folder


def test_the_wheel_carries_every_module_and_the_files_the_package_reads(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {f"commlens/{path.relative_to(PACKAGE).as_posix()}" for path in PACKAGE.rglob("*.py")}
    assert modules - names == set()
    shared = {f"commlens/share/{path.relative_to(REPO).as_posix()}" for pattern in (
        "notebooks/*.ipynb", "kernels/**/*.c", "kernels/**/*.h", "kernels/Makefile",
        "workflow/schemas/*.yaml", "envs/analysis.txt", "envs/mpi/*.yaml") for path in REPO.glob(pattern)}
    assert shared and shared - names == set()
    assert {"commlens/py.typed", f"commlens-{__version__}.dist-info/licenses/LICENSE"} <= names


def _imported_modules(source: str) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules.add(node.module.split(".")[0])
    return modules


def test_declared_dependencies_cover_every_import_of_the_code_and_notebooks(wheel):
    """Every third-party module that src/commlens and the notebooks import comes from a
    distribution the wheel requires (in its core or an extra)."""
    modules = set()
    for path in PACKAGE.rglob("*.py"):
        modules |= _imported_modules(path.read_text())
    for notebook in (REPO / "notebooks").glob("*.ipynb"):
        for cell in json.loads(notebook.read_text())["cells"]:
            if cell["cell_type"] == "code":     # IPython magics (%%px, !cmd) are not Python
                lines = "".join(cell["source"]).splitlines()
                python = (line for line in lines if not line.lstrip().startswith(("%", "!")))
                modules |= _imported_modules("\n".join(python))
    third_party = modules - set(sys.stdlib_module_names) - {"commlens"}
    distributions = importlib.metadata.packages_distributions()
    unknown = sorted(module for module in third_party if module not in distributions)
    assert not unknown, f"imported but installed by no distribution here: {unknown}"
    needed = {_canonical(dist) for module in third_party for dist in distributions[module]}
    metadata = zipfile.ZipFile(wheel).read(f"commlens-{__version__}.dist-info/METADATA").decode()
    declared = {_canonical(re.match(r"[A-Za-z0-9._-]+", line.split(":", 1)[1].strip()).group())
                for line in metadata.splitlines() if line.startswith("Requires-Dist:")}
    assert needed - declared == set(), "imported but not declared in pyproject.toml"


def test_the_installed_package_uses_its_own_files_not_the_checkout(installed):
    probe = ("import json, commlens, commlens.locations as loc, commlens.launch.provenance as prov;"
             "print(json.dumps({'file': commlens.__file__, 'checkout': str(loc.CHECKOUT), 'root': str(loc.ROOT),"
             "'kernels_hash': prov.source_hash(), 'commit': prov.git_commit()}))")
    seen = json.loads(_run([installed["python"], "-c", probe], cwd=installed["venv"].parent,
                           env=installed["env"]).stdout)
    assert Path(seen["file"]).is_relative_to(installed["venv"]) and seen["checkout"] == "None"
    assert Path(seen["root"]).is_relative_to(installed["venv"])
    from commlens.launch.provenance import source_hash

    assert seen["kernels_hash"] == source_hash()       # every kernel source came along, byte for byte
    assert seen["commit"] == "unknown"


@pytest.mark.mpi
def test_installed_commands_run_outside_the_checkout(installed, elsewhere):
    run = lambda *args: _run(["commlens", *args], cwd=elsewhere, env=installed["env"]).stdout  # noqa: E731
    assert "tiny.yaml: ok, campaign 'tiny'" in run("validate", "tiny.yaml")
    summary = run("summary", "results/tiny/tiny.nc")
    for row in ("mpich-5.0.2", "openmpi-5.0.11", "1N2P", "2N1P", "pingpong.send"):
        assert row in summary, summary
    assert "no size range changed" in run("compare", "results/tiny/tiny.nc", "results/tiny/tiny.nc")

    run("export", "results/tiny/tiny.nc", "--format", "csv")
    table = (elsewhere / "results" / "tiny" / "tiny.csv").read_text().splitlines()
    with open_campaign(elsewhere / "results" / "tiny" / "tiny.nc") as ds:
        measured = int((ds["sample_count"] > 0).sum())
    assert table[0].startswith("library,placement,kernel,size,launch") and len(table) == 1 + measured

    run("report", "results/tiny/tiny.nc")
    report = elsewhere / "results" / "tiny" / "report.html"
    assert report.stat().st_size > 100_000 and "pingpong.send" in report.read_text()
    manifest = json.loads((elsewhere / "results" / "tiny" / "figures" / "manifest.json").read_text())
    assert manifest["figures"], manifest
