#!/bin/bash
# The grid's cells side by side on a lent machine with many cores (one thread each), each in
# its own process; every finished cell is copied to $OUT/cells.  Usage (from the repository
# root, the data carried in .gpu_data):
#   bash studies/classifier_training/device_grid.sh SECONDS CELL[,CELL...] COMMIT
set -u
LIMIT=$1; CELLS=$2; export CPGBN_SOURCE_COMMIT=${3:?commit}
export CPGBN_DATA=$PWD/.gpu_data
mkdir -p "$OUT/cells" "$OUT/logs"
export PYTHONPATH=$PWD/src:$PWD PYTHONUNBUFFERED=1 NUMBA_CACHE_DIR=/tmp/numba_cache
python -c "import torch, cpgbn; print(torch.__version__, cpgbn.__version__)"
# warm numba's cache once before the processes start
timeout 300 python - <<'PY'
from cpgbn.classifier import CPGBNClassifier
t = ["a b c d e", "b c d e f", "e d c b a", "f e d c b"] * 10
CPGBNClassifier(layers=(4,), vocab_size=20, n_epochs=1, batch_size=10, random_state=0,
                validation_fraction=0).fit(t, ["x", "y"] * 20)
PY
for cell in ${CELLS//,/ }; do
  timeout "$LIMIT" python -m studies.classifier_training.grid --cells "$cell" \
    > "$OUT/logs/$cell.log" 2>&1 &
done
wait
cp results/classifier_training/cells/*.json "$OUT/cells/" 2>/dev/null
ls "$OUT/cells"; tail -n 2 "$OUT"/logs/*.log
