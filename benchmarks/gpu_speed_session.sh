#!/usr/bin/env bash
# The GPU timing table of docs/gpu.md as one device call: benchmarks/gpu_speed.py on MR, TREC,
# SUBJ and IMDB, 1-3 layers, at token_count 200 (the table's earlier protocol: 20 warm-up
# sweeps, medians of 7) and at the library's default 800 (10 warm-up sweeps, medians of 5, to
# fit the call), each with --profile (per-step time and peak device memory).  The data goes in
# .gpu_data/ (ignored, carried; see gpu_session.sh); records come back under $OUT:
#     run: command "bash benchmarks/gpu_speed_session.sh <commit>", carry [".gpu_data"],
#          timeout_s 450
set -uo pipefail
commit=${1:?usage: gpu_speed_session.sh COMMIT}
out=${OUT:-/tmp/gpu_speed_session}
mkdir -p "$out"
export CPGBN_SOURCE_COMMIT=$commit PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD/benchmarks
{
    nvidia-smi -L
    echo "== $(date +%T) token_count 200"
    timeout 190 python3 benchmarks/gpu_speed.py --datasets mr,trec,subj,imdb --profile \
        --data-dir .gpu_data --token-count 200 --out "$out/gpu_speed.json"
    echo "rc $?"
    echo "== $(date +%T) token_count 800"
    timeout 210 python3 benchmarks/gpu_speed.py --datasets mr,trec,subj,imdb --profile \
        --data-dir .gpu_data --warmup 10 --sweeps 5 --out "$out/gpu_speed_800.json"
    echo "rc $?"
    echo "== $(date +%T) done"
} 2>&1 | tee "$out/session.log"
