# One GPU lease in one call (a lease gives 15 minutes of device time, the machine's start
# included, and at most 10 minutes a call): checks.sh's decoding checks against the CPU
# (~4 minutes on an H200), then train_throughput.py (issue 53: Transformer-base and -big, bf16,
# eager and compiled; its compiles run at once in child processes), each under a timeout that
# keeps the call inside its limit. Logs under $OUT (what the device tool brings back).
#
# Prepared here, before asking for the machine (both ignored by git, named in the call's carry):
#   make demo && .venv/bin/mtkit average -c work/demo/en-de/demo-run/checkpoint_last.pt \
#       -o .gpu/demo.pt                          # the checks' model: the demo's vocabulary
#   .venv/bin/pip download -q --no-deps --only-binary=:all: --python-version 3.12 -d .whl \
#       sentencex py3langid                      # wheels the device's python lacks (no internet)
# then the device call: command "bash benchmarks/gpu/lease.sh", carry [".gpu", ".whl"].
# A dry run here, on CPU (the checks on 40 lines, throughput on a small preset):
#   DRY=1 PY=.venv/bin/python bash benchmarks/gpu/lease.sh
set -u
export PYTHONUNBUFFERED=1
PY=${PY:-python3}; DRY=${DRY:-0}; O=${OUT:-/tmp/gpuout}; mkdir -p "$O"
LIMIT=${LIMIT:-570}  # seconds for both parts, inside the device tool's 600 s a call
T0=$(date +%s)
left() { echo $((LIMIT - ($(date +%s) - T0))); }
if [ -d .whl ] && [ "$DRY" != 1 ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-}
if [ "$DRY" = 1 ]; then
  CHECKS="DEV=cpu QUICK=1"
  THROUGHPUT="--device cpu --precision fp32 --presets transformer-small --max-tokens 1024"
  THROUGHPUT="$THROUGHPUT --updates 2 --warmup 2 --pairs 2000"
else
  CHECKS=""; THROUGHPUT=""
fi
echo "== checks (decoding), at most 270 s"
env $CHECKS TRAIN=0 MODEL=.gpu/demo.pt OUT="$O" PY="$PY" timeout 270 bash benchmarks/gpu/checks.sh \
  2>&1 | tee "$O/checks.log"
echo "== training throughput, at most $(left) s"
timeout "$(left)" $PY benchmarks/gpu/train_throughput.py $THROUGHPUT 2>&1 | tee "$O/train.log"
echo "== lease script done in $(($(date +%s) - T0)) s"
