# The README's commands. Thin: each target is a `python -m burstbench` / pytest call.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PARAMS ?= papermill_params/local.yaml
STAMP  := $(VENV)/.installed-stamp

.PHONY: report measure figures test test-fast lint install clean lab nbstripout

## build, measure this machine with $(PARAMS), rebuild every figure and table
report: measure figures

## measure: run the measurement notebooks into data/runs/<vm>/<run-id>/
measure: $(STAMP)
	$(PY) -m burstbench run --params $(PARAMS)$(if $(BUDGET), --budget $(BUDGET))

## figures: rebuild figures/ and its index from data/ alone
figures: $(STAMP)
	$(PY) -m burstbench report

## test: the test suite, all of it (Slurm, PBS, Gfarm, the browser where they can run), in
## TEST_WORKERS processes (pytest-xdist): most of its time is spent waiting on jobs,
## clusters and the browser, so more workers than cores. Each takes whole modules
## (--dist loadfile: a module's cluster or JupyterLab is started once), the slowest first
## (tests/conftest.py; --no-loadscope-reorder keeps that order). TEST_WORKERS=0: one process.
TEST_WORKERS ?= 3
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)
test: $(STAMP)
	$(PY) -m pytest $(XDIST)

## test-fast: the edit-test loop: every test but those marked slurm, pbs, browser, gfarm, slow
test-fast: $(STAMP)
	$(PY) -m pytest $(XDIST) -m "not (slurm or pbs or browser or gfarm or slow)"

## lint: ruff, with the rules in pyproject.toml, and mypy on burstbench/ (the hooks a
## benchmark declares are typed: registry.py); CI fails on a finding of either
lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy

## lab: JupyterLab on notebooks/ with this environment's kernel, at http://$(IP):$(PORT)/
## (`make lab PORT=8890` where 8888 is taken). The first time it installs the `lab` extra
## into $(VENV) (only its packages: the project is not rebuilt); it registers nothing outside
## $(VENV). The kernel is the python3 spec that JupyterLab finds, checked to run $(PY) (an
## argv of plain `python` means the server's own Python); else one is installed into $(VENV).
PORT ?= 8888
IP   ?= 127.0.0.1
# root (a container, a cloud VM's default user): JupyterLab refuses to start without this
LAB_ROOT = $(if $(filter 0,$(shell id -u)),--ServerApp.allow_root=True)
lab: $(STAMP)
	@$(PY) -c 'import jupyterlab' 2>/dev/null || { echo "installing the lab extra into $(VENV)"; \
	    $(PY) -m pip install --quiet $$(printf '%s\n' 'import sys' \
	      'toml = "tomllib" if sys.version_info >= (3, 11) else "pip._vendor.tomli"' \
	      'project = __import__(toml, fromlist=["load"]).load(open("pyproject.toml", "rb"))' \
	      'print(*project["project"]["optional-dependencies"]["lab"])' | $(PY) -); }
	@printf '%s\n' 'import os, sys' \
	  'from jupyter_client.kernelspec import KernelSpecManager' \
	  'cmd = KernelSpecManager().get_kernel_spec("python3").argv[0]' \
	  'plain = ("python", "python3", "python%d.%d" % sys.version_info[:2])' \
	  'here = os.path.dirname(os.path.abspath(cmd)) == os.path.join(sys.prefix, "bin")' \
	  'sys.exit(not (cmd in plain or here))' \
	  | $(PY) - 2>/dev/null || $(PY) -m ipykernel install --sys-prefix
	@printf '%s\n' 'import errno, socket, sys' \
	  'ip, port = sys.argv[1], int(sys.argv[2])' \
	  's = socket.socket(socket.getaddrinfo(ip, port, type=socket.SOCK_STREAM)[0][0])' \
	  's.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)' \
	  'try: s.bind((ip, port))' \
	  'except OSError as e: sys.exit(' \
	  '    f"error: port {port} is taken (make lab PORT={port + 2})"' \
	  '    if e.errno == errno.EADDRINUSE else f"error: cannot listen on {ip}:{port}: {e.strerror}")' \
	  | $(PY) - '$(IP)' '$(PORT)'
	$(PY) -m jupyter lab --config=jupyter_server_config.py --ServerApp.root_dir=notebooks \
	    --ServerApp.ip=$(IP) --ServerApp.port=$(PORT) --ServerApp.port_retries=0 $(LAB_ROOT)

## install: virtual environment + editable install (rebuilt when the C or build files change).
## MPI (the mpich wheel) and mpi4py go in first, and the build sees the environment's
## bin/ first on PATH, so CMake's FindMPI takes the wheel's mpicc, not a system one.
## --no-build-isolation builds every dependency that PyPI has only as source with this
## environment's own tools: setuptools and wheel go in first (a Python 3.12 venv has neither).
install: $(STAMP)
$(STAMP): pyproject.toml CMakeLists.txt $(wildcard kernels_ext/*/*.[ch] kernels_ext/*/src/*.[ch] kernels_ext/*/kernel.json)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet 'scikit-build-core>=0.10' cmake ninja 'mpich>=4.1' 'mpi4py>=4.0' \
	    setuptools wheel
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m pip install --quiet --no-build-isolation \
	    -e '.[test,mpi]'
	@# numba compiles the Triad baseline's kernels into its cache here, once, not in the
	@# first minute of a sweep (2 s a server there: a fresh clone's timed share 0.84)
	$(PY) -c 'from kernels_ext.triad import baselines; baselines.warm_numba()' || \
	    echo "numba's Triad kernels were not cached: a sweep compiles them"
	$(MAKE) --no-print-directory nbstripout
	touch $@

## nbstripout: notebooks/ reach git without outputs, execution counts or the kernel's
## language_info (.gitattributes names the filter; this sets it in .git/config, outside
## a git checkout it does nothing): running or autosaving a notebook in JupyterLab leaves
## `git status` clean. Cell ids are kept. A relative VENV (.venv) is named relative to the
## top of the git worktree, where git runs a filter: every worktree of a clone shares its
## .git/config, so each uses its own .venv, not the last one's to run this (a worktree
## with none gets an error per notebook until its make). The index is refreshed first,
## without the filter (cheap; committed notebooks are clean): a fresh clone's first
## `git status` otherwise starts a python per notebook (14 s).
nbstripout:
	@if top=$$(git rev-parse --show-toplevel 2>/dev/null); then \
	  case '$(VENV)' in /*) py='$(PY)' ;; \
	    *) py=$$(realpath -s -m --relative-to="$$top" '$(CURDIR)/$(PY)') ;; esac; \
	  git -c filter.nbstripout.clean= update-index -q --refresh >/dev/null 2>&1; \
	  git config filter.nbstripout.clean \
	    "'$$py' -m nbstripout --keep-id --extra-keys metadata.language_info" && \
	  git config filter.nbstripout.smudge cat && \
	  echo "git filter nbstripout: notebooks/*.ipynb committed without outputs"; fi

clean:
	rm -rf build $(VENV)
