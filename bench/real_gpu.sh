#!/usr/bin/env bash
# berth on a real NVIDIA GPU (issue 26), in one command, under 10 minutes, no network:
#
#     bash bench/real_gpu.sh            # on the GPU machine, as root; output in $OUT
#     bash bench/real_gpu.sh --fake     # rehearsal against tests/fakenvml (no GPU needed)
#
# 1. install berth from this checkout without network (pip -e, no deps, no build isolation;
#    PYTHONPATH points at the checkout as well, so a failed install costs nothing);
# 2. bench/real_gpu.py --out $OUT: each check in a process of its own with its own limit,
#    results.json and summary.md rewritten after each;
# 3. pytest tests/gpu (skipped, with the reason, where no driver answers; with --fake they run
#    against the fake library: BERTH_GPU_REHEARSAL=fake).
# $OUT (default bench/out/real-gpu) gets: run.log (everything printed), results.json,
# summary.md, pytest.xml. PYTHON picks the interpreter (default python3: on the GPU machine
# the one that holds PyTorch, nvidia-ml-py and psutil).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/bench/out/real-gpu}
PY=${PYTHON:-python3}
FAKE=()
if [ "${1:-}" = "--fake" ]; then
    FAKE=(--fake)
    export BERTH_GPU_REHEARSAL=fake BERTH_FAKE_SMI=${BERTH_FAKE_SMI:-0}
fi
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
start=$SECONDS
{
    echo "== $(date -u '+%F %T') UTC: berth real-GPU run ${FAKE[*]:-} on $(hostname), $($PY -V 2>&1)"
    command -v nvidia-smi >/dev/null && nvidia-smi -L
    echo "== install (no network)"
    timeout -k 5 30 "$PY" -m pip install -q --no-deps --no-build-isolation --no-index -e . \
        || echo "pip install failed (exit $?): berth runs from PYTHONPATH=$PWD"
    "$PY" -c 'import berth, pynvml, psutil; print("berth", berth.__version__, "from", berth.__file__)'
    echo "== bench/real_gpu.py ($((SECONDS - start)) s so far)"
    timeout -k 10 360 "$PY" bench/real_gpu.py --out "$OUT" --budget 330 "${FAKE[@]}"
    echo "real_gpu.py exit $?"
    echo "== pytest tests/gpu ($((SECONDS - start)) s so far)"
    timeout -k 10 180 "$PY" -m pytest -q -p no:cacheprovider --junitxml "$OUT/pytest.xml" tests/gpu
    echo "pytest exit $?"
    echo "== done in $((SECONDS - start)) s; summary: $OUT/summary.md"
    cat "$OUT/summary.md" 2>/dev/null | head -40
} 2>&1 | tee "$OUT/run.log"
