"""What helper processes print on the way, kept in a log file instead of the user's terminal.

A report runs its notebook in a Jupyter kernel, a process of its own whose standard error is this
process's: its transport, debugger and frozen-modules warnings would reach the user at every
report. They are kept, not dropped: the log says what the kernel said when something goes wrong.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def stderr_to(path):
    """Within the block, standard error (file descriptor 2, which processes started meanwhile
    inherit, and Python's sys.stderr over it) is written to `path`, anew; restored afterwards."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    terminal = os.dup(2)
    try:
        with open(path, "w") as log:
            os.dup2(log.fileno(), 2)
            try:
                yield path
            finally:
                sys.stderr.flush()
                os.dup2(terminal, 2)
    finally:
        os.close(terminal)
