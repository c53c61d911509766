"""The reference pages' generated parts: each directive asks the project's own description of a thing
and writes it as Markdown, parsed where the directive stands, so that no page copies a list by hand.

    ```{commlens-cli}```              the command line, from the argparse parser (commlens.cli.parser)
    ```{commlens-kernels}```          the kernels, from the kernel catalogue (commlens.launch.catalogue)
    ```{commlens-kernel-options}```   commlens-kernels' options, from its --help (kernels/harness/usage.c)
    ```{commlens-campaign-keys}```     a campaign file's keys, from its JSON schema (commlens.campaign.schema)
    ```{commlens-workflow-options}``` the workflow's own --config options (commlens.campaign.overrides)
    ```{commlens-dataset}```          the dataset's variables and attributes, from a dataset that
                                      commlens.data.collect and commlens.data.imported build here
    ```{commlens-layers}```           the package's layers, from pyproject.toml's import-linter contracts
    ```{commlens-raw-records}```      a raw launch file's point record and statuses (commlens.io.raw)
    ```{commlens-docstring} MODULE``` a module's docstring, the plain text the project writes them in

Generated headings become sections, so MyST's heading anchors reach them as they reach written ones.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
# argparse wraps its usage lines to the terminal's width: the same width on every machine.
HELP_COLUMNS = "100"

CODE_SPAN = re.compile(r"(`[^`]*`)")
MARKDOWN_SPECIAL = re.compile(r"([\\*_<>\[\]|$])")


def text(words) -> str:
    """Prose from the code (help strings, descriptions) as Markdown that reads as written: code spans kept,
    everything Markdown or MyST would take for markup escaped, one line."""
    words = " ".join(str(words).split())
    escaped = "".join(part if CODE_SPAN.fullmatch(part) else MARKDOWN_SPECIAL.sub(r"\\\1", part)
                      for part in CODE_SPAN.split(words))
    # At the start of a line, these would begin a heading, a list or a quote.
    return "\\" + escaped if escaped[:1] in ("#", "-", "+", ">") else escaped


def code(words) -> str:
    """`words` as a code span, whatever backticks it holds."""
    words = " ".join(str(words).split())
    fence = "``" if "`" in words else "`"
    pad = " " if words.startswith("`") or words.endswith("`") else ""
    return f"{fence}{pad}{words}{pad}{fence}"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table; cells are Markdown already (pipes escaped by `text`)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("\n", " ") or " " for cell in row) + " |" for row in rows]
    return lines + [""]


def fenced(body: str, language: str = "text") -> list[str]:
    return [f"````{language}", *body.rstrip("\n").splitlines(), "````", ""]


# ------------------------------------------------------------------------------------------ the CLI

def _help_width():
    """argparse formats for the terminal's width; the pages use one width wherever they are built."""
    class Width:
        def __enter__(self):
            self.before = os.environ.get("COLUMNS")
            os.environ["COLUMNS"] = HELP_COLUMNS

        def __exit__(self, *exc):
            if self.before is None:
                os.environ.pop("COLUMNS", None)
            else:
                os.environ["COLUMNS"] = self.before
    return Width()


def command_line() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser], dict[str, str]]:
    """The parser `commlens` runs (commlens.cli.main builds it so), its verbs' parsers and one-line helps."""
    import commlens.cli
    from commlens.cli.parser import build_parser

    parser = build_parser(commlens.cli.__doc__.strip().split("\n\n")[-1])
    verbs = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    helps = {choice.dest: choice.help for choice in verbs._choices_actions}
    return parser, dict(verbs.choices), helps


def _argument_row(action: argparse.Action) -> list[str]:
    if action.option_strings:
        metavar = "" if action.nargs == 0 else " " + (action.metavar if isinstance(action.metavar, str)
                                                    else " ".join(action.metavar) if action.metavar
                                                    else action.dest.upper())
        name = ", ".join(f"{option}{metavar}" for option in action.option_strings)
    else:
        name = action.metavar if isinstance(action.metavar, str) else action.dest
        name += " ..." if action.nargs in ("+", "*", argparse.REMAINDER) else ""
    meaning = text(action.help or "")
    if action.choices:
        meaning += ("; " if meaning else "") + "one of " + ", ".join(code(choice) for choice in action.choices)
    if action.required and action.option_strings:
        meaning += " (required)"
    if action.default not in (None, False, [], "", argparse.SUPPRESS) and action.option_strings \
            and "default" not in (action.help or ""):
        meaning += f" (default {code(action.default)})"
    return [code(name), meaning]


def cli_markdown() -> str:
    parser, verbs, helps = command_line()
    with _help_width():
        lines = ["## commlens", "", text(parser.description), "", *fenced(parser.format_usage())]
        lines += table(["verb", "what it does"], [[f"[{code(verb)}](#commlens-{verb})", text(helps[verb])]
                                                   for verb in verbs])
        for verb, sub in verbs.items():
            lines += [f"## commlens {verb}", "", text(helps[verb]), "", *fenced(sub.format_usage())]
            arguments = [action for action in sub._actions if not isinstance(action, argparse._HelpAction)]
            lines += table(["argument", "meaning"], [_argument_row(action) for action in arguments])
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ kernels

def kernel_markdown() -> str:
    from commlens.launch.catalogue import catalogue

    kernels = list(catalogue().values())
    families = list(dict.fromkeys(kernel.family for kernel in kernels))
    lines = ["### Families", "", f"{len(kernels)} kernels in {len(families)} families: "
             + ", ".join(f"[{family}](#{family.replace('.', '')})" for family in families) + ". Bytes moved are per "
             "unit of the metric, in message sizes, once, per rank or per pair of ranks: every bandwidth is "
             "computed from them. An MPI version of 0.0 means any library.", ""]
    for family in families:
        members = [kernel for kernel in kernels if kernel.family == family]
        lines += [f"### {family}", "", f"Source: {code(members[0].source)}.", ""]
        rows = []
        for kernel in members:
            moved = (f"{kernel.bytes_factor:g} x size"
                     + ("" if kernel.bytes_per == "once" else f" per {kernel.bytes_per}"))
            extra = ([f"options: {', '.join(code('--' + option) for option in kernel.options)}"]
                     if kernel.options else [])
            extra += ["windowed"] if kernel.windowed else []
            extra += ["times every pair of ranks"] if kernel.pair_times else []
            rows.append([code(kernel.name), text(kernel.metric), str(kernel.min_ranks), moved,
                         "; ".join(extra), ", ".join(kernel.tags), kernel.mpi_version])
        lines += table(["kernel", "what one sample's time means", "ranks", "bytes moved", "reads", "tags", "MPI"],
                       rows)
    return "\n".join(lines)


@functools.cache
def harness_help() -> str:
    """commlens-kernels --help as the harness prints it: usage.c compiled alone with a C compiler (no MPI),
    so that the page is the binary's own description of its options."""
    compiler = os.environ.get("CC", "cc")
    if shutil.which(compiler) is None:
        raise RuntimeError(f"the options page needs a C compiler ({compiler}) to print commlens-kernels --help")
    harness = ROOT / "kernels" / "harness"
    with tempfile.TemporaryDirectory(prefix="commlens-docs-") as folder:
        program = Path(folder) / "usage"
        subprocess.run([compiler, "-std=c11", "-I", str(harness), "-o", str(program), str(HERE / "harness_usage.c"),
                        str(harness / "usage.c")], check=True, capture_output=True, text=True)
        return subprocess.run([str(program)], check=True, capture_output=True, text=True).stdout


OPTION_LINE = re.compile(r"^  (?P<term>\S.*?)(?:\s{2,}(?P<meaning>\S.*))?$")


def help_groups(help_text: str) -> list[tuple[str, list[tuple[str, str]], str]]:
    """--help's groups as (heading, [(option, meaning)], verbatim text where it is not a list of options):
    a heading starts at the first column (more of it indented before its first option), an option two
    spaces in, its meaning where two spaces or more follow it and on the lines indented further."""
    groups: list[tuple[str, list[tuple[str, str]], str]] = []
    for line in help_text.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            groups.append((line, [], ""))
            continue
        heading, options, verbatim = groups[-1]
        if heading.startswith("usage:"):
            groups[-1] = (heading, options, verbatim + line + "\n")
        elif not options and not line.startswith("  ") or not options and line.startswith("   "):
            groups[-1] = (heading + " " + line.strip(), options, verbatim)
        elif line.startswith("   "):
            term, meaning = options[-1]
            options[-1] = (term, (meaning + " " + line.strip()).strip())
        else:
            match = OPTION_LINE.match(line)
            options.append((match["term"].strip(), (match["meaning"] or "").strip()))
    return groups


def kernel_options_markdown() -> str:
    # The page's own headings are the groups: second level, under its title.
    lines = []
    for heading, options, verbatim in help_groups(harness_help()):
        if heading.startswith("usage:"):
            lines += ["## Usage", "", *fenced(heading + "\n" + verbatim)]
            continue
        lines += [f"## {text(heading.rstrip(':').split(' (')[0].capitalize())}", ""]
        if " (" in heading:
            lines += [text(heading.rstrip(":").split(" (", 1)[1].rstrip(")")), ""]
        lines += table(["option", "meaning"], [[code(term), text(meaning)] for term, meaning in options])
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ campaign keys

def _resolve(schema: dict, root: dict) -> dict:
    while "$ref" in schema:
        target = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _allowed(schema: dict, root: dict) -> str:
    schema = _resolve(schema, root)
    if "enum" in schema:
        return ", ".join(code(value) for value in schema["enum"])
    if "oneOf" in schema:
        return " or ".join(_allowed(option, root) for option in schema["oneOf"] if "required" not in option
                           or "properties" not in option) or "object"
    kinds = schema.get("type", "object" if "properties" in schema else "")
    kinds = " or ".join(kinds) if isinstance(kinds, list) else kinds
    bounds = [f"{word} {schema[key]}" for key, word in (("minimum", "≥"), ("exclusiveMinimum", ">"),
                                                      ("maximum", "≤"), ("maxLength", "at most characters:"))
              if key in schema]
    if "pattern" in schema:
        bounds.append(f"matching {code(schema['pattern'])}")
    if kinds == "array" and "items" in schema:
        kinds = f"list of {_allowed(schema['items'], root)}"
    return text(kinds) + (f" ({', '.join(text(b) if not b.startswith('matching') else b for b in bounds)})"
                          if bounds else "")


def campaign_keys(schema: dict | None = None) -> list[tuple[str, dict]]:
    """Every key a campaign file may hold, as (dotted path, its schema), parents before children:
    `libraries.<row>.mpi`, `placements[].network.rate`, `kernels.<kernel>.sizes.list`."""
    from commlens.campaign.schema import load_schema

    root = schema or load_schema()
    found: list[tuple[str, dict]] = []

    def walk(node: dict, path: str):
        node = _resolve(node, root)
        for option in node.get("oneOf", []):       # alternative shapes: sizes' schedule or list
            option = _resolve(option, root)
            if "properties" in option:
                walk(option, path)
        for key, child in node.get("properties", {}).items():
            child_path = f"{path}.{key}" if path else key
            if any(existing == child_path for existing, _ in found):
                continue
            found.append((child_path, _resolve(child, root)))
            walk(child, child_path)
        items = node.get("items")
        if isinstance(items, dict) and "properties" in _resolve(items, root):
            walk(items, f"{path}[]")
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and ("properties" in _resolve(extra, root)):
            placeholder = {"libraries": "<row>", "kernels": "<kernel>"}.get(path.split(".")[-1], "<name>")
            walk(extra, f"{path}.{placeholder}")

    walk(root, "")
    return found


def campaign_keys_markdown() -> str:
    from commlens.campaign.schema import SCHEMA_PATH, load_schema

    root = load_schema()
    keys = campaign_keys(root)
    source = SCHEMA_PATH.relative_to(ROOT) if SCHEMA_PATH.is_relative_to(ROOT) else SCHEMA_PATH.name
    lines = ["### The file", "", text(root.get("description", "")), "",
             f"Generated from {code(source)}"
             f": {len(keys)} keys. Required at the top: "
             + ", ".join(code(key) for key in root.get("required", [])) + ".", ""]
    sections = list(dict.fromkeys(path.split(".")[0].split("[")[0] for path, _ in keys))
    for section in sections:
        rows = []
        for path, schema in keys:
            if path.split(".")[0].split("[")[0] != section:
                continue
            default = code(json.dumps(schema["default"])) if "default" in schema else ""
            rows.append([code(path), _allowed(schema, root), default, text(schema.get("description", ""))])
        lines += [f"### {section}", "", *table(["key", "allowed", "default", "meaning"], rows)]
    return "\n".join(lines)


def workflow_options_markdown() -> str:
    from commlens.campaign.overrides import WORKFLOW_OPTIONS

    return "\n".join(["Beside a campaign's keys, `--config` takes the workflow's own options: "
                      + ", ".join(code(name) for name in WORKFLOW_OPTIONS) + ".", ""])


# ------------------------------------------------------------------------------------------ the dataset

# A campaign collected here from launch files written for the purpose: a kernel timed as a curve and one
# that times every pair of ranks, on two libraries and two placements; nothing is run.
SAMPLE_CAMPAIGN = {
    "campaign": "reference",
    "libraries": {"lib-a": {"mpi": "mpi-a"}, "lib-b": {"mpi": "mpi-b"}},
    "placements": [{"name": "1N2P", "nodes": 1, "ppn": 2}, {"name": "2N1P", "nodes": 2, "ppn": 1}],
    "kernels": {"pingpong.send": {"sizes": {"list": [1, 8]}}, "allpairs.isolated": {"sizes": {"list": [8]}}},
    "launches": 2,
}
OSU_LATENCY = """
# OSU MPI Latency Test v7.4
# Datatype: MPI_CHAR.
# Size       Avg Latency(us)
1                       0.40
2                       0.41
"""


def _launch_records(library: str, placement: str, kernel: str, launch: int) -> list[dict]:
    pairs = kernel.startswith("allpairs")
    points = [{"record": "point", "size": size, "samples": [1e-6 * (1 + size / 8), 1.1e-6 * (1 + size / 8)],
               "iters_per_sample": 4, "settled": True, "rse": 0.005, "errors": None,
               **({"pair_times_s": [[None, 2e-6, 2e-6, None]] * 2} if pairs else {})}
              for size in SAMPLE_CAMPAIGN["kernels"][kernel]["sizes"]["list"]]
    return [{"record": "launch", "schema": 1, "status": "ok", "library": library, "mpi": "m", "placement": placement,
             "kernel": kernel, "launch": launch, "started": "2026-01-01T00:00:00+00:00"},
            {"record": "run", "schema": 1, "kernel": kernel, "metric": "", "library_version": f"{library} 1.0",
             "nprocs": 2, "hosts": ["node0", "node1"], "cpu_binding": ["0", "1"], "timer": "MPI_Wtime",
             "timer_resolution_s": 1e-9, "harness_overhead_s": 3e-8, "args": {}},
            *points, {"record": "end", "status": "ok", "points": len(points)}]


@functools.cache
def sample_datasets():
    """(collected, imported, on_disk): a campaign's dataset as open_campaign gives it, an import's, and the
    campaign's file as any netCDF reader sees it, each made by the code that makes them for users."""
    import xarray as xr

    from commlens import open_campaign
    from commlens.campaign import Campaign, validate_campaign
    from commlens.data.collect import build_dataset, read_all
    from commlens.data.imported import import_files, write
    from commlens.io.netcdf import write_dataset

    campaign = Campaign(name="reference", source="reference.yaml", config=validate_campaign(SAMPLE_CAMPAIGN))
    libraries = {mpi: {"name": mpi, "family": "mpich"} for mpi in ("mpi-a", "mpi-b")}
    builds = {mpi: {"mpi": mpi, "compiler": "cc", "cflags": "-O2"} for mpi in ("mpi-a", "mpi-b")}
    with tempfile.TemporaryDirectory(prefix="commlens-docs-") as folder:
        folder = Path(folder)
        paths = []
        for library, placement, kernel, launch in campaign.runs():
            path = folder / "raw" / library / placement / kernel / f"launch{launch}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(r) + "\n" for r in _launch_records(library, placement, kernel, launch)))
            paths.append(path)
        results, refused = read_all(paths, on_error="record")
        write_dataset(build_dataset(campaign, results, libraries, builds, refused), folder / "reference.nc",
                      keep_previous=False)
        collected = open_campaign(folder / "reference.nc").load()
        with xr.open_dataset(folder / "reference.nc", decode_cf=False) as raw:
            on_disk = raw.load()
        (folder / "osu_latency.txt").write_text(OSU_LATENCY)
        write(import_files([folder / "osu_latency.txt"], "osu", "lib-c", "1N2P", partial=True), folder / "osu.nc")
        imported = open_campaign(folder / "osu.nc").load()
    return collected, imported, on_disk


def _variable_rows(ds, names) -> list[list[str]]:
    return [[code(name), ", ".join(ds[name].dims), code(ds[name].attrs.get("units", "")) if "units" in ds[name].attrs
             else "", text(ds[name].attrs.get("long_name", ""))] for name in names]


def dataset_markdown() -> str:
    collected, imported, on_disk = sample_datasets()
    header = ["name", "dims", "units", "meaning (its long_name)"]
    data = sorted(collected.data_vars)
    axes = [name for name in collected.coords if name in collected.dims]
    labels = [name for name in collected.coords if name not in collected.dims]
    lines = ["### Dimensions", "", *table(["dimension", "what runs along it"], [
        [code(dim), text(collected[dim].attrs.get("long_name", "")) if dim in collected else ""]
        for dim in collected.dims])]
    lines += ["### Data variables", "", *table(header, _variable_rows(collected, data))]
    by_dim: dict[str, list[str]] = {}
    for name in labels:
        by_dim.setdefault(", ".join(collected[name].dims) or "(none)", []).append(name)
    lines += ["### Coordinates", "", "The axes, then what describes each label of an axis.", "",
              *table(header, _variable_rows(collected, axes + [n for names in by_dim.values() for n in names]))]
    new_vars = [name for name in imported.variables if name not in collected.variables]
    lines += ["### Added by an import", "", ("A dataset made by `commlens import-osu`, `import-imb` or "
                                             "`import-netpipe` also holds:"), "",
              *table(header, _variable_rows(imported, sorted(new_vars)))]
    lines += ["### Attributes", "", ("A collected dataset's global attributes (a workflow run adds the raw files' "
                                     "fingerprint and, where the campaign asked for them, its looks and "
                                     "bisections):"), "",
              ", ".join(code(name) for name in sorted(collected.attrs)) + ".", "",
              "An import's: " + ", ".join(code(name) for name in sorted(imported.attrs)) + ".", ""]
    lines += ["### On disk", "", ("What a CF reader (or `xarray.open_dataset(..., decode_cf=False)`) sees in the "
                                  "file: labels as CF label variables over plain dimensions, samples as a contiguous "
                                  "ragged array over points. `commlens.open_campaign` gives back the dataset above."),
              "", *table(header, _variable_rows(on_disk, list(on_disk.variables)))]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ the developer guide

def _first_paragraph(module: str) -> str:
    import importlib

    doc = importlib.import_module(module).__doc__ or ""
    return " ".join(doc.strip().split("\n\n")[0].split())


def layers_markdown() -> str:
    import tomllib

    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    lines = []
    for contract in settings["contracts"]:
        if contract["type"] == "layers":
            lines += [f"**{text(contract['name'])}**, top to bottom:", ""]
            rows = []
            for layer in contract["layers"]:
                modules = [name.strip() for name in layer.split("|")]
                rows.append([", ".join(code(m) for m in modules),
                             " ".join(text(_first_paragraph(m)) for m in modules)])
            lines += table(["layer", "what it is for (its docstring)"], rows)
        elif contract["type"] == "forbidden":
            lines += [f"**{text(contract['name'])}**: " + ", ".join(code(m) for m in contract["source_modules"])
                      + " never import " + ", ".join(code(m) for m in contract["forbidden_modules"]) + ".", ""]
        else:
            lines += [f"**{text(contract['name'])}** (import-linter's {code(contract['type'])} contract).", ""]
    for contract in settings["contracts"]:
        if contract.get("ignore_imports"):
            lines += [f"Allowed despite \"{text(contract['name'])}\": "
                      + ", ".join(code(item) for item in contract["ignore_imports"]) + ".", ""]
    return "\n".join(lines)


def raw_records_markdown() -> str:
    import dataclasses

    from commlens.io.conventions import STATUSES
    from commlens.io.raw import LAUNCH_STATUSES, NOT_RUN, Point

    fields = [[code(field.name), text(getattr(field.type, "__name__", field.type))]
              for field in dataclasses.fields(Point)]
    return "\n".join([
        "A point record's fields, as `commlens.io.raw.Point` reads them:", "",
        *table(["field", "type"], fields),
        "A launch record's `status`: " + ", ".join(code(s) for s in sorted(LAUNCH_STATUSES)) + " ("
        + ", ".join(code(s) for s in NOT_RUN) + ": the launch never ran). The dataset's `status` adds what "
        "collecting finds: " + ", ".join(code(s) for s in STATUSES if s not in LAUNCH_STATUSES) + ".", ""])


# ------------------------------------------------------------------------------------------ docstrings

def documented(name: str):
    """The module, or the module's function or class, a dotted name names."""
    import importlib

    try:
        return importlib.import_module(name)
    except ModuleNotFoundError:
        module, _, attribute = name.rpartition(".")
        return getattr(importlib.import_module(module), attribute)


def docstring_markdown(name: str) -> str:
    """A module's (or a function's) docstring as Markdown. The modules explain their methods in plain text:
    paragraphs, lists whose items start with "- ", and indented blocks (formulas, tables of words), which
    stay as they are written."""
    import inspect

    blocks = inspect.cleandoc(documented(name).__doc__ or "").split("\n\n")
    out: list[str] = []
    for block in blocks:
        lines = [line for line in block.splitlines() if line.strip()]
        if not lines:
            continue
        if all(line.startswith("    ") for line in lines):
            out += fenced("\n".join(line[4:] for line in lines))
            continue
        paragraph: list[str] = []
        items: list[str] = []
        for line in lines:
            if line.startswith("- "):
                items.append(line[2:])
            elif items:
                items[-1] += " " + line.strip()
            else:
                paragraph.append(line.strip())
        if paragraph:
            out += [text(" ".join(paragraph)), ""]
        if items:
            out += [f"- {text(item)}" for item in items] + [""]
    return "\n".join(out)


# ------------------------------------------------------------------------------------------ directives

GENERATORS = {
    "commlens-cli": cli_markdown,
    "commlens-kernels": kernel_markdown,
    "commlens-kernel-options": kernel_options_markdown,
    "commlens-campaign-keys": campaign_keys_markdown,
    "commlens-workflow-options": workflow_options_markdown,
    "commlens-dataset": dataset_markdown,
    "commlens-layers": layers_markdown,
    "commlens-raw-records": raw_records_markdown,
}


HEADING = re.compile(r"^#{1,6} ")


def _parsed(directive: SphinxDirective, markdown: str, source: str) -> list:
    """`markdown` parsed where the directive stands. Headings it holds join the page's sections as they
    are parsed, and what the directive returns follows them: so generated text either has no heading or
    begins with one (anything before its first heading would land after its last section)."""
    lines = markdown.splitlines()
    first = next((i for i, line in enumerate(lines) if HEADING.match(line)), None)
    if first is not None and any(line.strip() for line in lines[:first]):
        raise ValueError(f"{source}: generated text with headings must begin with one")
    container = nodes.section()
    container.document = directive.state.document
    nested_parse_with_titles(directive.state, StringList(markdown.splitlines(), source=source), container)
    return container.children


def directive(generate):
    class Generated(SphinxDirective):
        has_content = False

        def run(self):
            return _parsed(self, generate(), f"{self.env.docname} (generated by {generate.__name__})")
    return Generated


class Docstring(SphinxDirective):
    """```{commlens-docstring} commlens.analysis.compare```: the module's (or function's) docstring, where it
    stands."""

    required_arguments = 1
    has_content = False

    def run(self):
        module = self.arguments[0]
        return _parsed(self, docstring_markdown(module), f"{self.env.docname} (the docstring of {module})")


def setup(app):
    for name, generate in GENERATORS.items():
        app.add_directive(name, directive(generate))
    app.add_directive("commlens-docstring", Docstring)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
