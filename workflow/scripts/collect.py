# Snakemake script: raw launch files -> results/<campaign>/<campaign>.nc, streamed: one launch's
# samples in memory at a time, the rest on disk beside the dataset until it is written.
import json
from pathlib import Path

from commbench.campaign import campaign_from_config
from commbench.data.collect import build_dataset, stream_raw
from commbench.data.failures import failures, write_failures
from commbench.io.netcdf import write_dataset

# The campaign as the workflow has it (workflow/rules/common.smk): the file with any --config overrides.
campaign = campaign_from_config(snakemake.config, snakemake.params.campaign_file)
libraries = {json.loads(Path(p).read_text())["name"]: json.loads(Path(p).read_text())
             for p in snakemake.input.libraries}
builds = {json.loads(Path(p).read_text())["mpi"]: json.loads(Path(p).read_text())
          for p in snakemake.input.builds}
samples_file = Path(snakemake.output.dataset).with_suffix(".samples.tmp")
refused = []
with open(snakemake.log[0], "w") as log:
    # The input lists the raw files in the campaign's order (library, placement, kernel, launch),
    # which is the order the dataset stores samples in.
    results, seen = stream_raw(snakemake.input.raw, refused, log=log)
    ds = build_dataset(campaign, results, libraries, builds, refused, samples_file=samples_file)
    write_dataset(ds, snakemake.output.dataset)
ds.close()
samples_file.unlink(missing_ok=True)
failed = failures(seen, refused, campaign, libraries, builds)
write_failures(failed, snakemake.output.failures)

status = ds["status"].values.ravel().tolist()
asked = [s for s in status if s != "skipped"]   # cells a kernel's `placements` leave out never ran
print(f"{campaign.name}: {asked.count('ok')} of {len(asked)} launches ok, {ds.sizes['sample']} samples, "
      f"{len(refused)} raw files refused; dataset: {snakemake.output.dataset}")
if failed:
    rows = [entry for entry in failed if "placement" not in entry]   # a library whose env or build failed
    print(f"{len(failed) - len(rows)} launches gave no data"
          + (f", {len(rows)} libraries could not be used" if rows else "") + f"; why: {snakemake.output.failures}")
