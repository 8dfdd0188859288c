#!/usr/bin/env bash
# Run Table 4 cells (or another resumable study: STUDY=<module>) in the background, yielding
# the CPU to foreground work.
#
#   setsid nohup bash studies/table4/run_in_background.sh TREE LOG -- <table4 arguments> \
#       >/dev/null 2>&1 < /dev/null &
#   STUDY=studies.long_documents.levers setsid nohup bash studies/table4/run_in_background.sh \
#       TREE LOG -- --data-dir ../shared/data >/dev/null 2>&1 < /dev/null &
#
# TREE: the source tree whose code runs the cells (a worktree at a fixed commit, so that edits
# to this checkout do not change a running study); LOG: where its output goes.
# `nice` alone does not yield the CPU here: setsid starts a new scheduler autogroup, and nice
# only orders tasks inside one group (a nice-19 job took a whole core from the test suite).
# Setting the autogroup's nice value does (Linux: /proc/self/autogroup).
set -euo pipefail
tree=$1; log=$2; shift 2; [ "${1:-}" = "--" ] && shift
# only in a group of its own (started by setsid): otherwise the group is the caller's
# terminal session, whose every later command would yield too
if [ "$(ps -o sid= -p $$ | tr -d ' ')" = "$$" ]; then
  echo 19 > /proc/self/autogroup 2>/dev/null || true
else
  echo "run_in_background.sh: not started by setsid; the CPU is not yielded" >&2
fi
cd "$tree"
export PYTHONPATH="$tree/src:$tree" OMP_NUM_THREADS=1 NUMBA_CACHE_DIR="${NUMBA_CACHE_DIR:-/tmp/numba_table4}"
exec nice -n 19 "${PYTHON:-python}" -m "${STUDY:-studies.table4.table4}" "$@" >> "$log" 2>&1
