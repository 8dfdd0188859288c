#!/usr/bin/env bash
# The GPU checks of issue 37 as one device call, for a session that is lent a GPU.
#
# A lent machine has 15 minutes of device time in all (its start included) and 10 minutes a
# command, so this script runs in under 9 minutes, the acceptance item first, each step under
# its own `timeout` so that a slow step cannot cost the ones after it:
#   1. benchmarks/gpu_distributed.py --device cuda: `cpgbn fit` twice in one process each (does
#      a GPU chain reproduce itself? its per-document float sums are segment sums) and
#      under torchrun (NCCL for CUDA tensors), the saved models compared;
#   2. the CUDA tests of the PyTorch backend, and the shards-swept-apart tests on the GPU's
#      16,384-document blocks;
#   3. IMDB's 25,000 training reviews (two blocks on a GPU) timed against one stream for the
#      corpus (--doc-block 1048576): what keying the streams by blocks costs on a GPU, with
#      each kernel's time (--profile: the segment sums are inside draw_w and augment).
#
# The machine's image holds torch, numba, scikit-learn, scipy and tqdm; the package runs from
# src/ (no install). ../shared does not travel, so IMDB goes in a folder git ignores, carried.
# Here, once:
#     echo /.gpu_data/ >> .git/info/exclude
#     mkdir -p .gpu_data/IMDB && cp "$CPGBN_DATA"/IMDB/train.tsv.gz .gpu_data/IMDB/
# then run (device tool): command "bash benchmarks/gpu_session.sh <commit>", carry [".gpu_data"],
# timeout_s 600.  Records come back under $OUT: gpu_distributed.json, imdb_blocks_*.json, and
# session.log (everything printed).  To check the script here without a GPU:
#     DEVICE=cpu DOCS=1100 bash benchmarks/gpu_session.sh test   (step 3 then stops at its timeout)
set -uo pipefail
device=${DEVICE:-cuda}
commit=${1:?usage: gpu_session.sh COMMIT (the commit of the working tree sent)}
out=${OUT:-/tmp/gpu_session}
mkdir -p "$out"
export CPGBN_SOURCE_COMMIT=$commit PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD/benchmarks
export NUMBA_CACHE_DIR=/tmp/numba_cache   # shared by the three fits: numba compiles once
exec > >(tee "$out/session.log") 2>&1

step() { echo; echo "== $(date +%T) $*"; }
step "device"
nvidia-smi -L
python3 -c "import torch, numba, sklearn, scipy, tqdm; print('torch', torch.__version__, \
'numba', numba.__version__, 'cuda', torch.cuda.is_available())"

step "1. one process twice and torchrun on the GPU (240 s at most)"
timeout 240 python3 benchmarks/gpu_distributed.py --device "$device" --workers 1 --docs "${DOCS:-40000}" \
    --out "$out/gpu_distributed.json"
echo "rc $?"

step "2. CUDA tests (120 s at most)"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_torch_backend.py \
    -k "cuda or shards_swept or segment_sums"
echo "rc $?"

step "3. IMDB, two blocks against one stream (2 x 80 s at most)"
for block in 16384 1048576; do
    timeout 80 python3 benchmarks/gpu_speed.py --datasets imdb --layers 200 --device "$device" \
        --data-dir .gpu_data --sweeps 5 --warmup 3 --doc-block $block --profile \
        --out "$out/imdb_blocks_$block.json"
    echo "rc $?"
done
step "done"
