"""Tests for the dataset loaders: data-folder resolution, splits, and the real files."""
import gzip
from collections import Counter

import numpy as np
import pytest

from cpgbn.datasets import DATASETS, dataset_info, load_dataset, resolve_data_dir
from cpgbn.errors import CPGBNInputError, DataFileError
from cpgbn.text import tokenize
from cpgbn.text.readers import read_labeled

# ----------------------------------------------------------------------------- no real data


def test_resolve_data_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("CPGBN_DATA", raising=False)
    with pytest.raises(DataFileError, match="no data directory: pass --data-dir or set CPGBN_DATA"):
        resolve_data_dir()
    assert resolve_data_dir(tmp_path) == tmp_path
    assert resolve_data_dir(str(tmp_path)) == tmp_path
    monkeypatch.setenv("CPGBN_DATA", str(tmp_path))
    assert resolve_data_dir() == tmp_path
    with pytest.raises(DataFileError, match="nowhere"):
        resolve_data_dir(tmp_path / "nowhere")
    monkeypatch.setenv("CPGBN_DATA", str(tmp_path / "gone"))
    with pytest.raises(DataFileError, match="gone: no such CPGBN_DATA directory"):
        resolve_data_dir()
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    with pytest.raises(DataFileError, match="not a directory"):
        resolve_data_dir(a_file)


def test_dataset_info():
    sizes = {name: dataset_info(name)["vocab_size"] for name in DATASETS}
    assert sizes == {"mr": 20000, "subj": 20000, "trec": 8000, "imdb": 30000, "elec": 30000}
    assert dataset_info("MR")["split_sizes"] == {"train": 9600, "test": 1000}
    assert dataset_info("subj")["split_sizes"] == {"train": 9000, "test": 1000}
    assert dataset_info("trec")["n_classes"] == 6
    assert "IMDB/train.tsv.gz" in dataset_info("imdb")["files"]
    assert dataset_info("elec")["files"] == [
        "ELEC/elec-25k-train.txt.tok", "ELEC/elec-test.txt.tok", "ELEC/elec-25k-train.cat",
        "ELEC/elec-test.cat"]
    assert not dataset_info("elec")["downloadable"] and dataset_info("imdb")["downloadable"]


def test_load_dataset_argument_errors(tmp_path):
    with pytest.raises(DataFileError,
                       match="unknown dataset 'reuters'; known: mr, subj, trec, imdb, elec"):
        load_dataset("reuters", data_dir=tmp_path)
    with pytest.raises(CPGBNInputError, match="split"):
        load_dataset("mr", "valid", data_dir=tmp_path)
    for name in ("trec", "imdb"):
        with pytest.raises(DataFileError, match="official train/test split"):
            load_dataset(name, protocol="cv", data_dir=tmp_path)
    with pytest.raises(DataFileError, match="protocol"):
        load_dataset("mr", protocol="random", data_dir=tmp_path)
    with pytest.raises(CPGBNInputError, match="fine"):
        load_dataset("mr", fine=True, data_dir=tmp_path)
    with pytest.raises(DataFileError, match=r"MR/all.tsv: no such file"):
        load_dataset("mr", data_dir=tmp_path)


def _fake_dir(tmp_path, per_label, labels=("pos", "neg")):
    """A data folder with an MR/all.tsv whose texts name their label and row."""
    (tmp_path / "MR").mkdir()
    lines = [f"{label}\t{label} {i}\n" for label in labels for i in range(per_label)]
    (tmp_path / "MR" / "all.tsv").write_text("".join(lines), encoding="utf-8")
    return tmp_path


def test_authors_split_on_a_synthetic_file(tmp_path):
    root = _fake_dir(tmp_path, 5331)
    test_texts, test_labels = load_dataset("mr", "test", data_dir=root)
    train_texts, _ = load_dataset("mr", "train", data_dir=root)
    assert test_texts == [f"{lab} {i}" for lab in ("pos", "neg") for i in range(500)]
    assert train_texts == [f"{lab} {i}" for lab in ("pos", "neg") for i in range(500, 5300)]
    assert Counter(test_labels) == {"pos": 500, "neg": 500}
    assert len(load_dataset("mr", "all", data_dir=root)[0]) == 2 * 5331


def test_authors_split_needs_enough_rows(tmp_path):
    root = _fake_dir(tmp_path, 600)
    with pytest.raises(DataFileError, match="label 'pos' has 600 rows"):
        load_dataset("mr", "train", data_dir=root)


def test_cv_argument_errors(tmp_path):
    root = _fake_dir(tmp_path, 20)
    with pytest.raises(CPGBNInputError, match="fold must be in 0..9"):
        load_dataset("mr", "test", data_dir=root, protocol="cv", fold=10)
    with pytest.raises(CPGBNInputError, match="n_folds"):
        load_dataset("mr", "test", data_dir=root, protocol="cv", n_folds=1)
    with pytest.raises(CPGBNInputError, match="stratified folds"):
        load_dataset("mr", "test", data_dir=root, protocol="cv", n_folds=30, fold=0)


def _elec_dir(root, n_train=6, n_test=4, train_labels=None):
    """A data folder with small ELEC files in Johnson & Zhang's layout: texts that name their
    split and row, labels "1"/"2" alternating, one per line."""
    folder = root / "ELEC"
    folder.mkdir()
    files = (("elec-25k-train.txt.tok", "elec-25k-train.cat", n_train, "train"),
             ("elec-test.txt.tok", "elec-test.cat", n_test, "test"))
    for texts_name, labels_name, n, part in files:
        (folder / texts_name).write_text("".join(f"{part} review {i} , great !\n"
                                                 for i in range(n)))
        labels = train_labels if part == "train" and train_labels is not None else \
            [str(1 + i % 2) for i in range(n)]
        (folder / labels_name).write_text("".join(f"{y}\n" for y in labels))
    return root


def test_elec_loads_the_official_split_from_text_and_label_files(tmp_path):
    root = _elec_dir(tmp_path)
    texts, labels = load_dataset("elec", "train", data_dir=root)
    assert texts == [f"train review {i} , great !" for i in range(6)]
    assert labels == ["1", "2"] * 3
    texts, labels = load_dataset("ELEC", "test", data_dir=root)
    assert texts[0] == "test review 0 , great !" and labels == ["1", "2", "1", "2"]
    texts, labels = load_dataset("elec", "all", data_dir=root)
    assert len(texts) == len(labels) == 10 and texts[6] == "test review 0 , great !"
    with pytest.raises(DataFileError, match="protocol 'cv' is only for mr and subj"):
        load_dataset("elec", protocol="cv", data_dir=root)


def test_elec_label_file_of_another_length_is_one_line_naming_both(tmp_path):
    root = _elec_dir(tmp_path, train_labels=["1", "2", "1"])
    with pytest.raises(DataFileError) as exc:
        load_dataset("elec", "train", data_dir=root)
    message = str(exc.value)
    assert "\n" not in message
    assert "elec-25k-train.cat has 3 labels but" in message
    assert "elec-25k-train.txt.tok has 6 documents" in message
    (root / "ELEC" / "elec-25k-train.cat").write_text("1\n2\n\n1\n2\n1\n")
    with pytest.raises(DataFileError, match=r"elec-25k-train.cat: line 3: empty label"):
        load_dataset("elec", "train", data_dir=root)


def test_missing_elec_says_where_to_put_the_files(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("CPGBN_DOWNLOAD", "1")   # even when downloads are allowed: none for elec
    with pytest.raises(DataFileError) as exc:
        load_dataset("elec", data_dir=tmp_path)
    message = str(exc.value)
    assert message.startswith(f"{tmp_path / 'ELEC' / 'elec-25k-train.txt.tok'}: no such file; "
                              f"cpgbn cannot download elec: put elec-25k-train.txt.tok, ")
    assert message.endswith(f"in {tmp_path / 'ELEC'}") and "riejohnson.com" in message
    monkeypatch.delenv("CPGBN_DATA", raising=False)
    with pytest.raises(DataFileError, match=r"no data directory with elec: put .* in "
                                            r"\$CPGBN_DATA/ELEC/"):
        load_dataset("elec")
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("CPGBN_DATA", str(_elec_dir(data, n_train=2, n_test=2)))
    assert load_dataset("elec", "test")[1] == ["1", "2"]


# ----------------------------------------------------------------------------- real data


@pytest.mark.data
@pytest.mark.parametrize("name, n_train, n_test, balance", [
    ("trec", 5452, 500, None),
    ("mr", 9600, 1000, {"pos": 0.5, "neg": 0.5}),
    ("subj", 9000, 1000, {"subj": 0.5, "obj": 0.5}),
])
def test_real_split_sizes_and_balance(data_dir, name, n_train, n_test, balance):
    for split, expected in (("train", n_train), ("test", n_test)):
        texts, labels = load_dataset(name.upper(), split, data_dir=data_dir)
        assert len(texts) == len(labels) == expected
        assert set(labels) == set(dataset_info(name)["classes"])
        if balance is not None:
            shares = {k: v / expected for k, v in Counter(labels).items()}
            assert shares == balance


@pytest.mark.data
def test_real_mr_authors_split_follows_the_readme(data_dir):
    all_texts, all_labels = read_labeled(data_dir / "MR" / "all.tsv")
    rows = {lab: [i for i, x in enumerate(all_labels) if x == lab] for lab in ("pos", "neg")}
    test_texts, _ = load_dataset("mr", "test", data_dir=data_dir)
    expected = sorted(rows["pos"][:500] + rows["neg"][:500])
    assert test_texts == [all_texts[i] for i in expected]
    train_texts, _ = load_dataset("mr", "train", data_dir=data_dir)
    assert train_texts[0] == all_texts[rows["pos"][500]]
    assert train_texts[-1] == all_texts[rows["neg"][5299]]


@pytest.mark.data
def test_real_trec_fine_and_all(data_dir):
    _, fine = load_dataset("trec", "train", data_dir=data_dir, fine=True)
    assert len(set(fine)) == 50 and all(":" in label for label in fine)
    texts, _ = load_dataset("trec", "all", data_dir=data_dir)
    assert len(texts) == 5952


@pytest.mark.data
def test_real_imdb_line_counts(data_dir):
    for split in ("train", "test"):
        with gzip.open(data_dir / "IMDB" / f"{split}.tsv.gz", "rb") as handle:
            labels = Counter(line.split(b"\t", 1)[0] for line in handle)
        assert labels == {b"pos": 12500, b"neg": 12500}


@pytest.mark.data
@pytest.mark.parametrize("name", ["mr", "subj"])
def test_real_cv_folds_are_disjoint_covering_and_stratified(data_dir, name):
    # Texts stand in for rows; a few texts repeat, so compare multisets of rows.
    n_folds = 5
    all_texts, all_labels = load_dataset(name, "all", data_dir=data_dir)
    everything = Counter(zip(all_texts, all_labels))
    tested = Counter()
    for fold in range(n_folds):
        kwargs = dict(data_dir=data_dir, protocol="cv", fold=fold, n_folds=n_folds, seed=3)
        test = Counter(zip(*load_dataset(name, "test", **kwargs)))
        train = Counter(zip(*load_dataset(name, "train", **kwargs)))
        assert train + test == everything  # a partition of the rows
        per_class = Counter(label for (_, label), n in test.items() for _ in range(n))
        assert max(per_class.values()) - min(per_class.values()) <= 1
        tested += test
    assert tested == everything  # every row is tested exactly once


@pytest.mark.data
def test_real_cv_depends_on_seed_only(data_dir):
    def fold0(seed):
        return load_dataset("mr", "test", data_dir=data_dir, protocol="cv", seed=seed)[0]

    assert fold0(0) == fold0(0)
    assert fold0(0) != fold0(1)
    assert len(fold0(0)) in (1066, 1067)


@pytest.mark.data
def test_real_mr_tokenizes_close_to_its_whitespace_split(data_dir):
    texts, _ = read_labeled(data_dir / "MR" / "all.tsv")
    words = [w for text in texts for w in text.lower().split()]
    same_words = sum(tokenize(w) == [w] for w in words) / len(words)
    same_docs = sum(tokenize(t) == t.lower().split() for t in texts) / len(texts)
    # Pang & Lee's tokenizer leaves quotes and brackets on words ("characters'", "'the",
    # "[a]"), which the rules split off; everything else agrees.
    assert same_words >= 0.99
    assert same_docs >= 0.90
    # the tokenizer only ever splits whitespace tokens further, never joins them
    for text in texts[:2000]:
        assert tokenize(text) == [t for w in text.lower().split() for t in tokenize(w)]


def test_fold_indices_are_the_cv_rows(tmp_path):
    from cpgbn.datasets import fold_indices
    root = _fake_dir(tmp_path, 20)
    texts, labels = load_dataset("mr", "all", data_dir=root)
    for fold in (0, 7):
        train, test = fold_indices(labels, fold, 10, seed=4)
        kwargs = dict(data_dir=root, protocol="cv", fold=fold, n_folds=10, seed=4)
        assert [texts[i] for i in test] == load_dataset("mr", "test", **kwargs)[0]
        assert [texts[i] for i in train] == load_dataset("mr", "train", **kwargs)[0]


def test_transductive_evaluation_fits_once_for_all_folds(tmp_path):
    from cpgbn.evaluate import evaluate
    root = _fake_dir(tmp_path, 20)
    result = evaluate("mr", layers=(3,), protocol="paper", data_dir=root, n_iter=4, burn_in=2,
                      vocab_size=50, features="transductive")
    assert result["features"] == "transductive"
    runs = result["runs"]
    assert [r["split"] for r in runs] == [f"fold{i}" for i in range(10)]
    assert len({r["fit_seconds"] for r in runs}) == 1  # one fit shared by the folds
    assert all(r["n_train"] + r["n_test"] == 40 for r in runs)
    assert 0.0 <= result["accuracy_mean"] <= 1.0
    # every run records the training chain's mixing: one share per sweep, 2 averaged
    assert all(len(r["mixing"]["moved"]) == 4 and r["mixing"]["n_collected"] == 2 for r in runs)


def test_evaluate_passes_model_params_and_rejects_bad_ones(tmp_path, monkeypatch):
    from cpgbn import model as model_mod
    from cpgbn.errors import CPGBNInputError
    from cpgbn.evaluate import evaluate
    root = _fake_dir(tmp_path, 20)
    seen = []
    original = model_mod.CPGBN.fit_transform

    def spy(self, X, y=None):
        seen.append(self.sample_r)
        return original(self, X, y)

    monkeypatch.setattr(model_mod.CPGBN, "fit_transform", spy)
    kwargs = dict(layers=(3,), protocol="paper", data_dir=root, n_iter=4, burn_in=2, vocab_size=50)
    result = evaluate("mr", model_params={"sample_r": False}, **kwargs)
    assert seen == [False] * 10 and result["model_params"] == {"sample_r": False}
    with pytest.raises(CPGBNInputError, match="unknown CPGBN parameters.*no_such"):
        evaluate("mr", model_params={"no_such": 1}, **kwargs)
    with pytest.raises(CPGBNInputError, match="may not set.*eta"):
        evaluate("mr", model_params={"eta": 0.1}, **kwargs)
    with pytest.raises(CPGBNInputError, match="for CPGBN and PGBN"):
        evaluate("mr", model="lda", model_params={"sample_r": False}, **kwargs)
    with pytest.raises(CPGBNInputError, match="must be a dict"):
        evaluate("mr", model_params=[("sample_r", False)], **kwargs)


def test_evaluate_fits_a_given_subclass_of_the_model(tmp_path):
    """``estimator``: a subclass of CPGBN is built with evaluate's parameters in CPGBN's place
    and named in the record; anything else is refused."""
    from cpgbn import CPGBN
    from cpgbn.errors import CPGBNInputError
    from cpgbn.evaluate import evaluate
    root = _fake_dir(tmp_path, 20)
    built = []

    class Counting(CPGBN):
        def fit_transform(self, X, y=None):
            built.append((type(self), self.n_iter))
            return super().fit_transform(X, y)

    kwargs = dict(layers=(3,), protocol="paper", data_dir=root, n_iter=4, burn_in=2, vocab_size=50,
                  features="transductive")
    result = evaluate("mr", estimator=Counting, **kwargs)
    assert built == [(Counting, 4)]
    assert result["estimator"].endswith("Counting") and "estimator" not in evaluate("mr", **kwargs)
    for model, estimator in [("pgbn", CPGBN), ("cpgbn", len), ("lda", Counting)]:
        with pytest.raises(CPGBNInputError, match="estimator must be a subclass"):
            evaluate("mr", model=model, estimator=estimator, **kwargs)


@pytest.mark.parametrize("features", ["inductive", "inferred"])
def test_evaluate_takes_training_features_from_the_chosen_source(tmp_path, monkeypatch, features):
    """inductive: the classifier is trained on the training chain's averages; inferred: on the
    training texts inferred again with the globals fixed, as the test texts are."""
    from cpgbn.evaluate import evaluate, protocols
    root = _fake_dir(tmp_path, 20)
    fitted = []

    class Spy:
        def __init__(self, kind, seed):
            self.inner = protocols.SVC()

        def fit(self, x, y):
            fitted.append(np.array(x))
            self.inner.fit(x, y)
            return self

        def score(self, x, y):
            return self.inner.score(x, y)

    monkeypatch.setattr(protocols, "make_classifier", Spy)
    models = []
    original = protocols._make_model

    def keep(*args, **kwargs):
        models.append(original(*args, **kwargs))
        return models[-1]

    monkeypatch.setattr(protocols, "_make_model", keep)
    result = evaluate("mr", layers=(3,), protocol="paper", data_dir=root, n_iter=6, burn_in=3,
                      vocab_size=50, features=features)
    assert result["features"] == features
    assert len(models) == len(fitted) == 10  # one fit per fold
    for fold, (model, train_features) in enumerate(zip(models, fitted)):
        x_train, _ = load_dataset("mr", "train", data_dir=root, protocol="cv", fold=fold,
                                  n_folds=10, seed=0)
        expected = model.transform(x_train) if features == "inferred" else model.train_features_
        np.testing.assert_array_equal(train_features, expected)
        if features == "inferred":  # re-inferred features are a different chain from the fit's
            assert not np.array_equal(train_features, model.train_features_)


def test_evaluate_rejects_unknown_feature_source(tmp_path):
    from cpgbn.errors import CPGBNInputError
    from cpgbn.evaluate import evaluate
    with pytest.raises(CPGBNInputError, match="features must be one of"):
        evaluate("mr", data_dir=_fake_dir(tmp_path, 20), features="chain")
