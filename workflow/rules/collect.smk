rule collect:
    """Every launch of the campaign into one dataset; failed launches are kept as failed cells."""
    input:
        raw=RAW_FILES,
        libraries=[library_record(m) for m in CAMPAIGN.mpi_names],
        builds=[build_record(m) for m in CAMPAIGN.mpi_names],
        # Launches until decided: the looks that chose the rounds, kept in the dataset for Methods.
        decisions=decisions_record,
        # The campaign's bisections (bisect:), run by commlens run: what each found, for the report.
        bisections=bisections_record,
    output:
        # Snakemake deletes them before the job; the collection finds them under their held names and
        # keeps them in history/ (commlens.io.archive). Where the collection fails, they get their names
        # back when the workflow ends, and the next run collects again.
        dataset=DATASET,
        failures=RESULTS / "failures.jsonl",
    params:
        # The file, and the --config overrides when there are: the dataset's campaign_file attribute.
        campaign_file=CAMPAIGN.source,
        config_hash=CAMPAIGN.config_hash,
        # Why the dataset does not hold what its raw files hold now, where it does not (commlens.io.collected):
        # a value no run had, so that Snakemake collects again whatever the files' times say.
        out_of_date=DATASET_OUT_OF_DATE,
    log:
        RESULTS / "logs" / "collect.log",
    script:
        "../scripts/collect.py"
