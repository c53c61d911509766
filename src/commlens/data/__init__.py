"""The campaign dataset: samples and their statistics, collecting raw files into a dataset and its
failure log, merging an interactive run into a campaign's, export, and synthetic datasets of known truth."""
