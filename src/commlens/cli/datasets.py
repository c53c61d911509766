"""Where a verb's dataset is and how it is opened, and the verbs that only move a dataset:
`commlens export` and `commlens import-osu|import-imb|import-netpipe`."""

from __future__ import annotations

from pathlib import Path

from commlens.campaign import load_campaign


def dataset_path(target) -> Path:
    """A campaign file's dataset (results/<campaign>/<campaign>.nc), or the dataset named."""
    path = Path(target)
    if path.suffix in {".yaml", ".yml"}:
        name = load_campaign(path).name
        return Path("results") / name / f"{name}.nc"
    return path


def open_dataset(target):
    """(path, dataset) of a campaign file or dataset, opened through commlens.open_campaign, whose
    errors name the file and the problem in one line; every verb opens its datasets here."""
    from commlens import DatasetError, open_campaign   # open_campaign registers the ds.commlens accessor

    path = dataset_path(target)
    try:
        return path, open_campaign(path)
    except DatasetError:
        raise
    except (OSError, ValueError) as error:
        # Anything else reading the file raises, in one line that names it.
        message = " ".join(str(error).split()) or type(error).__name__
        raise DatasetError(message if str(path) in message else f"{path}: {message}") from None


def export(args) -> int:
    from commlens.data.export import FORMATS, OSU, export as export_table, sidecar
    from commlens.io.tables import table_format

    if args.format != OSU:
        table_format(args.output, FORMATS, default="csv", requested=args.format)   # refused before any reading
    elif args.pairs:
        raise ValueError("--pairs: a table of pairs has no OSU form; --format osu writes one file per curve")
    path, ds = open_dataset(args.target)
    written = export_table(ds, args.format, args.output, source=path, table="pairs" if args.pairs else "points")
    if written is None:     # the table went to standard output (never OSU's folder of files)
        return 0
    if args.format == OSU:
        print(f"OSU files: {written} (what each holds: {written / 'commlens-osu.json'})")
    else:
        print(f"table: {written}" + (f" (its columns and provenance: {sidecar(written)})"
                                      if written.suffix == ".csv" else ""))
    return 0


def import_files(args) -> int:
    from commlens.data import imported

    from commlens.io.importers.osu import parse_osu_sizes

    suite = args.command.removeprefix("import-")
    sizes = getattr(args, "osu_sizes", None)
    ds = imported.import_files(args.files, suite, args.library, args.placement, getattr(args, "kernel", None),
                               args.nodes, args.ppn, name=Path(args.output).stem, partial=args.partial,
                               osu_sizes=parse_osu_sizes(sizes) if sizes else None, skip_bad=args.skip_bad)
    print("\n".join(imported.describe(ds)))
    print(f"dataset: {imported.write(ds, args.output)}")
    return 0
