#!/usr/bin/env bash
# One device call: IMDB's Gibbs sweep (K 200, the default token_count, profiled) with the
# multinomial split drawn from sorted uniforms and aggregated per (cell, candidate)
# (this tree's src/) against the unit-by-unit split (the previous commit's src/, copied into
# .gpu_old/src here and carried).  Records come back under $OUT.
#     run: command "bash benchmarks/gpu_unit_counts.sh <commit> <old commit>",
#          carry [".gpu_data", ".gpu_old"], timeout_s 200
set -uo pipefail
new=${1:?usage: gpu_unit_counts.sh COMMIT OLD_COMMIT}
old=${2:?usage: gpu_unit_counts.sh COMMIT OLD_COMMIT}
out=${OUT:-/tmp/gpu_unit_counts}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
{
    nvidia-smi -L
    for which in new old; do
        if [ $which = new ]; then src=$PWD/src; commit=$new; else src=$PWD/.gpu_old/src; commit=$old; fi
        echo "== $(date +%T) $which ($commit)"
        CPGBN_SOURCE_COMMIT=$commit PYTHONPATH=$src:$PWD/benchmarks timeout 80 python3 \
            benchmarks/gpu_speed.py --datasets imdb --layers 200 --data-dir .gpu_data \
            --sweeps 3 --warmup 2 --profile --out "$out/imdb_units_$which.json"
        echo "rc $?"
    done
} 2>&1 | tee "$out/session.log"
