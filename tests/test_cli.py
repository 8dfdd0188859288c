"""The ``cpgbn`` command line: success paths and every user error it promises to report.

Commands run in-process through ``cpgbn.cli.main`` (fast; numba kernels are compiled once per
session); one test runs the real executable to check exit codes and stderr end to end.

Every user error must: exit with status 2, print exactly one stderr line that starts with
``cpgbn: error:`` and names the problem, print no traceback, and leave nothing behind (no
output file or model directory, not even a hidden temporary one).
"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from cpgbn import CPGBN
from cpgbn.cli import main
from helpers import cpgbn_command, files_under, random_labeled, write_tsv

N_DOCS, K = 60, 4
TINY = ["--layers", str(K), "--iterations", "6", "--burn-in", "3", "--vocab-size", "30",
        "--quiet", "--threads", "1"]


@pytest.fixture(autouse=True)
def _restore_warning_format(monkeypatch):
    # main() installs a one-line warnings.formatwarning for the process; undo it after each test.
    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory) -> Path:
    """60 documents of 5-12 words from a 40-word vocabulary, two labels."""
    texts, labels = random_labeled(N_DOCS, seed=0)
    return write_tsv(tmp_path_factory.mktemp("data") / "train.tsv", texts, labels)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, corpus_file) -> Path:
    """A model fitted once through the CLI; tests copy it before damaging it."""
    out = tmp_path_factory.mktemp("models") / "model"
    assert main(["fit", str(corpus_file), "--out", str(out), *TINY]) == 0
    return out


def _copy_model(model_dir: Path, dest: Path) -> Path:
    shutil.copytree(model_dir, dest)
    return dest


def _assert_user_error(capsys, code, *needles: str) -> str:
    """Exit status 2, one stderr line 'cpgbn: error: ...' containing every needle, no traceback."""
    out, err = capsys.readouterr()
    assert code == 2, f"exit status {code}, stderr: {err!r}"
    assert "Traceback" not in err and "Traceback" not in out
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1, f"expected one stderr line, got {err!r}"
    assert lines[0].startswith("cpgbn: error: ")
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    return lines[0]


def _fit_fails(capsys, tmp_path, data_args, *needles):
    """``cpgbn fit <data_args> --out tmp/model`` fails as a user error and writes nothing."""
    before = files_under(tmp_path)
    code = main(["fit", *data_args, "--out", str(tmp_path / "model"), *TINY])
    line = _assert_user_error(capsys, code, *needles)
    assert files_under(tmp_path) == before, "a failed fit left files behind"
    return line


# ----------------------------------------------------------------------------- success paths

def test_fit_topics_transform(tmp_path, capsys, corpus_file):
    model = tmp_path / "model"
    assert main(["fit", str(corpus_file), "--out", str(model), *TINY]) == 0
    out, err = capsys.readouterr()
    assert f"on {N_DOCS} documents" in out and "saved to" in out
    # the log-likelihood's scale depends on the observation model, so the line names it
    assert "log-likelihood per token" in out and "pseudo-counts per token)" in out
    assert "Traceback" not in err
    assert sorted(p.name for p in model.iterdir()) == ["arrays.npz", "model.json", "timings.json"]

    assert main(["topics", str(model), "--top", "3"]) == 0
    out, _ = capsys.readouterr()
    assert out.count("kernel ") == K  # one block per kernel, most used first
    # each named by the windows it explains in the training documents, with their counts
    assert out.count("in corpus: ") == K and out.count("x, ") >= K
    assert "best phrase: " not in out   # the per-column view on request
    assert main(["topics", str(model), "--columns"]) == 0
    out = capsys.readouterr().out
    assert out.count("best phrase: ") == K
    # the columns and best phrases hide it unless --show-unknown
    assert "<unk>" not in "\n".join(line for line in out.splitlines()
                                    if not line.startswith(("kernel ", "   in corpus: ")))
    assert main(["topics", str(model), "--kernels", "2"]) == 0
    assert capsys.readouterr().out.count("kernel ") == 2

    features = tmp_path / "features.npy"
    assert main(["transform", str(model), str(corpus_file), "--out", str(features),
                 "--quiet", "--threads", "1"]) == 0
    assert f"wrote features of {N_DOCS} documents x {K}" in capsys.readouterr().out
    x = np.load(features, allow_pickle=False)
    assert x.shape == (N_DOCS, K)
    assert np.isfinite(x).all() and (x >= 0).all()
    # the CLI computes exactly what the library computes from the saved model
    texts = [line.split("\t", 1)[1] for line in corpus_file.read_text().splitlines()]
    np.testing.assert_array_equal(x, CPGBN.load(model).transform(texts))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp leftovers


def test_transform_lines_keeps_empty_line(tmp_path, capsys, model_dir):
    lines = ["w01 w02 w03 w04", "w05 w06 w07", "", "w10 w11 w12 w13 w14", "w20"]
    data = tmp_path / "docs.txt"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "f.npy"
    with pytest.warns(UserWarning, match=r"2 document\(s\) shorter than filter_width=3"):
        assert main(["transform", str(model_dir), str(data), "--format", "lines",
                     "--out", str(out), "--quiet", "--threads", "1"]) == 0
    x = np.load(out, allow_pickle=False)
    assert x.shape == (len(lines), K)  # the empty line keeps its row
    assert np.isfinite(x).all()
    # rows are the input lines in order: identical to the library on the same list of texts
    with pytest.warns(UserWarning, match="shorter than filter_width"):
        expected = CPGBN.load(model_dir).transform(lines)
    np.testing.assert_array_equal(x, expected)


def test_a_torchrun_worker_without_distributed_is_refused(tmp_path, capsys, monkeypatch,
                                                          corpus_file, model_dir):
    """Under torchrun without --distributed, every worker would run the whole command alone
    and write the same output: one line, status 2, nothing written (a command that does not
    run distributed says to start it without torchrun)."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    for argv, fix in (
            (["fit", str(corpus_file), "--out", str(tmp_path / "m"), *TINY], "add --distributed"),
            (["transform", str(model_dir), str(corpus_file), "--out", str(tmp_path / "f.npy")],
             "add --distributed"),
            (["evaluate", str(corpus_file), "--json", str(tmp_path / "e.json")],
             "cpgbn evaluate runs in one process: start it without torchrun")):
        assert main(argv) == 2
        assert capsys.readouterr().err.strip() == (
            f"cpgbn: error: this process is one of 2 workers started by torchrun "
            f"(WORLD_SIZE=2) but --distributed is not set: each would run `cpgbn {argv[0]}` on "
            f"the whole data alone and write the same output; {fix}")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("WORLD_SIZE", "1")   # torchrun with one worker: a plain run
    assert main(["transform", str(model_dir), str(corpus_file), "--out",
                 str(tmp_path / "f.npy"), "--quiet"]) == 0


def test_short_documents_are_padded_with_a_warning(tmp_path, capsys, monkeypatch):
    # Documents shorter than the filter width (3) are not an error: they are padded, and the
    # CLI says so in one "cpgbn: warning:" line.  pytest records warnings instead of printing
    # them, so route them to stderr the way Python's default showwarning does.
    def show(message, category, filename, lineno, file=None, line=None):
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    monkeypatch.setattr(warnings, "showwarning", show)
    data = write_tsv(tmp_path / "short.tsv", ["w01", "w02 w03", "w03", "w01 w02", "w04 w05 w06"],
                     ["a", "b", "a", "b", "a"])
    model = tmp_path / "model"
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        code = main(["fit", str(data), "--out", str(model), "--filter-width", "3", *TINY])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Traceback" not in err
    warning_lines = [ln for ln in err.splitlines() if ln.startswith("cpgbn: warning: ")]
    assert len(warning_lines) == 1, err
    assert "4 document(s) shorter than filter_width=3" in warning_lines[0]
    assert "cpgbn: error" not in err
    assert (model / "model.json").is_file()
    fitted = CPGBN.load(model)
    assert fitted.globals_.D.shape[1] == 3
    assert fitted.n_train_tokens_ == 9  # padding adds no tokens


@pytest.mark.parametrize("command", ["fit", "transform", "topics", "evaluate"])
def test_help(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    assert f"usage: cpgbn {command}" in capsys.readouterr().out


def test_evaluate_with_inferred_training_features(tmp_path, capsys):
    (tmp_path / "MR").mkdir()
    rows = [f"{label}\t{label} word{i % 5} other{i % 3}\n" for label in ("pos", "neg") for i in range(20)]
    (tmp_path / "MR" / "all.tsv").write_text("".join(rows), encoding="utf-8")
    out = tmp_path / "mr.json"
    code = main(["evaluate", "mr", "--protocol", "paper", "--data-dir", str(tmp_path),
                 "--features", "inferred", "--json", str(out), *TINY])
    printed = capsys.readouterr().out
    assert code == 0
    assert "paper protocol, inferred features" in printed
    record = json.loads(out.read_text())
    assert record["features"] == "inferred" and len(record["runs"]) == 10


# ----------------------------------------------------------------------------- data errors

def test_missing_file(tmp_path, capsys):
    _fit_fails(capsys, tmp_path, [str(tmp_path / "absent.tsv")], "absent.tsv", "no such file")


def test_empty_file(tmp_path, capsys):
    (tmp_path / "empty.tsv").write_bytes(b"")
    _fit_fails(capsys, tmp_path, [str(tmp_path / "empty.tsv")], "empty.tsv", "empty file")


def test_document_without_tokens(tmp_path, capsys):
    data = tmp_path / "blank.tsv"
    data.write_text("a\tw01 w02 w03\nb\t   \na\tw03 w04 w05\n", encoding="utf-8")
    _fit_fails(capsys, tmp_path, [str(data)], "no tokens")


def test_not_utf8(tmp_path, capsys):
    data = tmp_path / "latin1.tsv"
    data.write_bytes(b"a\tw01 w02 w03\nb\tw04 w05 w06\na\tcaf\xe9 w07 w08\n")
    _fit_fails(capsys, tmp_path, [str(data)], "latin1.tsv", "line 3", "UTF-8")


def test_line_without_tab(tmp_path, capsys):
    data = tmp_path / "notab.tsv"
    data.write_text("a\tw01 w02 w03\nb\tw04 w05 w06\nw07 w08 w09\n", encoding="utf-8")
    _fit_fails(capsys, tmp_path, [str(data)], "notab.tsv", "line 3", "TAB")


def test_unknown_dataset_name(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # so that no file of that name can exist
    _fit_fails(capsys, tmp_path, ["nosuchdataset"], "'nosuchdataset'", "dataset")


def test_missing_data_directory(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    missing = tmp_path / "nonexistent"
    _fit_fails(capsys, tmp_path, ["trec", "--data-dir", str(missing)],
               str(missing), "no such data directory")


def test_no_data_directory_configured(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CPGBN_DATA", raising=False)
    _fit_fails(capsys, tmp_path, ["trec"], "no data directory", "CPGBN_DATA")


def test_vocab_size_one(tmp_path, capsys, corpus_file):
    before = files_under(tmp_path)
    code = main(["fit", str(corpus_file), "--out", str(tmp_path / "model"), *TINY,
                 "--vocab-size", "1"])  # the last --vocab-size wins
    _assert_user_error(capsys, code, "vocab_size")
    assert files_under(tmp_path) == before


def test_layers_zero_is_an_argparse_error(tmp_path, capsys, corpus_file):
    argv = ["fit", str(corpus_file), "--out", str(tmp_path / "model"), *TINY]
    argv[argv.index("--layers") + 1] = "0"
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("cpgbn fit: error: argument --layers")
    assert not (tmp_path / "model").exists()


# ----------------------------------------------------------------------------- model errors

def _transform_fails(capsys, tmp_path, model, data, *needles):
    before = files_under(tmp_path)
    out = tmp_path / "features.npy"
    code = main(["transform", str(model), str(data), "--out", str(out), "--quiet"])
    _assert_user_error(capsys, code, *needles)
    assert not out.exists()
    assert files_under(tmp_path) == before
    # topics reads the model the same way and must fail the same way
    assert main(["topics", str(model)]) == 2
    _assert_user_error(capsys, 2, *needles)


def test_model_directory_missing(tmp_path, capsys, corpus_file):
    _transform_fails(capsys, tmp_path, tmp_path / "nomodel", corpus_file,
                     "nomodel", "does not exist")


def test_model_arrays_truncated(tmp_path, capsys, model_dir, corpus_file):
    model = _copy_model(model_dir, tmp_path / "model")
    arrays = model / "arrays.npz"
    blob = arrays.read_bytes()
    arrays.write_bytes(blob[: len(blob) // 2])
    _transform_fails(capsys, tmp_path, model, corpus_file, "arrays.npz", "truncated")


def test_model_arrays_truncated_with_matching_checksum(tmp_path, capsys, model_dir, corpus_file):
    # Even when the checksum was updated to match, a truncated zip is reported, not a traceback.
    model = _copy_model(model_dir, tmp_path / "model")
    arrays = model / "arrays.npz"
    blob = arrays.read_bytes()[:-100]
    arrays.write_bytes(blob)
    meta = json.loads((model / "model.json").read_text())
    meta["arrays_sha256"] = hashlib.sha256(blob).hexdigest()
    (model / "model.json").write_text(json.dumps(meta))
    _transform_fails(capsys, tmp_path, model, corpus_file, "corrupted")


def test_model_json_garbage(tmp_path, capsys, model_dir, corpus_file):
    model = _copy_model(model_dir, tmp_path / "model")
    (model / "model.json").write_bytes(b'{"format": "cpgbn-model", "format_ver\x00\xff garbage')
    _transform_fails(capsys, tmp_path, model, corpus_file, "model.json", "corrupted")


def test_model_from_newer_format(tmp_path, capsys, model_dir, corpus_file):
    model = _copy_model(model_dir, tmp_path / "model")
    meta = json.loads((model / "model.json").read_text())
    meta["format_version"] = 999
    (model / "model.json").write_text(json.dumps(meta))
    _transform_fails(capsys, tmp_path, model, corpus_file, "format version 999", "upgrade")


def test_model_json_missing_field(tmp_path, capsys, model_dir, corpus_file):
    model = _copy_model(model_dir, tmp_path / "model")
    meta = json.loads((model / "model.json").read_text())
    del meta["seed"]
    (model / "model.json").write_text(json.dumps(meta))
    out = tmp_path / "features.npy"
    code = main(["transform", str(model), str(corpus_file), "--out", str(out), "--quiet"])
    _assert_user_error(capsys, code, "model")
    assert not out.exists()


def test_fit_does_not_delete_an_unrelated_directory(tmp_path, capsys, corpus_file):
    # `cpgbn fit data/train.tsv --out data` must not wipe data/ (it held the training file).
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(corpus_file, data / "train.tsv")
    (data / "notes.txt").write_text("keep me")
    code = main(["fit", str(data / "train.tsv"), "--out", str(data), *TINY])
    _assert_user_error(capsys, code, "refusing to overwrite")
    assert (data / "notes.txt").read_text() == "keep me"
    assert (data / "train.tsv").is_file()


def test_output_targets_are_checked_before_the_work(tmp_path, capsys, model_dir, corpus_file,
                                                    monkeypatch):
    # A bad --out or --json fails at once: not after inference or an hour of evaluation.
    from cpgbn.model import CPGBN

    def no_inference(*args, **kwargs):
        raise AssertionError("the output path was checked only after the work")

    monkeypatch.setattr(CPGBN, "transform", no_inference)
    code = main(["transform", str(model_dir), str(corpus_file), "--out", str(tmp_path)])
    _assert_user_error(capsys, code, "is a directory")
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    code = main(["transform", str(model_dir), str(corpus_file), "--out", str(blocker / "f.npy")])
    _assert_user_error(capsys, code, "cannot create it", "not a writable directory")
    monkeypatch.setattr(CPGBN, "fit", no_inference)
    code = main(["fit", str(corpus_file), "--out", str(blocker / "model"), *TINY])
    _assert_user_error(capsys, code, "cannot create it")
    monkeypatch.setattr("cpgbn.evaluate.evaluate", no_inference)
    code = main(["evaluate", "trec", "--json", str(tmp_path)])
    _assert_user_error(capsys, code, "--json", "is a directory")


def test_failed_write_names_the_requested_file(tmp_path, monkeypatch):
    # the temporary sibling is an implementation detail: an error names the file asked for
    from cpgbn.files import write_file_atomically

    def refuse(src, dst):
        raise PermissionError(13, "Permission denied", src)

    monkeypatch.setattr("cpgbn.files.os.replace", refuse)
    target = tmp_path / "f.txt"
    with pytest.raises(PermissionError) as info:
        write_file_atomically(target, lambda fh: fh.write("x"))
    assert info.value.filename == str(target)
    assert list(tmp_path.iterdir()) == []  # the temporary file is gone


# ----------------------------------------------------------------------------- real process

def test_real_process_exit_codes_and_stderr(tmp_path):
    # A user error: status 2, one line, no traceback, nothing written.
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(b"a\tw01 w02 w03\nb\t\xff\xfe w04\n")
    model = tmp_path / "model"
    run = subprocess.run([*cpgbn_command(), "fit", str(bad), "--out", str(model), *TINY],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("cpgbn: error: ")
    assert "line 2" in run.stderr and "UTF-8" in run.stderr
    assert run.stdout == ""
    assert not model.exists()

    # Success with a warning: short documents are padded, the warning is one line.
    short = write_tsv(tmp_path / "short.tsv", ["w01", "w02 w03", "w03 w04 w05"], ["a", "b", "a"])
    run = subprocess.run([*cpgbn_command(), "fit", str(short), "--out", str(model), *TINY],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert run.stderr.splitlines() == [
        "cpgbn: warning: 2 document(s) shorter than filter_width=3 are padded with empty columns"]
    assert (model / "model.json").is_file() and (model / "arrays.npz").is_file()


def test_fit_pooling_concentration_reaches_the_model_and_bad_values_say_so(tmp_path, capsys,
                                                                          corpus_file):
    model = tmp_path / "model"
    assert main(["fit", str(corpus_file), "--out", str(model), "--pooling-concentration", "2.5",
                 *TINY]) == 0
    capsys.readouterr()
    assert CPGBN.load(model).pooling_concentration == 2.5
    with pytest.raises(SystemExit):
        main(["fit", str(corpus_file), "--out", str(tmp_path / "bad"),
              "--pooling-concentration", "-1", *TINY])
    assert "--pooling-concentration" in capsys.readouterr().err


class OutOfMemoryError(RuntimeError):
    """Named as torch's (torch.OutOfMemoryError, a RuntimeError): the CLI knows it by name,
    so that it needs no torch."""


@pytest.mark.parametrize("raised, needle", [
    (MemoryError(), "out of memory;"), (OutOfMemoryError("CUDA out of memory"), "out of GPU memory"),
    (RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate "
                  "memory: you tried to allocate 40000000000 bytes."), "out of memory;")])
def test_running_out_of_memory_is_one_line_not_a_traceback(corpus_file, tmp_path, capsys,
                                                           monkeypatch, raised, needle):
    """A fit the memory estimate let through that then runs out of memory (the host's, as
    Python's MemoryError or torch's CPU allocator says it, or a GPU's) ends with one line and
    status 1; another RuntimeError still propagates."""
    import cpgbn.model

    def fail(*args, **kwargs):
        raise raised
    monkeypatch.setattr(cpgbn.model.CPGBN, "fit", fail)
    assert main(["fit", str(corpus_file), "--out", str(tmp_path / "m"), *TINY]) == 1
    out, err = capsys.readouterr()
    assert err.startswith("cpgbn: error: ") and needle in err and len(err.splitlines()) == 1
    assert "Traceback" not in err and not (tmp_path / "m").exists()

    def other(*args, **kwargs):
        raise RuntimeError("something else")
    monkeypatch.setattr(cpgbn.model.CPGBN, "fit", other)
    with pytest.raises(RuntimeError, match="something else"):
        main(["fit", str(corpus_file), "--out", str(tmp_path / "m"), *TINY])
