"""The commlens command: `commlens VERB ...`, one module per verb or family of verbs.

    run CAMPAIGN            the campaign's workflow (Snakemake), its progress, then its summary
    validate CAMPAIGN       check a campaign file
    kernels                 the kernels, one line each, with what one sample's time means
    summary TARGET          latency and bandwidth table of a campaign's dataset
    report TARGET           regenerate report.html and figures/ from a dataset
    compare BASE CAND       what changed between two datasets, where, by how much, is it real
    bisect BASE CAND        the first release of one MPI family between the two that shows a change
    history TARGET          what changed from one rerun of a campaign to the next
    export TARGET           a dataset as a tidy table
    import-osu|-imb|-netpipe  other suites' outputs as a dataset

A TARGET is a dataset (.nc) or a campaign file (its results/<campaign>/<campaign>.nc). An error is
printed as `commlens VERB: <file>: <problem>`, without a traceback, and exits 2; `summary --check`,
`compare --fail-on` and `run` exit 1 when they find what they were asked to look for.
"""

from __future__ import annotations

import os
import sys
import time

from commlens.campaign import CampaignError
from commlens.cli.parser import build_parser


def main(argv=None) -> int:
    # The help lists the verbs itself; it keeps the docstring's last paragraph.
    args = build_parser(__doc__.strip().split("\n\n")[-1]).parse_args(argv)
    args.started = time.monotonic()      # what a verb that times itself counts from: its imports too
    try:
        return args.verb(args)
    except KeyboardInterrupt:
        # Ctrl-C between workflow runs (a bisection's steps, say): each run already ended its own jobs.
        print(f"commlens {args.command}: stopped; what finished is kept, and running it again resumes",
              file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `commlens kernels | head`: the reader has all it wanted; nothing more may go to the pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (CampaignError, OSError, ValueError) as error:
        print(f"commlens {args.command}: {error}", file=sys.stderr)
        return 2
