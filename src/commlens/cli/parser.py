"""The command line: every verb, its arguments and the function that runs it (`args.verb(args)`).
The verbs' modules are imported when the verb runs, so that `commlens --version` and `commlens
validate` start without xarray."""

from __future__ import annotations

import argparse
import importlib
import re

from commlens import __version__

# A bisection step is a campaign whose `launches:` is --launches: 1 to 1000, as the campaign schema
# (workflow/schemas/campaign.schema.yaml) allows.
STEP_LAUNCHES = (1, 1000)
# The launches a side an undecided bisection step grows to before it is left undecided: the maximum of a
# campaign's launches until decided (3 to 8 rounds).
STEP_MAX_LAUNCHES = 8
MIN_EFFECT_MEANING = "the smallest relative change, 0.05 for 5%"
CONFIDENCE_MEANING = "the intervals' level, 0.95 for 95%"


class _VerbParser(argparse.ArgumentParser):
    """A verb's parser: an argument it refuses is reported as every commlens error is (commlens.cli), in
    one line, `commlens VERB: --option VALUE: problem`, exit 2, before the verb does anything."""

    def error(self, message):
        # argparse says "argument --confidence: 7: must be ..." (the checks below begin with the value)
        problem = re.sub(r"^argument (\S+): ", r"\1 ", message)
        self.exit(2, f"{self.prog}: {problem}\n")


def fraction(meaning: str):
    """An argument type: a number strictly between 0 and 1 (not nan, not inf); `meaning` says in the
    refusal what the number is."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not 0 < value < 1:       # nan compares false
            raise argparse.ArgumentTypeError(f"{text}: must be a number between 0 and 1 (exclusive): {meaning}")
        return value
    return parse


def whole_number(low: int, high: int):
    """An argument type: a whole number from `low` to `high`."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text}: must be a whole number from {low} to {high}")
        return value
    return parse


def _verb(module: str, function: str):
    """Runs commlens.cli.<module>.<function>(args), importing the module only then."""
    def run(args):
        return getattr(importlib.import_module(f"commlens.cli.{module}"), function)(args)
    return run


def build_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="commlens", description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"commlens {__version__}")
    verbs = parser.add_subparsers(dest="command", required=True, metavar="VERB", parser_class=_VerbParser)

    run = verbs.add_parser("run", help="run a campaign: its workflow, its progress, then its summary "
                                       "(what `make campaign` does)")
    run.add_argument("campaign", help="the campaign file (config/campaigns/<name>.yaml)")
    run.add_argument("snakemake_args", nargs=argparse.REMAINDER, metavar="SNAKEMAKE_ARG",
                     help="passed on to Snakemake (--config launches=5, --cores 2, --dry-run, ...)")
    run.set_defaults(verb=_verb("run", "run_campaign"))

    validate = verbs.add_parser("validate", help="check a campaign file")
    validate.add_argument("campaign")
    validate.set_defaults(verb=_verb("catalogue", "validate"))

    kernels = verbs.add_parser("kernels", help="the kernels, one line each: name and what one sample's time means")
    kernels.add_argument("--json", action="store_true", help="every kernel's description, as a JSON list")
    kernels.set_defaults(verb=_verb("catalogue", "kernels"))

    summary = verbs.add_parser("summary", help="latency and bandwidth table of a campaign's dataset")
    summary.add_argument("target", help="campaign file or dataset (.nc)")
    summary.add_argument("--check", action="store_true",
                         help="exit 1 if any library row or launch gave no data")
    summary.add_argument("--per-size", action="store_true",
                         help="then every size of every curve: samples, launches, the time's mean, P50 (the "
                              "median), P90 and P99 (us), MB/s; a tail only where each launch took samples enough "
                              "to have one, else how many it took")
    summary.set_defaults(verb=_verb("summary", "summary_command"))

    report = verbs.add_parser("report", help="regenerate report.html and figures/ from a dataset "
                                             "(runs notebooks/04-report.ipynb with papermill)")
    report.add_argument("target", help="campaign file or dataset (.nc)")
    report.add_argument("--output-dir", help="where report.html and figures/ go (default: the dataset's folder)")
    report.add_argument("--baseline", metavar="OTHER", help="another campaign's dataset (.nc) or campaign file: "
                        "the report also compares this campaign against it (commlens compare's method)")
    report.set_defaults(verb=_verb("report", "report"))

    compare = verbs.add_parser(
        "compare", help="candidate against baseline, cell by cell: what changed, where, by how much, is it real")
    compare.add_argument("baseline", help="dataset (.nc) or campaign file of the baseline (with --rows: the one "
                                          "dataset whose two rows are compared)")
    compare.add_argument("candidate", nargs="?", help="dataset (.nc) or campaign file of the candidate")
    compare.add_argument("--rows", nargs=2, metavar=("BASELINE_ROW", "CANDIDATE_ROW"),
                         help="compare two rows (library, placement or kernel) of one dataset, paired by round "
                              "as the report does")
    compare.add_argument("--map", action="append", default=[], metavar="OLD=NEW",
                         help="the baseline's library row OLD is the candidate's NEW (repeatable)")
    compare.add_argument("--min-effect", type=fraction(MIN_EFFECT_MEANING), default=0.05,
                         help="smallest relative change reported (default 0.05)")
    compare.add_argument("--confidence", type=fraction(CONFIDENCE_MEANING), default=0.95,
                         help="interval level; the false discovery rate is 1 - confidence (default 0.95)")
    compare.add_argument("--fail-on", choices=("regressed", "improved", "changed"),
                         help="exit 1 when any cell has this verdict (gate an update in CI); changed: any call, "
                              "slower or faster under the margin too")
    compare.add_argument("--output", help="write the table of changed size ranges (.csv or .json)")
    compare.set_defaults(verb=_verb("compare", "compare"))

    bisect = verbs.add_parser(
        "bisect", help="the first release of one MPI family between BASELINE and CANDIDATE that shows a change: "
                       "each step a small campaign of one release against the baseline, halving the range")
    bisect.add_argument("baseline", help="installation spec of the release without the change (envs/mpi/<name>.yaml, "
                                         "e.g. mpich-4.3.2)")
    bisect.add_argument("candidate", help="installation spec of the release with it (e.g. mpich-5.0.2)")
    bisect.add_argument("--kernel", help="the kernel to watch (e.g. pingpong.send)")
    bisect.add_argument("--placement", action="append", default=[], metavar="NAME",
                        help="a placement to watch, named <nodes>N<ppn>P (e.g. 1N2P; repeatable)")
    bisect.add_argument("--sizes", help="message sizes to watch, comma-separated (e.g. 8,1Ki)")
    bisect.add_argument("--cells", metavar="TABLE", help="watch the changed ranges of a table commlens compare "
                                                         "--output wrote (.csv or .json) instead")
    bisect.add_argument("--launches", type=whole_number(*STEP_LAUNCHES), default=3,
                        help=f"launches a side per step, {STEP_LAUNCHES[0]} to {STEP_LAUNCHES[1]} (default 3)")
    bisect.add_argument("--max-launches", type=whole_number(*STEP_LAUNCHES), default=STEP_MAX_LAUNCHES,
                        help="launches a side an undecided step may grow to, measured again with twice as many "
                             f"each time (default {STEP_MAX_LAUNCHES})")
    bisect.add_argument("--min-effect", type=fraction(MIN_EFFECT_MEANING), default=0.05,
                        help="smallest relative change compare reports, between 0 and 1 (default 0.05)")
    bisect.add_argument("--confidence", type=fraction(CONFIDENCE_MEANING), default=0.95,
                        help="interval level, between 0 and 1 (default 0.95)")
    bisect.add_argument("--directory", default=".", help="the workflow's working directory: the steps' results/, "
                                                         "the shared build/ and bisect/ (default: here)")
    bisect.add_argument("--json", action="store_true",
                        help="print the steps and the answer as JSON (progress then goes to standard error)")
    bisect.add_argument("--snakemake", default="", metavar="ARGS",
                        help="arguments passed on to Snakemake for every step, in one word "
                             "(e.g. --snakemake '--cores 2 --config build_dir=/scratch/build')")
    bisect.set_defaults(verb=_verb("bisect", "bisect"))

    history = verbs.add_parser(
        "history", help="what changed from one rerun of a campaign to the next (results/<campaign>/history/)")
    history.add_argument("target", help="results/<campaign>, its dataset (.nc) or the campaign file")
    history.add_argument("--min-effect", type=fraction(MIN_EFFECT_MEANING), default=0.05,
                         help="smallest relative change reported (default 0.05)")
    history.add_argument("--output", help="write the table of changed size ranges (.csv or .json)")
    history.set_defaults(verb=_verb("compare", "history"))

    export = verbs.add_parser("export", help="a dataset as a tidy table, one row per point and launch (and per "
                                             "launch that gave none), or as OSU-style files, one per curve")
    export.add_argument("target", help="campaign file or dataset (.nc)")
    export.add_argument("--format", choices=("csv", "parquet", "json", "osu"),
                        help="default: the output's suffix, else csv. parquet keeps each column's units and "
                             "description and the dataset's provenance in the file, csv in <file>.json beside "
                             "it; osu writes a folder with a file per curve as OSU 7.4 prints it")
    export.add_argument("--output", help="the table's path, or - for standard output (default: the dataset's "
                                         "path, with the format's suffix; .pairs.csv and so on with --pairs); "
                                         "with --format osu, the folder (default: <dataset>-osu)")
    export.add_argument("--pairs", action="store_true",
                        help="a row per pair of ranks timed by the kernels that time pairs (allpairs.*, fan.*, "
                             "bisection), with each rank's node, instead of a row per point")
    export.set_defaults(verb=_verb("datasets", "export"))

    for suite, what in (("osu", "OSU Micro-Benchmarks outputs (one benchmark run per file)"),
                        ("imb", "IMB-MPI1 outputs (their point-to-point and collective tables)"),
                        ("netpipe", "NetPIPE 5 NPmpi runs (each run's -o file and its console output)")):
        importer = verbs.add_parser(f"import-{suite}", help=f"{what} as a dataset in the campaign schema: one "
                                                            "library row, marked imported")
        importer.add_argument("files", nargs="+", metavar="FILE",
                              help="files of one kernel and one kind of run are its launches; every file is "
                                   "tried, and any refused are listed with their reasons")
        importer.add_argument("--library", required=True, help="the library row's name (e.g. mpich-5.0.2)")
        importer.add_argument("--placement", required=True, help="the placement's name (e.g. 1N2P); it must have "
                                                                 "the ranks the files say they ran on")
        importer.add_argument("--nodes", type=int, help="default: what the placement's name says (<nodes>N<ppn>P)")
        importer.add_argument("--ppn", type=int, help="default: what the placement's name says")
        if suite != "imb":
            importer.add_argument("--kernel", help="the row's kernel: the benchmark's (osu_latency: pingpong.send, "
                                                   "...), optionally with @LABEL")
        if suite == "osu":
            importer.add_argument("--osu-sizes", metavar="MIN:MAX", help="the -m the runs were given (default: "
                                  "each benchmark's own range); a file that stops short of it is truncated")
        importer.add_argument("--skip-bad", action="store_true",
                              help="write the files that can be imported and list the others; without it, one "
                                   "refused file means nothing is written (all refusals are listed either way)")
        importer.add_argument("--partial", action="store_true",
                              help="import truncated files too (cut short of what they say they were to run), "
                                   "marked partial; without it they are refused")
        importer.add_argument("-o", "--output", required=True, help="the dataset to write (.nc)")
        importer.set_defaults(verb=_verb("datasets", "import_files"))
    return parser
