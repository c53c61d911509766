"""The package's architecture, held by the test suite: layers that import only downwards (import-linter
contracts in pyproject.toml), one place for MPI family knowledge (commlens.launch.families) and for
the kernels (kernels/catalogue.def), and modules that live in their layer."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

PACKAGE = REPO / "src" / "commlens"
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "share" not in p.relative_to(PACKAGE).parts)


def test_import_contracts_hold():
    """Nothing imports a layer above its own or, however far round, itself; launches never import xarray or
    pandas; analysis draws nothing."""
    lint = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run([str(lint), "--config", str(REPO / "pyproject.toml")], cwd=REPO, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


@pytest.mark.parametrize("tool", ["ruff check", "mypy"])
def test_the_code_passes_its_linters(tool):
    """`ruff check` (every Python file of the repository) and `mypy` (src/commlens), as pyproject.toml
    configures them, find nothing: the versions envs/analysis.txt pins, from the environment running the tests."""
    program, *args = tool.split()
    done = subprocess.run([str(Path(sys.executable).parent / program), *args], cwd=REPO, capture_output=True,
                          text=True)
    assert done.returncode == 0, f"{tool}:\n" + done.stdout[-8000:] + done.stderr[-2000:]


def test_every_module_lives_in_its_layer():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert set(top) <= {"__init__.py", "cli.py", "units.py", "locations.py", "lean_imports.py"}, top


def _string_constants(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node


def test_mpi_families_and_launchers_are_named_only_in_their_registry():
    """No `== "openmpi"`, `"hydra" if ...` or {"mpich": ...} outside commlens/launch/families: a new
    family is a class there, not a hunt through the code."""
    names = {"mpich", "openmpi", "hydra", "orte", "prrte"}
    found = []
    for path in MODULES:
        if "families" in path.relative_to(PACKAGE).parts:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            compared = []
            if isinstance(node, ast.Compare):
                compared = [node.left, *node.comparators]
            elif isinstance(node, ast.Dict):
                compared = [key for key in node.keys if key is not None]
            elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                compared = node.elts
            for value in compared:
                if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value.lower() in names:
                    found.append(f"{path.relative_to(REPO)}:{value.lineno}: {value.value!r}")
    assert not found, "family or launcher names outside commlens.launch.families:\n" + "\n".join(found)


def test_no_module_keeps_its_own_list_of_kernels():
    """Kernel names come from the catalogue (kernels/catalogue.def through commlens.launch.catalogue);
    a tuple, list or set of two or more kernel names in the package would be a copy that drifts."""
    catalogue = (REPO / "kernels" / "catalogue.def").read_text()
    kernels = set(__import__("re").findall(r'\.name = "([^"]+)"', catalogue))
    assert len(kernels) > 40
    found = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                named = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in kernels]
                if len(set(named)) >= 2:
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}: {named}")
    assert not found, "hand-kept kernel lists:\n" + "\n".join(found)


@pytest.mark.parametrize("layer", ["campaign", "io", "launch", "data", "analysis", "report", "orchestrate",
                                   "interactive"])
def test_each_layer_says_what_it_is_for(layer):
    doc = ast.get_docstring(ast.parse((PACKAGE / layer / "__init__.py").read_text()))
    assert doc and len(doc.split()) >= 8, f"commlens.{layer} has no docstring saying its job"


def test_no_module_imports_another_modules_private_name():
    """A name with a leading underscore is its module's own: a module that needs another's makes it public
    there (or the two are one module)."""
    borrowed = []
    for path in sorted((REPO / "src" / "commlens").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("commlens"):
                borrowed += [f"{path.relative_to(REPO)}: {node.module}.{alias.name}" for alias in node.names
                             if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert not borrowed, "\n".join(borrowed)
