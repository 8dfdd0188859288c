"""Which recorded results were made with the vocabulary tie rule that the fix replaced.

Commit 4dafaef changed how the vocabulary breaks ties in word frequency (first occurrence
before, string order now; see ``vocab_ties.py``).  Wherever the vocabulary is cut below the
number of distinct training words, the kept words changed, so a result recorded by an earlier
commit is one of the old rule, and the reports mark it until it is run again.  Where every
training word is kept (MR at V = 20000 on the authors' split) only the order of tied ids
changed, which gives other random draws from the same model, so those results stand.
"""
import functools
import json
import subprocess

from studies.common.paths import ROOT

FIX_COMMIT = "4dafaef"
MARK = "†"
NOTE = (f"{MARK}: made before commit {FIX_COMMIT} with the old vocabulary tie rule, which kept "
        "other words at this V (`results/vocab_ties/vocab_ties.md`); not yet run again.")


@functools.lru_cache(maxsize=None)
def includes_fix(commit: str) -> bool:
    """Whether ``commit`` (a short hash, perhaps with "+dirty") has the fix in its history."""
    commit = commit.split("+")[0]
    try:
        return subprocess.run(["git", "merge-base", "--is-ancestor", FIX_COMMIT, commit],
                              cwd=ROOT, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@functools.lru_cache(maxsize=None)
def _distinct_training_words() -> dict:
    rows = json.loads((ROOT / "results" / "vocab_ties" / "vocab_ties.json").read_text())["rows"]
    return {row["dataset"]: row["distinct_training_words"] for row in rows}


def vocabulary_changed(dataset: str, words: int, authors_split: bool = True) -> bool:
    """Whether the fix changed the kept words of ``dataset`` at ``words`` words.

    Only the authors' splits were counted; any other training set is taken as changed.
    """
    if not authors_split:
        return True
    return words < _distinct_training_words().get(dataset, float("inf"))


def stale(commit: str, dataset: str, words: int, authors_split: bool = True) -> bool:
    """A result of the old rule: made before the fix at a V where the kept words changed."""
    return not includes_fix(commit) and vocabulary_changed(dataset, words, authors_split)


def stale_record(record: dict) -> bool:
    """:func:`stale` for a result record of ``cpgbn.evaluate`` or an experiment script: its
    ``commit``, ``dataset``, ``protocol``, ``features`` (if any) and ``vocab_size`` (rows) or
    ``vocab_words``."""
    words = record["vocab_words"] if "vocab_words" in record else record["vocab_size"] - 1
    # TREC has one official split, so both protocols train on the authors' split there; a
    # transductive fit builds its vocabulary from the training and test texts together
    authors_split = (record.get("features") != "transductive"
                     and (record["protocol"] == "authors" or record["dataset"] == "trec"))
    return stale(record["commit"], record["dataset"], words, authors_split)


def add_note(lines: list) -> list:
    """Append the note on old-rule results to a report's lines when a row carries the mark."""
    if any(MARK in line for line in lines):
        lines += ["", NOTE]
    return lines
