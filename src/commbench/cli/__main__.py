"""`python -m commbench.cli`: what the workflow's report rule runs, in the Python that runs Snakemake."""

import sys

from commbench.cli import main

sys.exit(main())
