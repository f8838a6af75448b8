#!/bin/bash
# The lent accelerator machine measured as a VM of the study, in one call of the workplace's
# `device` tool (its machine has CUDA, PyTorch's Python with numpy, scipy, pandas, numba and
# CuPy, but no papermill, and reaches no package index). Prepare here, once:
#
#   echo /.whl/ >> .git/info/exclude
#   python3.12 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#       --platform manylinux2014_x86_64 --platform manylinux_2_34_x86_64 -d .whl \
#       papermill==2.7.0 ipykernel==7.4.0 nbformat nbclient mpich==5.0.2 mpi4py==4.1.2 pip
#   # then delete from .whl what that machine already has (its package list): aiohttp and
#   # its parts, attrs, certifi, charset-normalizer, click, idna, packaging, psutil,
#   # pygments, python-dateutil, pyyaml, requests, tqdm, typing-extensions, urllib3, tzdata
#   # (29 MB stay: the tree and the wheels must fit the tool's 64 MiB)
#
# The tree travels too, and by 2026-11-29 it was 56 MB, 41 of them data/runs/local: with the
# wheels that is over the tool's 64 MiB. Move that folder out of the checkout for the calls
# (mv data/runs/local /work/hold/, and back after; nothing on that machine reads it).
#
# then run, carrying .whl (ignored):         bash comparisons/lent_machine_run.sh 580
# and to resume in the same lease:           bash comparisons/lent_machine_run.sh 200 RUN_ID
# (untar the first call's run.tgz here first: the run folder travels with the tree). The
# machine goes back 30 s after a call, and a new one costs a start: resume at once. On
# 2026-11-29 the first call took 487 s of a 600 s limit and 519 s of the lease with the
# start, the resumed one 221 s: 146 s of the 15 minutes were left.
# It writes $OUT/log.txt, $OUT/run.tgz (the run folder: untar it here, in the repository's
# root) and, on a first call, $OUT/gpu_triad.json. A processor other than the lent one's
# (16 cores, model 207, 300 MiB L3) is measured under a VM name of its own.
LIMIT=${1:-590}
T0=$(date +%s)
left() { echo $(( LIMIT - ($(date +%s) - T0) )); }
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
echo "== machine"; nproc; lscpu | grep -E "Model name|Model:|Socket|L3|NUMA node\(s\)|^CPU\(s\)"
nvidia-smi -L 2>&1 | head -2; free -g | head -2; df -h /tmp | tail -1
PY=$(command -v python3); echo "python3: $PY $($PY --version 2>&1)"
"$PY" -m venv --without-pip /tmp/venv || exit 1
SP=$(/tmp/venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$PY" -c 'import sys; print("\n".join(p for p in sys.path if p.endswith("-packages")))' > "$SP/base.pth"
W=$(ls .whl/pip-*.whl)
/tmp/venv/bin/python "$W/pip" install -q --no-index --no-deps --no-compile --disable-pip-version-check .whl/*.whl || exit 1
export PATH=/tmp/venv/bin:$(dirname "$PY"):$PATH
T1=$(date +%s)
pip install -q --no-build-isolation --no-deps --disable-pip-version-check -e . || exit 1
echo "== setup $(( $(date +%s) - T0 )) s (build $(( $(date +%s) - T1 )) s)"
python -c 'import kernels_ext, papermill, mpi4py; print("imports ok")' || exit 1
# The same VM as the committed run only where the processor is the same; else its own name.
PARAMS=papermill_params/lent-h100-16c.yaml
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -o 'H[0-9]*' | tr A-Z a-z)
MODEL=$(lscpu | sed -n 's/^Model:[[:space:]]*//p'); L3=$(lscpu | sed -n 's/^L3 cache:[[:space:]]*//p')
if [ "$(nproc)" != 16 ] || [ "$MODEL" != 207 ] || ! echo "$L3" | grep -q "^300 MiB"; then
  VM=lent-$GPU-$(nproc)c
  sed "s/^vm: .*/vm: $VM/" $PARAMS > /tmp/$VM.yaml; PARAMS=/tmp/$VM.yaml; cp $PARAMS "$OUT/"
  echo "== another machine (model $MODEL, L3 $L3): measured as $VM"
fi
[ -n "${2:-}" ] || { echo "== GPU Triad (CuPy)"; timeout 90 "$PY" comparisons/gpu_triad.py --rounds 7 --json "$OUT/gpu_triad.json"; }
RID=${2:-}; [ -n "$RID" ] || RID=$(date -u +%Y%m%dT%H%M%SZ)-$GPU
B=$(( $(left) - 60 )); [ $B -gt 480 ] && B=480
echo "== burstbench run --budget ${B}s --run-id $RID ($(left) s left)"
timeout --signal=INT --kill-after=15 $(( $(left) - 25 )) \
  python -m burstbench run --params $PARAMS --budget ${B}s --run-id "$RID" --quiet
echo "== rc $? after $(( $(date +%s) - T0 )) s"
tar czf "$OUT/run.tgz" data/runs/*/"$RID"
ls -la "$OUT"
