"""Third-party packages imported without an optional part that costs seconds and that commlens never uses.

jsonschema checks the string formats "iri" and "iri-reference" with rfc3987-syntax where that package is
installed (jupyter-events asks for it, for JupyterLab's event logs), and rfc3987-syntax builds an Earley
parser of RFC 3987's grammar when it is imported: 2.4 s of one core on the machines the tests run on, 6 s
under a profiler. Every process that imports jsonschema pays it: each run of the workflow (Snakemake
reads each script rule's language with nbformat, which imports jsonschema), each report (papermill
reads the notebook with nbformat) and the first validation of a campaign file. None of them checks an
IRI: commlens's campaign schema has no formats, and nbformat's notebook schema none of those two.
"""

from __future__ import annotations

import sys
from types import ModuleType

IRI_GRAMMAR = "rfc3987_syntax"


def import_jsonschema() -> ModuleType:
    """jsonschema, imported with rfc3987-syntax hidden from it: its FormatChecker then lacks the two IRI
    formats in this process, as where rfc3987-syntax is not installed (jsonschema's own fallback), and
    nothing else changes. rfc3987_syntax itself stays importable afterwards. Where jsonschema is already
    imported, it is returned as it is."""
    if "jsonschema" in sys.modules:
        return sys.modules["jsonschema"]
    hidden = IRI_GRAMMAR not in sys.modules
    if hidden:
        # `import rfc3987_syntax` raises ImportError, which jsonschema expects: None in sys.modules is how
        # Python blocks an import, which typeshed's dict[str, ModuleType] leaves out.
        sys.modules[IRI_GRAMMAR] = None     # type: ignore[assignment]
    try:
        import jsonschema
    finally:
        if hidden:
            del sys.modules[IRI_GRAMMAR]
    return jsonschema
