"""The documentation site (docs/, `make docs`): it builds with every warning an error, a link to a heading
or page that is gone among them; its reference pages hold every kernel, kernel option, campaign key, verb
and dataset variable the code has; the files its extending guide names exist; and the README is a landing
page whose links and example work."""

import html
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"



class _Code(HTMLParser):
    """The text of every <code> element of a page: where the reference pages put names."""

    def __init__(self):
        super().__init__()
        self.depth, self.found, self.current = 0, [], []

    def handle_starttag(self, tag, attrs):
        if tag == "code":
            self.depth += 1

    def handle_endtag(self, tag):
        if tag == "code" and self.depth:
            self.depth -= 1
            if not self.depth:
                self.found.append("".join(self.current).strip())
                self.current = []

    def handle_data(self, data):
        if self.depth:
            self.current.append(data)


def code_spans(page: Path) -> set[str]:
    parser = _Code()
    parser.feed(page.read_text())
    return set(parser.found)


def page_text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page.read_text()))


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built as `make docs` builds it, warnings as errors, into a folder of this test's."""
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-E", "-b", "html",
                            str(DOCS), str(out)], capture_output=True, text=True, cwd=REPO, check=False)
    assert built.returncode == 0, f"the site did not build without warnings:\n{built.stderr[-6000:]}"
    return out


def test_the_site_builds_with_no_warning_and_no_broken_internal_link(site):
    # The fixture failed the build on any warning; what a reader opens first is there.
    for page in ("index", "tutorials/first-campaign", "how-to/compare-update", "reference/cli", "developer/extending"):
        assert (site / f"{page}.html").exists(), page


def test_every_kernel_is_in_the_generated_kernel_table(site):
    from commlens.launch.catalogue import catalogue

    names = code_spans(site / "reference" / "kernels.html")
    missing = [name for name in catalogue() if name not in names]
    assert not missing, f"kernels missing from reference/kernels: {missing}"


def harness_options() -> list[str]:
    """Every option commlens-kernels' parser accepts: its getopt table and short options
    (kernels/harness/options.c), the one list of them; --help is their documentation."""
    source = (REPO / "kernels" / "harness" / "options.c").read_text()
    table = source[source.index("LONG_OPTIONS[] = {"):]
    table = table[:table.index("};")]
    long_options = re.findall(r'\{"([a-z0-9-]+)",', table)
    # A short option with a long twin ({"help", ..., 'h'}) is that option: --help names it.
    twins = set(re.findall(r"\{\"[a-z0-9-]+\",[^}]*'([a-z])'\}", table))
    short = re.search(r'getopt_long\(argc, argv, "([^"]+)"', source).group(1)
    assert len(long_options) > 20, "options.c's table was not found where it was"
    return [f"--{name}" for name in long_options] + [f"-{letter}" for letter in re.findall(r"[a-z]", short)
                                                     if letter not in twins]


def test_every_harness_option_is_in_the_generated_options_page(site):
    from commlens.launch.catalogue import catalogue

    text = page_text(site / "reference" / "kernel-options.html")
    options = harness_options() + sorted({f"--{o}" for kernel in catalogue().values() for o in kernel.options})
    missing = [option for option in options if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text)]
    assert not missing, f"options of commlens-kernels missing from reference/kernel-options (its --help): {missing}"


def schema_keys() -> list[str]:
    """Every key a campaign file may hold, as the reference writes it: `a.b` for a mapping's key, `a[].b`
    for a list item's, `libraries.<row>` and `kernels.<kernel>` for the campaign's own names."""
    from commlens.campaign.schema import load_schema

    root = load_schema()

    def resolve(node):
        while "$ref" in node:
            target = root
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return node

    keys = []

    def walk(node, path):
        node = resolve(node)
        shapes = [node] + [resolve(option) for option in node.get("oneOf", [])]
        for shape in shapes:
            for key, child in shape.get("properties", {}).items():
                keys.append(f"{path}.{key}" if path else key)
                walk(child, keys[-1])
            if isinstance(shape.get("items"), dict):
                walk(shape["items"], f"{path}[]")
            if isinstance(shape.get("additionalProperties"), dict):
                walk(shape["additionalProperties"], path + {"libraries": ".<row>", "kernels": ".<kernel>"}
                     .get(path, ".<name>"))

    walk(root, "")
    return sorted(set(keys))


def test_every_campaign_key_is_in_the_generated_campaign_page(site):
    keys = schema_keys()
    assert {"campaign", "kernels.<kernel>.sizes.list", "placements[].network.rate"} <= set(keys)
    names = code_spans(site / "reference" / "campaign.html")
    missing = [key for key in keys if key not in names]
    assert not missing, f"campaign keys missing from reference/campaign: {missing}"
    from commlens.campaign import WORKFLOW_OPTIONS

    assert not [option for option in WORKFLOW_OPTIONS if option not in names]


def test_every_verb_and_its_options_are_in_the_generated_cli_page(site):
    import argparse

    import commlens.cli
    from commlens.cli.parser import build_parser

    parser = build_parser(commlens.cli.__doc__)
    verbs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    page = site / "reference" / "cli.html"
    text, names = page_text(page), " ".join(code_spans(page))
    missing = [verb for verb in verbs if f"commlens {verb}" not in text]
    missing += [f"{verb} {option}" for verb, sub in verbs.items() for action in sub._actions
                for option in action.option_strings if option not in names]
    assert not missing, f"verbs or options missing from reference/cli: {missing}"


def collected_dataset(tmp_path):
    """A dataset collected from launch files written here, as collect builds a campaign's: a curve kernel,
    a kernel that times pairs and a launch that failed, written and opened as users open it."""
    from commlens import open_campaign
    from commlens.campaign import Campaign, validate_campaign
    from commlens.data.collect import build_dataset, read_all
    from commlens.io.netcdf import write_dataset

    config = {"campaign": "unit", "libraries": {"a": {"mpi": "m"}},
              "placements": [{"name": "2N1P", "nodes": 2, "ppn": 1}],
              "kernels": {"pingpong.ssend": {"sizes": {"list": [4]}}, "bisection": {"sizes": {"list": [4]}}},
              "launches": 2}
    campaign = Campaign(name="unit", source="unit.yaml", config=validate_campaign(config))
    paths = []
    for _, placement, kernel, launch in campaign.runs():
        status = "failed" if launch else "ok"
        records = [{"record": "launch", "schema": 1, "status": status, "library": "a", "mpi": "m",
                    "placement": placement, "kernel": kernel, "launch": launch, "started": "2026-01-01T00:00:00+00:00"}]
        if status == "ok":
            records += [{"record": "run", "schema": 1, "kernel": kernel, "metric": "", "library_version": "a 1",
                         "nprocs": 2, "hosts": ["h0", "h1"], "timer": "MPI_Wtime", "timer_resolution_s": 1e-9,
                         "harness_overhead_s": 1e-8, "args": {}},
                        {"record": "point", "size": 4, "samples": [1e-6, 2e-6], "iters_per_sample": 1, "settled": True,
                         "rse": 0.01, "errors": None, "pair_times_s": [[None, 1e-6, 1e-6, None]] * 2},
                        {"record": "end", "status": "ok", "points": 1}]
        path = tmp_path / "raw" / kernel / f"launch{launch}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        paths.append(path)
    results, refused = read_all(paths, on_error="record")
    builds = {"m": {"mpi": "m", "compiler": "cc", "cflags": "-O2"}}
    write_dataset(build_dataset(campaign, results, {"m": {"name": "m", "family": "mpich"}}, builds, refused),
                  tmp_path / "unit.nc", keep_previous=False)
    return open_campaign(tmp_path / "unit.nc").load()


def test_every_dataset_variable_is_in_the_generated_dataset_page(site, tmp_path):
    from commlens.io.conventions import ATTRIBUTES, MEASURED, QUALITY

    ds = collected_dataset(tmp_path)
    names = code_spans(site / "reference" / "dataset.html")
    # What a collection writes, and every variable the conventions describe (an import's among them).
    expected = set(ds.variables) | set(ds.attrs) | set(ATTRIBUTES) | MEASURED | QUALITY
    missing = sorted(name for name in expected if name not in names)
    assert not missing, f"dataset variables or attributes missing from reference/dataset: {missing}"


def named_paths(markdown: str) -> list[str]:
    """The repository files and folders a page names in code spans (a placeholder such as <family>
    stands for many and is not one)."""
    tops = ("kernels/", "src/", "tests/", "workflow/", "envs/", "config/", "benchmarks/", "notebooks/", "docs/")
    return sorted({span for span in re.findall(r"`([^`\s]+)`", markdown)
                   if span.startswith(tops) and "<" not in span and "*" not in span})


def test_every_file_the_extending_guide_names_exists():
    paths = named_paths((DOCS / "developer" / "extending.md").read_text())
    assert len(paths) >= 15, f"the guide names fewer files than it did: {paths}"
    missing = [path for path in paths if not (REPO / path).exists()]
    assert not missing, f"developer/extending.md names files the tree no longer has: {missing}"


def test_the_readme_is_a_landing_page_whose_links_lead_somewhere():
    readme = (REPO / "README.md").read_text()
    lines = readme.splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; the manual is docs/"
    assert not [n for n, line in enumerate(lines, 1) if len(line) > 120], "README lines over 120 characters"
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if "://" not in link]
    assert any(link.startswith("docs/") for link in local)
    missing = [link for link in local if not (REPO / link).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"


@pytest.mark.mpi
def test_the_readmes_example_runs_on_a_campaigns_dataset(tiny_campaign, workspace):
    """The README's Python example, on the tiny campaign's dataset in place of the quick one (the same
    libraries and placements, and the sizes the example reads)."""
    example = re.search(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.DOTALL).group(1)
    assert "results/quick/quick.nc" in example
    example = example.replace("results/quick/quick.nc", str(workspace / "results" / "tiny" / "tiny.nc"))
    ran = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True, cwd=workspace,
                         timeout=300, check=False)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "mpich-5.0.2" in ran.stdout and "openmpi-5.0.11" in ran.stdout
