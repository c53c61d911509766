rule collect:
    """Every launch of the campaign into one dataset; failed launches are kept as failed cells."""
    input:
        raw=[raw_file(*run) for run in CAMPAIGN.runs()],
        libraries=[library_record(m) for m in CAMPAIGN.mpi_names],
        builds=[build_record(m) for m in CAMPAIGN.mpi_names],
    output:
        # update(): Snakemake would delete them before the job; collection keeps them in history/.
        dataset=update(DATASET),
        failures=update(RESULTS / "failures.jsonl"),
    params:
        # The file, and the --config overrides when there are: the dataset's campaign_file attribute.
        campaign_file=CAMPAIGN.source,
        config_hash=CAMPAIGN.config_hash,
    log:
        RESULTS / "logs" / "collect.log",
    script:
        "../scripts/collect.py"
