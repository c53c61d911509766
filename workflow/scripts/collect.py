# Snakemake script: raw launch files -> results/<campaign>/<campaign>.nc
import json
from pathlib import Path

from commbench.campaign import load_campaign
from commbench.collect import build_dataset, failures, read_all, write_dataset, write_failures

campaign = load_campaign(snakemake.params.campaign_file)
libraries = {json.loads(Path(p).read_text())["name"]: json.loads(Path(p).read_text())
             for p in snakemake.input.libraries}
builds = {json.loads(Path(p).read_text())["mpi"]: json.loads(Path(p).read_text())
          for p in snakemake.input.builds}
with open(snakemake.log[0], "w") as log:
    results, refused = read_all(snakemake.input.raw, on_error="record", log=log)
ds = build_dataset(campaign, results, libraries, builds, refused)
write_dataset(ds, snakemake.output.dataset)
failed = failures(results, refused, campaign, libraries, builds)
write_failures(failed, snakemake.output.failures)

status = ds["status"].values.ravel().tolist()
asked = [s for s in status if s != "skipped"]   # cells a kernel's `placements` leave out never ran
print(f"{campaign.name}: {asked.count('ok')} of {len(asked)} launches ok, "
      f"{len(refused)} raw files refused; dataset: {snakemake.output.dataset}")
if failed:
    print(f"{len(failed)} launches gave no data; why: {snakemake.output.failures}")
