# The verbs a newcomer types. Everything else is the workflow's job.
PYTHON ?= python3
VENV ?= .venv
CAMPAIGN ?= config/campaigns/quick.yaml
DATASET ?= $(CAMPAIGN)
PYTEST_ARGS ?=
# Four tests at once on the two cores the suite is checked on (most of a test waits for a workflow, a
# timeout, the machine's lock: measured on a clean clone, pytest took 931-956 s with three, 726-790 s
# with four); those marked `alone` run with none beside them (tests/machine_share.py).
TEST_WORKERS ?= 4

BIN := $(VENV)/bin
READY := $(VENV)/.ready

.PHONY: campaign report test system bench validate versions scale lab dry-run lock clean help

help:
	@echo "make campaign [CAMPAIGN=config/campaigns/<name>.yaml]  run a campaign, write its dataset and report"
	@echo "make report [DATASET=results/<name>/<name>.nc]        regenerate a report from a dataset alone"
	@echo "make test                                             run the test suite"
	@echo "make lab                                              JupyterLab on notebooks/"
	@echo "make dry-run [CAMPAIGN=...]                           show what a campaign would (re)run"
	@echo "make bench                                            harness overhead and cost against a fixed loop"
	@echo "make validate                                         models and detector against known synthetic truth"
	@echo "make versions                                         every MPICH and Open MPI release: built, launched, latency, bandwidth"
	@echo "make scale                                            a centre-sized synthetic campaign: time and memory per step"
	@echo "make docs                                             the documentation site, into build/docs/html"

# The analysis environment: Snakemake, xarray, Jupyter..., Sphinx for the documentation the tests build, and
# commlens itself (editable).
$(READY): envs/analysis.txt envs/docs.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --disable-pip-version-check -q -r envs/analysis.txt -r envs/docs.txt
	$(BIN)/pip install --disable-pip-version-check -q --no-deps -e .
	$(BIN)/python -m compileall -q src
	touch $@

# The workflow with commlens's progress on the console (Snakemake's own output in
# results/<campaign>/logs/snakemake.log), then the summary. Exits 1 after the dataset and report are
# written when a library or launch gave no data (said last).
campaign: $(READY)
	$(BIN)/commlens run $(CAMPAIGN)

# The report alone, from an existing dataset (or a campaign file's dataset); no benchmark reruns.
report: $(READY)
	$(BIN)/commlens report $(DATASET)

dry-run: $(READY)
	$(BIN)/commlens run $(CAMPAIGN) --dry-run

# Bytecode for commlens's own modules first: the tests start hundreds of Pythons that import them, and
# where PYTHONDONTWRITEBYTECODE is set each would compile them afresh (0.3 s a launch).
test: $(READY) system
	$(BIN)/python -m compileall -q src
	$(BIN)/pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

# Debian packages the browser and Slurm tests need (envs/system.txt); a no-op once installed.
system:
	@bash envs/install-system

# Builds the default campaign's libraries through the workflow, then measures the harness itself.
bench: $(READY)
	$(BIN)/snakemake builds --configfile config/campaigns/quick.yaml --quiet
	$(BIN)/python benchmarks/harness_bench.py

# Recovered against true values for the models and the anomaly detector (synthetic curves), then
# compare's false alarms (A/A) and recall of planted changes; then plants on virtual nodes, measured with
# the default campaign's libraries, built first through the workflow as for `make bench`.
validate: $(READY)
	$(BIN)/snakemake builds --configfile config/campaigns/quick.yaml --quiet
	$(BIN)/python benchmarks/ground_truth.py
	$(BIN)/python benchmarks/compare_validation.py
	$(BIN)/python benchmarks/findings_validation.py
	$(BIN)/python benchmarks/pair_faults.py
	$(BIN)/python benchmarks/packet_model.py

# Every wheel release and Debian's packaged MPIs through the workflow, then one line a version.
versions: $(READY) system
	$(BIN)/snakemake results/versions/versions.nc --configfile config/campaigns/versions.yaml
	$(BIN)/python benchmarks/versions.py results/versions/versions.nc

# A 1.28-million-point synthetic campaign through collect, summary, fits, anomalies, compare and the
# report (about 9 GB of disk under results/scale-benchmark, removed afterwards).
scale: $(READY)
	$(BIN)/python benchmarks/scale.py --dir results/scale-benchmark; status=$$?; rm -rf results/scale-benchmark; exit $$status

# Jupyter refuses to run as root unless told: root is who runs it on a container or a test machine, as
# the launcher already lets Open MPI run as root there.
lab: $(READY)
	$(BIN)/jupyter lab notebooks $(if $(filter 0,$(shell id -u)),--allow-root)

# Re-pin the analysis environment from what is installed in $(VENV).
lock: $(READY)
	{ sed -n '/^#/p' envs/analysis.txt; $(BIN)/pip freeze --exclude-editable | grep -v '^commlens' \
	  | grep -v -x -F -f envs/docs.txt; } > envs/analysis.txt.new
	mv envs/analysis.txt.new envs/analysis.txt

# The documentation site (docs/), with Sphinx and MyST from envs/docs.txt (installed with the analysis
# environment). Every page is read afresh (-E), since the reference pages are generated from the code, which
# Sphinx does not watch; warnings are errors, a link to a heading or page that is gone among them.
.PHONY: docs
docs: $(READY)
	$(BIN)/sphinx-build -E -W --keep-going -q -b html -d build/docs/doctrees docs build/docs/html
	@echo "docs: build/docs/html/index.html"

clean:
	rm -rf $(VENV) build .snakemake
