# The README's commands. Thin: each target is a `python -m burstbench` / pytest call.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PARAMS ?= papermill_params/local.yaml
STAMP  := $(VENV)/.installed-stamp

.PHONY: report measure figures test install clean

## build, measure this machine with $(PARAMS), rebuild every figure and table
report: measure figures

## measure: run the measurement notebooks into data/runs/<vm>/<run-id>/
measure: $(STAMP)
	$(PY) -m burstbench run --params $(PARAMS)

## figures: rebuild figures/ and its index from data/ alone
figures: $(STAMP)
	$(PY) -m burstbench report

## test: the test suite
test: $(STAMP)
	$(PY) -m pytest

## install: virtual environment + editable install (rebuilt when the C or build files change).
## MPI (the mpich wheel) and mpi4py go in first, and the build sees the environment's
## bin/ first on PATH, so CMake's FindMPI takes the wheel's mpicc, not a system one.
install: $(STAMP)
$(STAMP): pyproject.toml CMakeLists.txt $(wildcard kernels_ext/*.[ch] kernels_ext/src/*.[ch] kernels_ext/src/*/*.[ch])
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet 'scikit-build-core>=0.10' cmake ninja 'mpich>=4.1' 'mpi4py>=4.0'
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pip install --quiet --no-build-isolation \
	    -e '.[test,mpi]'
	touch $@

clean:
	rm -rf build $(VENV)
