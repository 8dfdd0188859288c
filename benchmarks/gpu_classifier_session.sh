#!/usr/bin/env bash
# The classifier's GPU checks of issue 47 as one device call, for a session that is lent a GPU.
#
# A lent machine has 15 minutes of device time in all (its start included) and 10 minutes a
# command; this script ends within about 7 minutes.  Each step runs under its own `timeout`:
#   1. the CUDA tests of the PyTorch backend (the classifier's encoder runs on it);
#   2. CPGBNClassifier on IMDB with the defaults (three layers, up to 30 epochs with the
#      validation split's early stop), the encoder on the GPU: fit seconds and the 25,000 test
#      predictions (benchmarks/classifier_imdb.py), against the 2-core record of
#      results/speed/classifier_imdb_full.json;
#   3. meanwhile, on 12 of the machine's 16 cores, cells of the acceptance record
#      (studies/classifier_table: SUBJ three layers, seeds 0-2, 10-fold) in six processes of two
#      threads each, every process its own folds and numba cache.  Accuracy does not depend on
#      the machine; the record's fit seconds are taken from the 2-core machine's cells only.
#
# The machine's image holds torch, numba, scikit-learn, scipy and tqdm; the package runs from
# src/ (no install).  ../shared does not travel, so the data go in a folder git ignores, carried:
#     echo /.gpu_data/ >> .git/info/exclude
#     mkdir -p .gpu_data/IMDB .gpu_data/SUBJ
#     cp "$CPGBN_DATA"/IMDB/*.tsv.gz .gpu_data/IMDB/ && cp "$CPGBN_DATA"/SUBJ/* .gpu_data/SUBJ/
# then run (device tool): command "bash benchmarks/gpu_classifier_session.sh <commit>", carry
# [".gpu_data"], timeout_s 540.  Back under $OUT: session.log, classifier_imdb_cuda.json (.md),
# cells/*.json (copy them to results/classifier_table/cells/).  To check the script here
# without a GPU: DEVICE=cpu CELL_SECONDS=60 GPU_SECONDS=60 bash benchmarks/gpu_classifier_session.sh test
set -uo pipefail
commit=${1:?usage: gpu_classifier_session.sh COMMIT (the commit of the working tree sent)}
device=${DEVICE:-cuda}
out=${OUT:-/tmp/gpu_classifier_session}
cell_seconds=${CELL_SECONDS:-400}
gpu_seconds=${GPU_SECONDS:-330}
mkdir -p "$out/cells"
export CPGBN_SOURCE_COMMIT=$commit PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD/benchmarks:$PWD

step() { echo; echo "== $(date +%T) $*"; }

cells() {   # six processes: seeds 0-2 x folds 0-4 / 5-9
    local marker=$out/.start
    touch "$marker"
    for seed in 0 1 2; do
        for folds in 0-4 5-9; do
            NUMBA_CACHE_DIR=/tmp/numba_cells_${seed}_${folds} timeout "$cell_seconds" \
                python3 -m studies.classifier_table.table --datasets subj \
                --layers 200-100-50 --models default,network --seeds "$seed" \
                --folds "$folds" --threads 2 --data-dir .gpu_data \
                > "$out/cells_${seed}_${folds}.log" 2>&1 &
        done
    done
    wait
    find results/classifier_table/cells -name '*.json' -newer "$marker" \
        -exec cp {} "$out/cells/" \;
    echo "cells written: $(ls "$out/cells" | wc -l)"
}

checks() {
    step "device"
    nvidia-smi -L
    python3 -c "import torch, numba, sklearn, scipy, tqdm; print('torch', torch.__version__, \
'numba', numba.__version__, 'cuda', torch.cuda.is_available())"

    step "3. record cells in the background (${cell_seconds} s at most)"
    cells > "$out/cells.log" 2>&1 &
    local cells_pid=$!

    step "1. CUDA tests (60 s at most)"
    NUMBA_CACHE_DIR=/tmp/numba_tests timeout 60 python3 -m pytest -q -p no:cacheprovider \
        tests/test_torch_backend.py -k "cuda or shards_swept or segment_sums"
    echo "rc $?"

    step "2. the classifier on IMDB, encoder on $device (${gpu_seconds} s at most)"
    NUMBA_CACHE_DIR=/tmp/numba_imdb timeout "$gpu_seconds" python3 benchmarks/classifier_imdb.py \
        --data-dir .gpu_data --epochs 30 --threads 4 --device "$device" \
        --out "$out/classifier_imdb_$device.json"
    echo "rc $?"

    step "waiting for the cells"
    wait "$cells_pid"
    cat "$out/cells.log"
    tail -n 3 "$out"/cells_*.log
    step "done"
}

checks 2>&1 | tee "$out/session.log"   # a pipeline: the log is whole when the script returns
