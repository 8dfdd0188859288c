#!/usr/bin/env bash
# The GPU checks of issue 37 as one device call, for a session that is lent a GPU.
#
# A lent machine has 15 minutes of device time in all (its start included) and 10 minutes a
# command, so this script ends within about 6 minutes, leaving time to run it once more; the
# acceptance item comes first and each step runs under its own `timeout`, so that a slow step
# cannot cost the ones after it:
#   1. benchmarks/gpu_distributed.py --device cuda: `cpgbn fit` twice in one process each (does
#      a GPU chain reproduce itself? its per-document float sums are segment sums) and under
#      torchrun (NCCL for CUDA tensors), the saved models compared;
#   2. the CUDA tests of the PyTorch backend: a sweep, the segment sums repeated, and shards of
#      32-document blocks swept apart on the GPU against the whole corpus; the free-memory
#      check of a fit against the real device (torch.cuda.mem_get_info);
#   3. IMDB's 25,000 training reviews (two blocks on a GPU) timed against one stream for the
#      corpus (--doc-block 1048576): what keying the streams by blocks costs on a GPU, with
#      each kernel's time (--profile: the segment sums are inside draw_w and augment).
#
# The machine's image holds torch, numba, scikit-learn, scipy and tqdm; the package runs from
# src/ (no install). ../shared does not travel, so IMDB goes in a folder git ignores, carried.
# Here, once:
#     echo /.gpu_data/ >> .git/info/exclude
#     mkdir -p .gpu_data/IMDB && cp "$CPGBN_DATA"/IMDB/*.tsv.gz .gpu_data/IMDB/
# then run (device tool): command "bash benchmarks/gpu_session.sh <commit>", carry [".gpu_data"],
# timeout_s 420.  Records come back under $OUT: gpu_distributed.json, imdb_blocks_*.json, and
# session.log (everything printed).  To check the script here without a GPU:
#     DEVICE=cpu DOCS=1100 bash benchmarks/gpu_session.sh test   (steps 1 and 3 then stop at
#     their timeouts: the CPU is far slower)
set -uo pipefail
commit=${1:?usage: gpu_session.sh COMMIT (the commit of the working tree sent)}
device=${DEVICE:-cuda}
out=${OUT:-/tmp/gpu_session}
mkdir -p "$out"
export CPGBN_SOURCE_COMMIT=$commit PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD/benchmarks
export NUMBA_CACHE_DIR=/tmp/numba_cache   # shared by the three fits: numba compiles once

step() { echo; echo "== $(date +%T) $*"; }

checks() {
    step "device"
    nvidia-smi -L
    python3 -c "import torch, numba, sklearn, scipy, tqdm; print('torch', torch.__version__, \
'numba', numba.__version__, 'cuda', torch.cuda.is_available())"

    step "1. one process twice and torchrun on the GPU (150 s at most)"
    timeout 150 python3 benchmarks/gpu_distributed.py --device "$device" --workers 1 \
        --docs "${DOCS:-20000}" --out "$out/gpu_distributed.json"
    echo "rc $?"

    step "2. CUDA tests (60 s at most)"
    timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_torch_backend.py \
        -k "cuda or shards_swept or segment_sums"
    echo "rc $?"
    # the free-memory check through torch.cuda.mem_get_info on a real device: 1M positions
    # x 20,000 kernels need 320 GB, so the fit is refused before anything is uploaded
    timeout 30 python3 -c "
from cpgbn.backends.torch.devices import check_device_memory
from cpgbn.errors import CPGBNInputError
check_device_memory(1000, 200, '$device')
try:
    check_device_memory(1_000_000, 20_000, '$device')
    print('NOT REFUSED')
except CPGBNInputError as e:
    print('refused:', e)"
    echo "rc $?"

    step "3. IMDB, two blocks against one stream (2 x 75 s at most)"
    for block in 16384 1048576; do
        timeout 75 python3 benchmarks/gpu_speed.py --datasets imdb --layers 200 \
            --device "$device" --data-dir .gpu_data --sweeps 3 --warmup 2 --doc-block $block \
            --profile --out "$out/imdb_blocks_$block.json"
        echo "rc $?"
    done
    step "done"
}

checks 2>&1 | tee "$out/session.log"   # a pipeline: the log is whole when the script returns
