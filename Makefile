# One entry point for newcomers and CI. Needs only Python 3.10+ and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo setup check test fuzz docs clean

# Set everything up, run ray-lint on the bundled examples (findings are expected there), then
# verify one of them on a local Ray cluster (this runs the example's code).
demo: $(STAMP)
	$(BIN)/ray-lint check examples/ || test $$? -eq 1
	$(BIN)/ray-lint verify examples/get_in_loop.py --repeat 2 || test $$? -eq 1

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --editable '.[test]'
	touch $(STAMP)

# The fast tier, to run after editing a rule (under 30 s on 2 cores): every rule's examples, the eval
# files, the model, the engine, configuration, `# noqa` and notebook mapping, the generated docs,
# message lengths and the fix harness. No Ray cluster, no packaging, no end-to-end runs of the command: `make test` runs those too.
CHECK_TESTS := tests/test_rule_examples.py tests/test_eval_files.py tests/test_model.py tests/test_engine.py \
	tests/test_config.py tests/test_noqa.py tests/test_notebook_mapping.py tests/test_docs.py \
	tests/test_sizes.py tests/test_project.py tests/test_architecture.py tests/test_messages.py tests/test_fixes.py \
	tests/test_libraries.py

check: $(STAMP)
	$(BIN)/python -m pytest -q $(CHECK_TESTS)

# Every test: unit, examples of every rule, the command line end to end, packaging.
test: $(STAMP)
	$(BIN)/python -m pytest

# Property-based fuzzing of the engine, long profile (the short one runs with `make test`).
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=fuzz $(BIN)/python -m pytest tests/test_fuzz.py

# Regenerate docs/rules/ from the rule modules (a test fails when they are stale).
docs: $(STAMP)
	$(BIN)/python -m ray_lint.docs

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis
