"""`python -m commlens.cli`: what the workflow's report rule runs, in the Python that runs Snakemake."""

import sys

from commlens.cli import main

sys.exit(main())
