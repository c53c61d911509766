# Snakemake script: raw launch files -> results/<campaign>/<campaign>.nc, streamed: one launch's
# samples in memory at a time, the rest on disk beside the dataset until it is written.
import json
import sys
from pathlib import Path

from commlens.campaign import campaign_from_config
from commlens.data.collect import build_dataset, collection_space, stream_raw
from commlens.data.failures import failures, write_failures
from commlens.io.atomic import write_failure
from commlens.io.collected import collected_from
from commlens.io.netcdf import write_dataset

# The campaign as the workflow has it (workflow/rules/common.smk): the file with any --config overrides.
campaign = campaign_from_config(snakemake.config, snakemake.params.campaign_file)
libraries = {json.loads(Path(p).read_text())["name"]: json.loads(Path(p).read_text())
             for p in snakemake.input.libraries}
builds = {json.loads(Path(p).read_text())["mpi"]: json.loads(Path(p).read_text())
          for p in snakemake.input.builds}
samples_file = Path(snakemake.output.dataset).with_suffix(".samples.tmp")
refused = []
# The raw files as they are before they are read: a dataset says what it was collected from, and the
# workflow collects again when they change (commlens.io.collected), however the dataset's time looks.
sources = collected_from(snakemake.input.raw, because=snakemake.params.out_of_date)
try:
    with open(snakemake.log[0], "w") as log:
        # The input lists the raw files in the campaign's order (library, placement, kernel, launch),
        # which is the order the dataset stores samples in.
        results, seen = stream_raw(snakemake.input.raw, refused, log=log)
        ds = build_dataset(campaign, results, libraries, builds, refused, samples_file=samples_file)
        ds.attrs.update(sources)
        if snakemake.input.decisions:    # launches until decided: the looks that chose the rounds
            ds.attrs["until_decided"] = Path(snakemake.input.decisions[0]).read_text()
        if snakemake.input.bisections:   # bisect: which release brought a change
            ds.attrs["bisections"] = Path(snakemake.input.bisections[0]).read_text()
        write_dataset(ds, snakemake.output.dataset)
    ds.close()
    samples_file.unlink(missing_ok=True)
    failed = failures(seen, refused, campaign, libraries, builds)
    write_failures(failed, snakemake.output.failures)
except OSError as error:
    # One line naming the file, the cause (a full disk) and the space a collection needs, and nothing
    # half-written left behind. The dataset this collection was to replace gets its name back when the
    # workflow ends (commlens.io.archive), and the next run collects again.
    samples_file.unlink(missing_ok=True)
    sys.exit(f"commlens collect: {write_failure(error, error.filename or samples_file)}; "
             f"{collection_space(snakemake.input.raw, snakemake.output.dataset)}; the previous dataset is kept")

status = ds["status"].values.ravel().tolist()
asked = [s for s in status if s != "skipped"]   # cells a kernel's `placements` leave out never ran
print(f"{campaign.name}: {asked.count('ok')} of {len(asked)} launches ok, {ds.sizes['sample']} samples, "
      f"{len(refused)} raw files refused; dataset: {snakemake.output.dataset}")
if failed:
    rows = [entry for entry in failed if "placement" not in entry]   # a library whose env or build failed
    print(f"{len(failed) - len(rows)} launches gave no data"
          + (f", {len(rows)} libraries could not be used" if rows else "") + f"; why: {snakemake.output.failures}")
