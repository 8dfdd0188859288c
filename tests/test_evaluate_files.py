"""``cpgbn evaluate FILE``: CPGBN features, the supervised CPGBN and the n-gram baselines on a
user's labelled file, by cross-validation (``--cv``) or a test file (``--test``), and every
bad input it promises to report on one line (cpgbn.evaluate.user_files)."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

from cpgbn.cli import main
from cpgbn.datasets import fold_indices
from cpgbn.errors import CPGBNInputError
from cpgbn.evaluate.user_files import DEFAULT_BASELINES, evaluate_labeled, table_text
from helpers import cpgbn_command, write_tsv

TINY = ["--layers", "4", "--iterations", "8", "--burn-in", "4", "--vocab-size", "60", "--quiet",
        "--threads", "1"]
CLASSES = {"sport": ["goal", "match", "team", "coach", "league", "score"],
           "food": ["bread", "soup", "spice", "oven", "flour", "salt"],
           "tech": ["chip", "code", "disk", "laptop", "cable", "screen"]}
FILLER = ["the", "a", "of", "and", "with", "some", "very", "this", "that", "it", "was", "for"]


def labelled_documents(n: int, seed: int) -> tuple[list[str], list[str]]:
    """``n`` short documents of three classes (in turn): 4-6 words of the class's own six among
    4-6 filler words shared by all, in random order."""
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for i in range(n):
        label = list(CLASSES)[i % 3]
        words = list(rng.choice(CLASSES[label], size=int(rng.integers(4, 7))))
        words += list(rng.choice(FILLER, size=int(rng.integers(4, 7))))
        rng.shuffle(words)
        texts.append(" ".join(words))
        labels.append(label)
    return texts, labels


@pytest.fixture(autouse=True)
def _restore_warning_format(monkeypatch):
    # main() installs a one-line warnings.formatwarning for the process; undo it after each test.
    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """train.tsv (240 documents), test.tsv.gz (60) and files for the bad-input cases."""
    import gzip
    root = tmp_path_factory.mktemp("labelled")
    paths = {"train": write_tsv(root / "train.tsv", *labelled_documents(240, seed=0))}
    texts, labels = labelled_documents(60, seed=1)
    paths["test"] = root / "test.tsv.gz"
    with gzip.open(paths["test"], "wt", encoding="utf-8") as handle:
        handle.write("".join(f"{y}\t{x}\n" for x, y in zip(texts, labels)))
    paths["one_class"] = write_tsv(root / "one_class.tsv", texts[:5], ["sport"] * 5)
    paths["few"] = write_tsv(root / "few.tsv", texts[:12], labels[:11] + ["rare"])
    paths["odd_test"] = write_tsv(root / "odd_test.tsv", texts[:6],
                                  labels[:4] + ["music", "music"])
    return paths


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def _models(record: dict) -> dict:
    return {m["name"]: m for m in record["models"]}


# ----------------------------------------------------------------------------- success paths
def test_cv_scores_cpgbn_and_the_baselines_on_the_same_folds(files, tmp_path, capsys):
    out = tmp_path / "cv.json"
    code = main(["evaluate", str(files["train"]), "--cv", "3", "--seeds", "0,1", *TINY,
                 "--json", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    table = printed[printed.index(f"{files['train']}: 240 documents, 3 classes"):]
    for name in ("cpgbn-4 + rbf-svc", *DEFAULT_BASELINES):
        assert any(line.startswith(name) for line in table.splitlines()), name
    record = _json(out)
    assert record["seeds"] == [0, 1] and record["split"]["kind"] == "cv"
    assert record["command"].startswith("cpgbn ") and record["commit"]   # sys.argv: pytest's here
    models = _models(record)
    assert list(models) == ["cpgbn-4 + rbf-svc", *DEFAULT_BASELINES]
    # every model on the same 2 x 3 splits, and those are fold_indices' folds for each seed
    expected = [(seed, f"fold{k}") for seed in (0, 1) for k in range(3)]
    for model in models.values():
        assert [(r["seed"], r["split"]) for r in model["runs"]] == expected
    labels = [line.split("\t", 1)[0] for line in files["train"].read_text().splitlines()]
    for split in record["splits"]:
        rows = fold_indices(labels, int(split["split"][4:]), 3, split["seed"])[1]
        digest = hashlib.sha256(",".join(map(str, rows)).encode()).hexdigest()
        assert split["test_rows_sha256"] == digest and split["n_test"] == 80
    # class-specific words: well above chance (1/3) for every model
    chance = record["majority_accuracy"]
    assert 0.3 < chance < 0.37   # the training folds' majority class on the test fold
    for name in DEFAULT_BASELINES:
        assert models[name]["accuracy_mean"] > 0.9, name
    assert models["cpgbn-4 + rbf-svc"]["accuracy_mean"] > chance + 0.15
    # ECE where there are probabilities (lr, mnb), "-" / None elsewhere
    for name, m in models.items():
        has_proba = name.startswith(("lr-", "mnb-"))
        assert (m["ece_mean"] is not None) == has_proba, name
        assert all((r["ece"] is not None) == has_proba for r in m["runs"])
        if has_proba:
            assert 0 <= m["ece_mean"] <= 1
    assert len(models) + 3 == len(table_text(record).splitlines())


def test_test_file_and_chosen_baselines(files, tmp_path, capsys):
    out = tmp_path / "test.json"
    code = main(["evaluate", str(files["train"]), "--test", str(files["test"]), "--seeds", "3",
                 "--baselines", "lr-bigram,svm-unigram", "--protocol", "paper", *TINY,
                 "--json", str(out)])
    printed = capsys.readouterr().out
    assert code == 0 and f"test set {files['test']} (60 documents)" in printed
    record = _json(out)
    models = _models(record)
    assert list(models) == ["cpgbn-4 + linear-svm", "lr-bigram", "svm-unigram"]
    assert record["test"] == str(files["test"]) and record["n_test"] == 60
    assert record["splits"] == [dict(seed=3, split="test", n_train=240, n_test=60)]
    for m in models.values():
        assert [r["split"] for r in m["runs"]] == ["test"]
        assert m["accuracy_std"] == 0.0
    assert models["lr-bigram"]["accuracy_mean"] > 0.9 and models["svm-unigram"]["ece_mean"] is None


def test_library_record_without_cpgbn(files):
    from cpgbn.text.readers import read_labeled
    train = read_labeled(files["train"])
    record = evaluate_labeled(train, cv=4, seeds=(5,), unsupervised=False,
                              baselines=("mnb-unigram",))
    [model] = record["models"]
    assert model["name"] == "mnb-unigram" and len(model["runs"]) == 4
    assert record["settings"]["ece_bins"] == 15 and record["test"] is None
    with pytest.raises(CPGBNInputError, match="nothing to evaluate"):
        evaluate_labeled(train, cv=2, unsupervised=False, baselines=())
    with pytest.raises(CPGBNInputError, match="not both"):
        evaluate_labeled(train, train, cv=2)


class _StandIn:
    """A classifier with the supervised CPGBN's API: fit(texts, labels), predict,
    predict_proba (columns in ``classes_`` order); it records what it was built with."""

    built: list = []

    def __init__(self, **params):
        self.params = params
        _StandIn.built.append(params)

    def fit(self, texts, labels):
        self.model_ = make_pipeline(CountVectorizer(), LogisticRegression()).fit(texts, labels)
        self.classes_ = self.model_.classes_
        return self

    def predict(self, texts):
        return self.model_.predict(texts)

    def predict_proba(self, texts):
        return self.model_.predict_proba(texts)


def test_supervised_row_built_as_the_classifier_api_says(files, tmp_path, capsys, monkeypatch):
    """The --supervised path builds the classifier as its API says (a stand-in records it)."""
    module = types.ModuleType("cpgbn.classifier")
    module.CPGBNClassifier = _StandIn
    monkeypatch.setitem(sys.modules, "cpgbn.classifier", module)
    _StandIn.built.clear()
    out = tmp_path / "sup.json"
    code = main(["evaluate", str(files["train"]), "--test", str(files["test"]), "--supervised",
                 "--epochs", "7", "--baselines", "none", "--no-unsupervised", "--seeds", "0,1",
                 *TINY, "--json", str(out)])
    assert code == 0 and "supervised cpgbn-4" in capsys.readouterr().out
    common = [dict(layers=(4,), random_state=seed, n_threads=1, progress=False, n_epochs=7)
              for seed in (0, 1)]
    # beside it, its network trained by the cross-entropy alone (the discriminative baseline)
    network = [dict(c, generative=False, classifier_input="hidden") for c in common]
    assert sorted(_StandIn.built, key=repr) == sorted(common + network, key=repr)
    models = _models(_json(out))
    # --no-unsupervised, --baselines none
    assert list(models) == ["supervised cpgbn-4", "one-hot cnn-4"]
    supervised = models["supervised cpgbn-4"]
    assert supervised["kind"] == "supervised" and supervised["accuracy_mean"] > 0.9
    assert 0 <= supervised["ece_mean"] <= 1


def test_supervised_cpgbn_classifier(files, tmp_path, capsys):
    out = tmp_path / "real.json"
    code = main(["evaluate", str(files["train"]), "--test", str(files["test"]), "--supervised",
                 "--epochs", "40", "--learning-rate", "0.01", "--baselines", "none",
                 "--no-unsupervised", *TINY,
                 "--json", str(out)])
    assert code == 0, capsys.readouterr().err
    supervised = _models(_json(out))["supervised cpgbn-4"]
    assert supervised["accuracy_mean"] >= 0.9, supervised["accuracy_mean"]
    assert supervised["ece_mean"] is not None and 0 <= supervised["ece_mean"] <= 1


# ----------------------------------------------------------------------------- bad input
BAD = {  # case -> (arguments after `cpgbn evaluate`, words the one line must hold)
    "one class": (["{one_class}"], ["one_class.tsv", "label 'sport'", "at least 2 classes"]),
    "fewer of a class than folds": (["{few}", "--cv", "3"],
                                    ["few.tsv", "class 'rare' has 1 document(s)", "3 cross"]),
    "test class the training file lacks": (["{train}", "--test", "{odd_test}"],
                                           ["odd_test.tsv", "'music' (2 document(s))",
                                            "not in the training file", "train.tsv"]),
    "missing file": (["{dir}/nothere.tsv", "--cv", "3"], ["nothere.tsv: no such file"]),
    "missing test file": (["{train}", "--test", "{dir}/gone.tsv"], ["gone.tsv: no such file"]),
    "--cv with --test": (["{train}", "--cv", "3", "--test", "{test}"],
                         ["--cv and --test together", "not both"]),
    "cv < 2": (["{train}", "--cv", "1"], ["--cv must be a number of folds >= 2, got 1"]),
    "unknown baseline": (["{train}", "--baselines", "svm-bigram,crf"], ["unknown baseline 'crf'"]),
    "file option with a dataset name": (["trec", "--cv", "3", "--no-unsupervised"],
                                        ["--cv, --[no-]unsupervised: for a labelled file",
                                         "dataset name"]),
    "dataset option with a file": (["{train}", "--save-model", "{dir}/m"],
                                   ["--save-model is for a named dataset"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line(case, files, tmp_path, capsys):
    """Exit status 2, one stderr line ``cpgbn: error: ...`` naming the problem, nothing written;
    every check is made before a model is fitted."""
    args, needles = BAD[case]
    names = {key: str(path) for key, path in files.items()} | {"dir": str(tmp_path)}
    out = tmp_path / "out.json"
    code = main(["evaluate", *[a.format(**names) for a in args], *TINY, "--json", str(out)])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    lines = captured.err.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("cpgbn: error: "), captured.err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert not out.exists()


def test_bad_input_from_the_real_command(files, tmp_path):
    """Three of the cases through the installed command, at once (each costs the ~3 s of
    importing cpgbn): exit status 2, one stderr line, no traceback."""
    names = {key: str(path) for key, path in files.items()} | {"dir": str(tmp_path)}
    running = {}
    for case in ("one class", "test class the training file lacks", "--cv with --test"):
        argv = [a.format(**names) for a in BAD[case][0]]
        running[case] = subprocess.Popen([*cpgbn_command(), "evaluate", *argv, *TINY],
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         text=True)
    for case, process in running.items():
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == 2, (case, stderr)
        assert "Traceback" not in stderr and stdout == "", (case, stdout, stderr)
        lines = stderr.strip("\n").split("\n")
        assert len(lines) == 1 and lines[0].startswith("cpgbn: error: "), (case, stderr)
        for needle in BAD[case][1]:
            assert needle in lines[0], (case, needle, lines[0])


def test_labels_that_differ_only_in_whitespace_are_flagged(tmp_path):
    """'pos' and 'pos ' (a hand-edited file) stay two classes; a classifier fit, a streamed
    classifier's file and `cpgbn evaluate` say so in one warning; distinct labels do not."""
    from cpgbn.classifier import check_labels, file_classes
    from cpgbn.text import TextFile
    from cpgbn.evaluate.user_files import _check_classes
    message = "the labels 'pos' and 'pos ' differ only in surrounding whitespace"
    with pytest.warns(UserWarning, match=f"y: {message}"):
        _, classes = check_labels(["pos", "neg", "pos "], 3, semi_supervised=False)
    assert classes.tolist() == ["neg", "pos", "pos "]
    with pytest.warns(UserWarning, match=f"mine.tsv: {message}"):
        _check_classes(["pos", "neg", "pos "], "mine.tsv")
    path = write_tsv(tmp_path / "edited.tsv", ["good film", "bad film", "fine film"],
                     ["pos", "neg", "pos "])
    with pytest.warns(UserWarning, match=f"edited.tsv: {message}"):
        assert file_classes(TextFile(path))[0].tolist() == ["neg", "pos", "pos "]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_labels(["pos", "neg", " x"], 3, semi_supervised=False)
        _check_classes(["pos", "neg"], "mine.tsv")
