"""Sphinx configuration of commlens's documentation (`make docs`: build/docs/html).

The pages are MyST Markdown. The reference pages' lists (the command line, kernels, options, campaign
keys, the dataset's variables) are made while the site builds, by the directives of
_ext/commlens_reference.py, from the code and the C catalogue themselves: nothing there is copied.
"""

import importlib
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
# The checkout's package, whether or not it is installed (the autodoc pages document this tree).
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(DOCS / "_ext"))

__version__ = importlib.import_module("commlens").__version__   # the checkout's, found through the path above

project = "commlens"
author = "The commlens developers"
copyright = "2026, the commlens authors"   # as LICENSE states it
release = __version__
version = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",      # the docstrings' numpydoc sections (Parameters, Returns)
    "commlens_reference",
]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext"]

# Every heading an anchor, so that pages link to sections by `#their-heading` and a link to a heading that
# is gone is a warning, which -W makes an error.
myst_heading_anchors = 4
myst_enable_extensions = ["deflist"]

napoleon_google_docstring = False   # "Returns:" lines in prose are not Google sections here
napoleon_numpy_docstring = True
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
# Docstrings write code as `name`: shown as code, as in the pages.
default_role = "code"

html_theme = "alabaster"
html_title = f"commlens {release}"
html_theme_options = {"description": "MPI communication benchmarks into xarray", "fixed_sidebar": True}
html_static_path = []
