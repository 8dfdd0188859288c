#!/usr/bin/env bash
# Run studies/prior_study/prior_study.py configurations in parallel on one GPU machine (the PyTorch
# sampler), each process with its own cells file, then merge them into $OUT/prior.json.
# Run from the repository root.  Usage: studies/prior_study/gpu_prior_study.sh OUTDIR SEEDS "cfgA;cfgB" "cfgC" ...   (one process per group)
set -u
out=$1; seeds=$2; shift 2
mkdir -p "$out/parts"
i=0
for group in "$@"; do
  i=$((i + 1))
  (IFS=';'; for cfg in $group; do
     timeout "${STUDY_TIMEOUT:-480}" python3 -m studies.prior_study.prior_study --only "$cfg" --seeds "$seeds" \
       --device cuda --out "$out/parts/p$i.json"
   done) > "$out/parts/p$i.log" 2>&1 &
done
wait
for f in "$out"/parts/p*.json; do python3 -m studies.prior_study.prior_study --out "$out/prior.json" --merge "$f"; done
cat "$out"/parts/p*.log | grep -v Warning > "$out/prior.log"
rm -rf "$out/parts"
