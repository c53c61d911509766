"""`commbench validate CAMPAIGN`, `commbench summary CAMPAIGN|DATASET`, `commbench report CAMPAIGN|DATASET`,
`commbench compare BASELINE CANDIDATE`, `commbench history RESULTS|CAMPAIGN|DATASET`, `commbench export DATASET`,
`commbench import-osu|import-imb FILE...`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from commbench.campaign import CampaignError, load_campaign


def _dataset_path(target: str) -> Path:
    path = Path(target)
    if path.suffix in {".yaml", ".yml"}:
        name = load_campaign(path).name
        return Path("results") / name / f"{name}.nc"
    return path


def summary(target: str, check: bool = False) -> int:
    """The latency and bandwidth table, then what gave no data and why. With `check`, returns 1
    when anything did (what `make campaign` exits with, after the dataset and report are written).

    Per curve: at its smallest size the time's mean, P50 (the median), P90 and P99 (as OSU's -z),
    at its largest the bandwidth, all as ds.commbench.summary() gives them (and so as the report)."""
    import numpy as np

    from commbench import open_campaign
    from commbench.units import format_size

    path = _dataset_path(target)
    ds = open_campaign(path)
    times = ("mean", "p50", "p90", "p99")
    stats = ds.commbench.summary(ci=False)[["median", *times, "bandwidth"]]
    print(f"dataset: {path}")
    status = ds["status"].values.ravel().tolist()
    asked = [s for s in status if s != "skipped"]
    print(f"launches: {asked.count('ok')} ok of {len(asked)}")
    print(f"{'':<67}{'time (us) at the smallest size':^40}{'bandwidth at the largest':>24}")
    print(f"{'library':<20}{'placement':<10}{'kernel':<28}{'size':>9}{'mean':>10}{'P50':>10}{'P90':>10}{'P99':>10}"
          f"{'size':>12}{'MB/s':>12}")
    for lib in ds.library.values:
        for pl in ds.placement.values:
            for k in ds.kernel.values:
                if (ds["status"].sel(library=lib, placement=pl, kernel=k) == "skipped").all():
                    continue
                curve = stats.sel(library=lib, placement=pl, kernel=k)
                curve = curve.isel(size=np.flatnonzero(np.isfinite(curve["median"].values)))
                if curve.sizes["size"] == 0:
                    print(f"{lib:<20}{pl:<10}{k:<28}{'no data':>9}")
                    continue
                small, large = curve.isel(size=0), curve.isel(size=-1)
                latency = "".join(f"{float(small[name]) * 1e6:>10.3f}" for name in times)
                bandwidth = f"{float(large['bandwidth']) / 1e6:>12.1f}" if int(large["size"]) else f"{'-':>12}"
                print(f"{lib:<20}{pl:<10}{k:<28}{format_size(small['size']):>9}{latency}"
                      f"{format_size(large['size']):>12}{bandwidth}")
    return _missing(ds, path) if check else 0


def _missing(ds, path: Path) -> int:
    """Prints which library rows and launches gave no data and why; 1 if any did."""
    failed_rows = [(str(lib), str(st), str(why)) for lib, st, why in zip(
        ds.library.values, ds["library_status"].values, ds["library_reason"].values) if st != "ok"]
    runs = ds.commbench.failed_runs()
    runs = runs[~runs.index.get_level_values("library").isin([lib for lib, _, _ in failed_rows])]
    if not failed_rows and runs.empty:
        return 0
    for lib, status, why in failed_rows:
        print(f"library {lib}: {status}, no data: {why}")
    for (lib, pl, k, launch), row in runs.head(10).iterrows():
        print(f"launch {lib}/{pl}/{k}/{launch}: {row['status']}: {row['reason'][:200]}")
    if len(runs) > 10:
        print(f"... and {len(runs) - 10} more launches")
    report = path.parent / "report.html"
    print(f"{len(failed_rows)} library row(s) and {len(runs)} launch(es) gave no data (details: "
          f"{path.parent / 'failures.jsonl'}); the dataset and report hold what did work: {path}"
          + (f", {report}" if report.exists() else ""))
    return 1


def compare(baseline: str, candidate: str, mapping: list[str], min_effect: float, confidence: float,
            fail_on: str | None, output: str | None) -> int:
    """Prints the changed size ranges of candidate against baseline (two datasets, or two campaign
    files), writes them to `output` (.csv or .json), and returns 1 when `fail_on` finds any."""
    from commbench.analysis.compare import across, changed_ranges, describe_range, provenance_differences, verdict_counts
    from commbench import open_campaign
    from commbench.io.tables import table_format, write_table

    pairs = {}
    for item in mapping:
        old, sep, new = item.partition("=")
        if not sep or not old or not new:
            raise ValueError(f"--map {item!r}: expected OLD=NEW (a baseline library row = a candidate one)")
        pairs[old] = new
    paths = [_dataset_path(target) for target in (baseline, candidate)]
    base, cand = (open_campaign(path) for path in paths)
    for line in provenance_differences(base, cand):
        print(f"commbench compare: warning: measured differently: {line}", file=sys.stderr)
    for role, ds in (("baseline", base), ("candidate", cand)):
        if "imported" in ds.coords and ds["imported"].values.any():
            print(f"commbench compare: note: the {role} holds rows measured by another suite, by its method "
                  f"({ds.attrs.get('source', 'imported')})", file=sys.stderr)
    result = across(base, cand, pairs, min_effect=min_effect, confidence=confidence)
    counts = verdict_counts(result)
    print(f"baseline:  {paths[0]}\ncandidate: {paths[1]}\nlibrary rows matched: {result.attrs['library_map']}")
    print("cells: " + ", ".join(f"{n} {verdict}" for verdict, n in counts.items() if n))
    print(f"method: {result.attrs['method']}; {result.attrs['multiple_testing']}; changes below "
          f"{min_effect:.0%} are not reported")
    table = changed_ranges(result)
    for _, row in table.iterrows():
        print(f"  {row['verdict']:<10} {describe_range(row)}")
    if table.empty:
        print("  no size range changed")
    if output:
        print(f"table: {write_table(table, output, table_format(output, ('csv', 'json')))}")
    wanted = {"regressed": ("regressed",), "improved": ("improved",), "changed": ("regressed", "improved")}
    if fail_on and table["verdict"].isin(wanted[fail_on]).any():
        print(f"commbench compare: {fail_on} cells found (--fail-on {fail_on})", file=sys.stderr)
        return 1
    return 0


def history(target: str, min_effect: float, output: str | None) -> int:
    """Prints, per curve, the size ranges whose time changed from one rerun of the campaign to a
    later one (results/<campaign>/history/ and the current dataset), and writes them to `output`."""
    from commbench.analysis.history import describe_change, history as find_changes
    from commbench.io.tables import table_format, write_table

    if output:
        table_format(output, ("csv", "json"))     # refused before any work
    result, table = find_changes(_dataset_path(target), min_effect=min_effect)
    reruns = result.sizes["rerun"]
    print(f"history: {reruns} rerun{'s' if reruns != 1 else ''}, oldest first")
    for rerun, created, source in zip(result["rerun"].values, result["created"].values, result["source"].values):
        print(f"  rerun {rerun}: {str(created)[:16] or 'time unknown':<16}  {source}")
    tested = int(result["tested"].sum())
    changed = int(result["change"].any("rerun").sum())
    print(f"cells: {result.attrs['cells']} measured, {tested} in two reruns or more with a noise estimate, "
          f"{changed} with a change")
    print(f"method: {result.attrs['method']}")
    for _, row in table.iterrows():
        print(f"  {describe_change(row)}\n      location / level before, per rerun: {row['series']}")
    if table.empty:
        print(f"  no change of {min_effect:.0%} or more")
    if output:
        print(f"table: {write_table(table, output, table_format(output, ('csv', 'json')))}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="commbench", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("validate", help="check a campaign file").add_argument("campaign")
    summary_parser = commands.add_parser("summary", help="latency and bandwidth table of a campaign's dataset")
    summary_parser.add_argument("target", help="campaign file or dataset (.nc)")
    summary_parser.add_argument("--check", action="store_true",
                                help="list what gave no data and why, and exit 1 if anything did")
    report = commands.add_parser("report", help="regenerate report.html and figures/ from a dataset "
                                                "(runs notebooks/04-report.ipynb with papermill)")
    report.add_argument("target", help="campaign file or dataset (.nc)")
    report.add_argument("--output-dir", help="where report.html and figures/ go (default: the dataset's folder)")
    report.add_argument("--baseline", metavar="OTHER", help="another campaign's dataset (.nc) or campaign file: "
                        "the report also compares this campaign against it (commbench compare's method)")
    compare_parser = commands.add_parser(
        "compare", help="candidate against baseline, cell by cell: what changed, where, by how much, is it real")
    compare_parser.add_argument("baseline", help="dataset (.nc) or campaign file of the baseline")
    compare_parser.add_argument("candidate", help="dataset (.nc) or campaign file of the candidate")
    compare_parser.add_argument("--map", action="append", default=[], metavar="OLD=NEW",
                                help="the baseline's library row OLD is the candidate's NEW (repeatable)")
    compare_parser.add_argument("--min-effect", type=float, default=0.05,
                                help="smallest relative change reported (default 0.05)")
    compare_parser.add_argument("--confidence", type=float, default=0.95,
                                help="interval level; the false discovery rate is 1 - confidence (default 0.95)")
    compare_parser.add_argument("--fail-on", choices=("regressed", "improved", "changed"),
                                help="exit 1 when any cell has this verdict (gate an update in CI)")
    compare_parser.add_argument("--output", help="write the table of changed size ranges (.csv or .json)")
    history_parser = commands.add_parser(
        "history", help="what changed from one rerun of a campaign to the next (results/<campaign>/history/)")
    history_parser.add_argument("target", help="results/<campaign>, its dataset (.nc) or the campaign file")
    history_parser.add_argument("--min-effect", type=float, default=0.05,
                                help="smallest relative change reported (default 0.05)")
    history_parser.add_argument("--output", help="write the table of changed size ranges (.csv or .json)")
    export_parser = commands.add_parser("export", help="a dataset as a tidy table, one row per point and launch")
    export_parser.add_argument("target", help="campaign file or dataset (.nc)")
    export_parser.add_argument("--format", choices=("csv", "parquet"),
                               help="default: the output's suffix, else csv")
    export_parser.add_argument("--output", help="the table's path (default: the dataset's, with the format's suffix)")
    for suite, what in (("osu", "OSU Micro-Benchmarks outputs (one benchmark run per file)"),
                        ("imb", "IMB-MPI1 outputs (their PingPong, PingPing, Sendrecv and collective tables)")):
        importer = commands.add_parser(f"import-{suite}", help=f"{what} as a dataset in the campaign schema: one "
                                                               "library row, marked imported")
        importer.add_argument("files", nargs="+", metavar="FILE", help="files of one benchmark are its launches")
        importer.add_argument("--library", required=True, help="the library row's name (e.g. mpich-5.0.2)")
        importer.add_argument("--placement", required=True, help="the placement's name (e.g. 1N2P)")
        importer.add_argument("--nodes", type=int, help="default: what the placement's name says (<nodes>N<ppn>P)")
        importer.add_argument("--ppn", type=int, help="default: what the placement's name says")
        if suite == "osu":
            importer.add_argument("--kernel", help="the rows' kernel: the benchmark's (osu_latency: pingpong.send, "
                                                   "...), optionally with @LABEL")
        importer.add_argument("--output", required=True, help="the dataset to write (.nc)")
    args = parser.parse_args(argv)
    try:
        if args.command == "validate":
            from commbench.launch.catalogue import CatalogueError
            from commbench.launch.preflight import check_campaign

            campaign = load_campaign(args.campaign)
            try:
                check_campaign(campaign)
            except CatalogueError as error:
                print(f"{args.campaign}: warning: kernels not checked: {error}", file=sys.stderr)
            print(f"{args.campaign}: ok, campaign {campaign.name!r}, {sum(1 for _ in campaign.runs())} launches")
            return 0
        if args.command == "report":
            from commbench.report import baseline_warnings, run_report_notebook

            dataset = _dataset_path(args.target)
            baseline = _dataset_path(args.baseline) if args.baseline else None
            for line in baseline_warnings(dataset, baseline) if baseline else []:
                print(f"commbench report: warning: measured differently: {line}", file=sys.stderr)
            print(f"report: {run_report_notebook(dataset, args.output_dir, baseline=baseline)}")
            return 0
        if args.command == "compare":
            return compare(args.baseline, args.candidate, args.map, args.min_effect, args.confidence,
                           args.fail_on, args.output)
        if args.command == "history":
            return history(args.target, args.min_effect, args.output)
        if args.command == "export":
            from commbench.data.export import export

            print(f"table: {export(_dataset_path(args.target), args.format, args.output)}")
            return 0
        if args.command.startswith("import-"):
            from commbench.data import imported

            ds = imported.import_files(args.files, args.command.removeprefix("import-"), args.library,
                                        args.placement, getattr(args, "kernel", None), args.nodes, args.ppn,
                                        name=Path(args.output).stem)
            print("\n".join(imported.describe(ds)))
            print(f"dataset: {imported.write(ds, args.output)}")
            return 0
        return summary(args.target, check=args.check)
    except (CampaignError, FileNotFoundError, ValueError) as error:
        print(f"commbench: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
