"""Tests for the text pipeline: tokenizer, vocabulary, corpus and file readers."""
import gzip
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpgbn.errors import CPGBNInputError, DataFileError, ModelFormatError
from cpgbn.text import Corpus, Vocabulary, read_labeled, read_lines, tokenize

# ----------------------------------------------------------------------------- tokenizer


def test_tokenize_empty_and_blank():
    assert tokenize("") == []
    assert tokenize(" \t\n\u2028 ") == []


def test_tokenize_lowercases_and_splits_punctuation():
    assert tokenize("Hello, World!") == ["hello", ",", "world", "!"]


@pytest.mark.parametrize("emoticon", [
    ":-)", ":)", ":-(", ":(", ";-)", ";)", ":-D", ":D", ":-P", ":P", ":p", "=)", "=(",
    ":/", ":-/", ":'(", "<3", ":-|", ":|",
])
def test_tokenize_keeps_emoticons(emoticon):
    assert tokenize(f"great {emoticon} movie") == ["great", emoticon.lower(), "movie"]
    assert tokenize(f"great{emoticon}") == ["great", emoticon.lower()]


def test_tokenize_letter_emoticons_need_a_boundary():
    assert tokenize("re:plan") == ["re", ":", "plan"]
    assert tokenize("under <30 min") == ["under", "<", "30", "min"]
    assert tokenize("see http://x.com") == ["see", "http", ":", "//", "x.com"]


@pytest.mark.parametrize("brk", ["<br />", "<br/>", "<br>", "<BR />", "<br >"])
def test_tokenize_html_breaks_become_spaces(brk):
    assert tokenize(f"end.{brk}{brk}Next") == ["end", ".", "next"]


@pytest.mark.parametrize("word", [
    "e-mail", "answers.com", "21st", "don't", "co-writer/director", "j.r.r", "at&t",
    "n't", "'s", "'re", "century's",
])
def test_tokenize_keeps_compound_words(word):
    assert tokenize(f"a {word} b") == ["a", word, "b"]


def test_tokenize_splits_trailing_apostrophe_and_period():
    assert tokenize("the dogs' bone") == ["the", "dogs", "'", "bone"]
    assert tokenize("U.S. troops.") == ["u.s", ".", "troops", "."]
    assert tokenize("'hello'") == ["'", "hello", "'"]


def test_tokenize_punctuation_runs():
    assert tokenize("wait... what?!?? no!!! -- ok") == [
        "wait", "...", "what", "?", "!", "??", "no", "!!!", "--", "ok"]
    assert tokenize("a--b") == ["a", "--", "b"]


def test_tokenize_unicode():
    assert tokenize("Café SÜSS naïve") == ["café", "süss", "naïve"]
    assert tokenize("Москва — ГОРОД") == ["москва", "—", "город"]
    assert tokenize("sisterðcity") == ["sisterðcity"]
    assert tokenize("an… end") == ["an", "…", "end"]
    assert tokenize("東京タワー") == ["東京タワー"]


def test_tokenize_rejects_non_str():
    with pytest.raises(TypeError):
        tokenize(b"bytes")


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_tokenize_properties(text):
    tokens = tokenize(text)
    for token in tokens:
        assert token
        assert not any(c.isspace() for c in token)
        assert token == token.lower()
    # nothing but whitespace (and HTML breaks) is dropped
    if "<" not in text:
        assert "".join(tokens) == "".join(text.lower().split())
    # tokenizing the tokens again changes nothing
    assert tokenize(" ".join(tokens)) == tokens


# ----------------------------------------------------------------------------- vocabulary

DOCS = [["c", "a", "b", "a"], ["b", "d", "a", "e"], ["c", "f"]]  # a:3, b:2, c:2, d,e,f:1


def test_vocabulary_ranks_by_frequency_then_string_order():
    vocab = Vocabulary.build(DOCS, 4)
    assert vocab.tokens == ["<unk>", "a", "b", "c"]  # b before c although c is seen first
    assert len(vocab) == 4
    np.testing.assert_array_equal(vocab.counts, [3, 3, 2, 2])  # d, e, f dropped
    assert vocab.counts.dtype == np.int64


def test_vocabulary_ties_follow_string_order():
    vocab = Vocabulary.build([["z", "y", "x"], ["w"]], 10)
    assert vocab.tokens == ["<unk>", "w", "x", "y", "z"]
    assert len(vocab) == 5  # smaller than asked: only four distinct tokens
    assert vocab.counts[0] == 0


def test_vocabulary_does_not_depend_on_document_order():
    # a corpus sorted by class and cut inside the words seen once: with ties broken by first
    # occurrence the kept rare words would all be the first class's, and "<unk>" a label of
    # the last class; here the vocabulary is a function of the counts alone
    rng = np.random.default_rng(0)
    words = [f"w{i:03d}" for i in rng.permutation(100)]
    docs = [["the", word] for word in words]  # the first 50 documents are one class
    shuffled = [docs[i] for i in rng.permutation(len(docs))]
    vocab = Vocabulary.build(docs, 52)
    assert vocab == Vocabulary.build(shuffled, 52) == Vocabulary.build(docs[::-1], 52)
    assert vocab.tokens == ["<unk>", "the"] + sorted(words)[:50]
    kept_from_first_class = sum(doc[1] in vocab for doc in docs[:50])
    assert 15 < kept_from_first_class < 35


def test_vocabulary_encode_decode_and_oov():
    vocab = Vocabulary.build(DOCS, 3)
    ids = vocab.encode(["a", "b", "zzz", "c"])
    assert ids.dtype == np.int32
    np.testing.assert_array_equal(ids, [1, 2, 0, 0])
    assert vocab.decode(ids) == ["a", "b", "<unk>", "<unk>"]
    assert vocab.id_of("a") == 1 and vocab.id_of("nope") == 0 and vocab.id_of("<unk>") == 0
    assert vocab.encode([]).shape == (0,)
    with pytest.raises(CPGBNInputError, match="out of range"):
        vocab.decode([5])


def test_vocabulary_literal_unk_counts_as_oov():
    vocab = Vocabulary.build([["<unk>", "a", "<unk>"]], 5)
    assert vocab.tokens == ["<unk>", "a"]
    np.testing.assert_array_equal(vocab.counts, [2, 1])


@pytest.mark.parametrize("size", [1, 0, -3])
def test_vocabulary_size_below_two_is_an_error(size):
    with pytest.raises(CPGBNInputError, match=rf"vocab_size must be >= 2, got {size}"):
        Vocabulary.build(DOCS, size)


def test_vocabulary_round_trip_through_json():
    vocab = Vocabulary.build(DOCS, 5)
    restored = Vocabulary.from_dict(json.loads(json.dumps(vocab.to_dict())))
    assert restored == vocab
    assert restored.tokens == vocab.tokens
    np.testing.assert_array_equal(restored.counts, vocab.counts)


def test_vocabulary_from_dict_rejects_garbage():
    good = Vocabulary.build(DOCS, 5).to_dict()
    for bad in ({}, {**good, "version": 99}, {**good, "tokens": ["a", "b"]},
                {**good, "counts": [1]}, {**good, "tokens": ["<unk>", "a", "a", "b", "c"]}):
        with pytest.raises(ModelFormatError):
            Vocabulary.from_dict(bad)


# ----------------------------------------------------------------------------- corpus


def test_corpus_from_texts_builds_vocabulary_and_layout():
    corpus = Corpus.from_texts(["The cat sat.", "", "the DOG!"], vocab_size=3,
                               labels=["x", "y", "x"])
    assert len(corpus) == 3
    assert corpus.tokens.dtype == np.int32 and corpus.offsets.dtype == np.int64
    np.testing.assert_array_equal(corpus.offsets, [0, 4, 4, 7])
    np.testing.assert_array_equal(corpus.lengths, [4, 0, 3])
    assert corpus.vocabulary.tokens[:2] == ["<unk>", "the"]
    assert corpus.vocabulary.decode(corpus.document(2))[0] == "the"
    assert corpus.document(1).shape == (0,)
    assert corpus.label_names == ["x", "y"]
    np.testing.assert_array_equal(corpus.label_codes(), [0, 1, 0])
    np.testing.assert_array_equal(corpus.label_codes(["y", "x", "z"]), [1, 0, 1])


def test_corpus_from_texts_with_given_vocabulary():
    train = Corpus.from_texts(["a b c", "a b"])
    assert len(train.vocabulary) == 4  # every distinct token kept when no vocab_size
    test = Corpus.from_texts(["a z b"], vocabulary=train.vocabulary)
    assert test.vocabulary is train.vocabulary
    assert test.vocabulary.decode(test.document(0)) == ["a", "<unk>", "b"]
    with pytest.raises(CPGBNInputError):
        Corpus.from_texts(["a"], vocabulary=train.vocabulary, vocab_size=10)
    with pytest.raises(CPGBNInputError):
        Corpus.from_texts("a single string")


@given(st.lists(st.text(alphabet="ab c<unk>>!.", max_size=30), max_size=8),
       st.one_of(st.none(), st.integers(2, 6)))
@settings(max_examples=80, deadline=None)
def test_corpus_from_texts_equals_the_token_list_route(texts, vocab_size):
    """from_texts (one document's strings at a time) builds the corpus and vocabulary that
    tokenizing everything first and calling from_token_lists builds."""
    got = Corpus.from_texts(texts, vocab_size=vocab_size)
    want = Corpus.from_token_lists([tokenize(t) for t in texts], vocab_size=vocab_size)
    assert got.vocabulary == want.vocabulary
    np.testing.assert_array_equal(got.tokens, want.tokens)
    np.testing.assert_array_equal(got.offsets, want.offsets)
    again = Corpus.from_texts(texts, vocabulary=got.vocabulary)
    np.testing.assert_array_equal(again.tokens, got.tokens)


def test_corpus_subset_keeps_given_order():
    corpus = Corpus.from_texts(["a", "b b", "c c c", "d d d d"], labels=list("wxyz"))
    part = corpus.subset([3, 0, 3])
    np.testing.assert_array_equal(part.lengths, [4, 1, 4])
    assert part.labels.tolist() == ["z", "w", "z"]
    assert part.vocabulary.decode(part.tokens) == ["d"] * 4 + ["a"] + ["d"] * 4
    mask = np.array([False, True, False, True])
    assert corpus.subset(mask).labels.tolist() == ["x", "z"]
    assert len(corpus.subset([])) == 0
    with pytest.raises(CPGBNInputError):
        corpus.subset([4])


def test_corpus_validation_errors():
    vocab = Vocabulary(["<unk>", "a", "b"])
    ok = Corpus(np.array([1, 2, 0]), np.array([0, 1, 3]), None, vocab)
    assert len(ok) == 2 and ok.labels is None
    with pytest.raises(CPGBNInputError, match="must not decrease"):
        Corpus(np.array([1, 2, 0]), np.array([0, 2, 1, 3]), None, vocab)
    with pytest.raises(CPGBNInputError, match="end at"):
        Corpus(np.array([1, 2, 0]), np.array([0, 2]), None, vocab)
    with pytest.raises(CPGBNInputError, match="start with 0"):
        Corpus(np.array([1, 2, 0]), np.array([1, 3]), None, vocab)
    with pytest.raises(CPGBNInputError, match="out of range"):
        Corpus(np.array([1, 3, 0]), np.array([0, 3]), None, vocab)
    with pytest.raises(CPGBNInputError, match="out of range"):
        Corpus(np.array([1, -1, 0]), np.array([0, 3]), None, vocab)
    with pytest.raises(CPGBNInputError, match="labels"):
        Corpus(np.array([1, 2, 0]), np.array([0, 3]), ["a", "b"], vocab)
    with pytest.raises(CPGBNInputError, match="no labels"):
        ok.label_codes()


def test_corpus_arrays_are_read_only():
    corpus = Corpus.from_texts(["a b"])
    with pytest.raises(ValueError):
        corpus.tokens[0] = 1


# ----------------------------------------------------------------------------- readers


def test_read_labeled_plain_and_gzip(tmp_path):
    content = "pos\tgood film \nneg\tbad\tvery bad\r\nneg\t\n"
    plain = tmp_path / "data.tsv"
    plain.write_text(content, encoding="utf-8")
    packed = tmp_path / "data.tsv.gz"
    with gzip.open(packed, "wt", encoding="utf-8") as handle:
        handle.write(content)
    for path in (plain, packed, str(plain)):
        texts, labels = read_labeled(path)
        assert labels == ["pos", "neg", "neg"]
        assert texts == ["good film ", "bad\tvery bad", ""]


def test_read_lines_plain_and_gzip(tmp_path):
    plain = tmp_path / "docs.txt"
    plain.write_bytes("first\n\nthird ünï\n".encode())
    assert read_lines(plain) == ["first", "", "third ünï"]
    packed = tmp_path / "docs.txt.gz"
    packed.write_bytes(gzip.compress(b"only line, no newline"))
    assert read_lines(packed) == ["only line, no newline"]


@pytest.mark.parametrize("reader", [read_labeled, read_lines])
def test_readers_file_errors(tmp_path, reader):
    with pytest.raises(DataFileError, match="no such file"):
        reader(tmp_path / "missing.tsv")
    with pytest.raises(DataFileError, match="is a directory"):
        reader(tmp_path)
    empty = tmp_path / "empty.tsv"
    empty.write_bytes(b"")
    with pytest.raises(DataFileError, match="empty.tsv: empty file"):
        reader(empty)
    broken = tmp_path / "broken.tsv"
    broken.write_bytes(b"a\tok\nb\tstill ok\nc\tbad \xff byte\n")
    with pytest.raises(DataFileError, match=r"broken.tsv: line 3: not valid UTF-8") as info:
        reader(broken)
    assert "\n" not in str(info.value)
    fake_gz = tmp_path / "fake.tsv.gz"
    fake_gz.write_bytes(b"not gzip at all\n")
    with pytest.raises(DataFileError, match="fake.tsv.gz: not a valid gzip file"):
        reader(fake_gz)


def test_read_labeled_layout_errors(tmp_path):
    no_tab = tmp_path / "no_tab.tsv"
    no_tab.write_text("pos\tfine\nneg\tfine\nthis line has no tab\n", encoding="utf-8")
    with pytest.raises(DataFileError, match=r"no_tab.tsv: line 3: no TAB"):
        read_labeled(no_tab)
    no_label = tmp_path / "no_label.tsv"
    no_label.write_text("pos\tfine\n\ttext without label\n", encoding="utf-8")
    with pytest.raises(DataFileError, match=r"no_label.tsv: line 2: empty label"):
        read_labeled(no_label)
    blank_line = tmp_path / "blank.tsv"
    blank_line.write_text("pos\tfine\n\nneg\tx\n", encoding="utf-8")
    with pytest.raises(DataFileError, match=r"line 2: no TAB"):
        read_labeled(blank_line)
