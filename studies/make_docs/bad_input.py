"""Write docs/bad_input.md: every bad input, the command, and what the user sees.

    python -m studies.make_docs.bad_input

Runs each case through the real command-line entry point in a temporary directory.
"""
import contextlib
import io
import json
import os
import sys
import tempfile
import warnings
from pathlib import Path

from cpgbn.cli import main

from studies.common.paths import ROOT

TINY = ["--layers", "3", "--iterations", "4", "--burn-in", "2", "--vocab-size", "20", "--quiet"]


def shown(args):
    """The command as a user would type it, without the tiny training settings block."""
    n = len(TINY)
    for i in range(len(args) - n + 1):
        if args[i:i + n] == TINY:
            args = args[:i] + args[i + n:]
            break
    return "cpgbn " + " ".join(args)


def _to_stderr(message, category, filename, lineno, file=None, line=None):
    """Python's own display of a warning, wherever the caller had sent warnings (pytest
    records them): the table shows what a user sees on the terminal."""
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def run(args):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()), \
            warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = _to_stderr
        try:
            code = main(args)
        except SystemExit as exc:
            code = exc.code
    return code, err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else ""


def table_text() -> str:
    """docs/bad_input.md: each case run in a temporary directory (the working directory is
    put back afterwards)."""
    rows = []
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        os.chdir(t)
        try:
            rows = run_cases(t)
        finally:
            os.chdir(cwd)
    out = ["# Bad input: what the user sees", "",
           "Made by `python -m studies.make_docs.bad_input` (each case run through the real command).",
           "Every user error is one line on stderr and exit status 2; no traceback, nothing half-written.",
           "", "| input | command | exit | message |", "|---|---|---|---|"]
    for name, cmd, code, line in rows:
        out.append(f"| {name} | `{cmd}` | {code} | `{line.replace('|', '/')}` |")
    return "\n".join(out) + "\n"


def run_cases(t: Path) -> list:
    """(input, command, exit status, last line of stderr) for every case, run in the folder ``t``."""
    rows = []
    good = t / "train.tsv"
    good.write_text("".join(f"{'ab'[i % 2]}\tw{i % 7} w{i % 5} w{i % 3} w{i % 4}\n" for i in range(30)))
    (t / "empty.tsv").write_bytes(b"")
    (t / "notab.tsv").write_text("pos\tgood words here\nno tab on this line\n")
    (t / "latin1.tsv").write_bytes(b"pos\tfine\nneg\tcaf\xe9 au lait\n")
    (t / "blank.tsv").write_text("pos\tfine words\nneg\t   \n")
    (t / "short.tsv").write_text("pos\tone\nneg\ttwo words\n" * 5)
    (t / "jz" / "ELEC").mkdir(parents=True)   # Johnson & Zhang's layout, 3 texts, 2 labels
    for name, content in (("elec-25k-train.txt.tok", "good !\nbad .\nfine\n"),
                          ("elec-25k-train.cat", "2\n1\n"),
                          ("elec-test.txt.tok", "ok\n"), ("elec-test.cat", "2\n")):
        (t / "jz" / "ELEC" / name).write_text(content)
    (t / "one_class.tsv").write_text("pos\tgood\npos\tfine\npos\tgreat\n")
    (t / "odd_test.tsv").write_text("a\tw1 w2\nc\tw3 w4\n")
    (t / "plain.txt").write_text("good words here\nbad words there\n")
    (t / "empty_label.tsv").write_text("pos\tgood words\n\tno label here\nneg\tbad words\n")
    main(["fit", str(good), "--out", "model", *TINY])
    cases = [
        ("missing file", ["fit", "nothere.tsv", "--out", "m1", *TINY]),
        ("empty file", ["fit", "empty.tsv", "--out", "m1", *TINY]),
        ("TSV line without a tab", ["fit", "notab.tsv", "--out", "m1", *TINY]),
        ("bytes that are not UTF-8", ["fit", "latin1.tsv", "--out", "m1", *TINY]),
        ("a training document with no tokens", ["fit", "blank.tsv", "--out", "m1", *TINY]),
        ("documents shorter than F (padded, a warning)", ["fit", "short.tsv", "--out", "m2", *TINY]),
        ("unknown dataset name", ["fit", "reuters", "--out", "m1", *TINY]),
        ("missing data directory", ["fit", "trec", "--data-dir", "/no/such/dir", "--out", "m1", *TINY]),
        ("ELEC files missing (cpgbn cannot download them)",
         ["fit", "elec", "--data-dir", ".", "--out", "m1", *TINY]),
        ("ELEC labels not line for line with the texts",
         ["fit", "elec", "--data-dir", "jz", "--out", "m1", *TINY]),
        ("vocabulary size < 2", ["fit", "train.tsv", "--out", "m1", *TINY, "--vocab-size", "1"]),
        ("layer size < 1", ["fit", "train.tsv", "--out", "m1", "--layers", "200,0"]),
        ("padding wider than F - 1", ["fit", "train.tsv", "--out", "m1", *TINY, "--padding", "3"]),
        ("more pseudo-counts in a document than an int32 count holds",
         ["fit", "train.tsv", "--out", "m1", *TINY, "--token-count", "1000000000"]),
        ("burn-in not below iterations", ["fit", "train.tsv", "--out", "m1", "--iterations", "5",
                                          "--burn-in", "5"]),
        ("minibatch size < 1", ["fit", "train.tsv", "--out", "m1", "--inference", "hybrid",
                                "--batch-size", "0"]),
        ("a device for minibatch Gibbs (numba only)",
         ["fit", "train.tsv", "--out", "m1", *TINY, "--inference", "minibatch-gibbs",
          "--device", "cpu"]),
        ("--out is a directory that is not a model", ["fit", "train.tsv", "--out", ".", *TINY]),
        ("model directory missing", ["topics", "nomodel"]),
        ("column share not a fraction", ["topics", "model", "--min-column-share", "1.5"]),
        ("features --out is a directory (checked before inference)",
         ["transform", "model", "train.tsv", "--out", "."]),
        ("features --out under a file", ["transform", "model", "train.tsv", "--out",
                                         "train.tsv/f.npy"]),
        ("--json is a directory (checked before training)", ["evaluate", "trec", "--json", "."]),
        ("--padding with a bag-of-words baseline", ["evaluate", "trec", "--model", "pgbn",
                                                    "--padding", "2"]),
        ("evaluate: a labelled file with one class", ["evaluate", "one_class.tsv", *TINY]),
        ("evaluate: fewer documents of a class than folds", ["evaluate", "train.tsv", "--cv",
                                                             "20", *TINY]),
        ("evaluate: a test class the training file lacks",
         ["evaluate", "train.tsv", "--test", "odd_test.tsv", *TINY]),
        ("evaluate: missing test file", ["evaluate", "train.tsv", "--test", "nothere.tsv",
                                         *TINY]),
        ("evaluate: --cv with --test", ["evaluate", "train.tsv", "--cv", "5", "--test",
                                        "odd_test.tsv", *TINY]),
        ("evaluate: fewer than 2 folds", ["evaluate", "train.tsv", "--cv", "1", *TINY]),
        ("classifier: a file without labels", ["fit", "plain.txt", "--supervised", "--out",
                                                "m3", *TINY]),
        ("classifier: a labelled file with one class", ["fit", "one_class.tsv", "--supervised",
                                                        "--out", "m3", *TINY]),
        ("classifier: an empty label (a fully labelled file)",
         ["fit", "empty_label.tsv", "--supervised", "--out", "m3", *TINY]),
        ("classifier: predict with a model fitted without labels",
         ["predict", "model", "train.tsv"]),
        ("classifier: explain with a model fitted without labels",
         ["explain", "model", "some text"]),
    ]
    for name, args in cases:
        code, line = run(args)
        rows.append((name, shown(args), code, line))
    meta = json.loads((t / "model" / "model.json").read_text())
    for name, edit in [("model from a newer format version", lambda m: {**m, "format_version": 99}),
                       ("model.json corrupted", None), ("arrays.npz truncated", "truncate")]:
        broken = t / f"broken{len(rows)}"
        broken.mkdir()
        (broken / "arrays.npz").write_bytes((t / "model" / "arrays.npz").read_bytes())
        (broken / "model.json").write_text(json.dumps(meta))
        if callable(edit):
            (broken / "model.json").write_text(json.dumps(edit(meta)))
        elif edit == "truncate":
            data = (broken / "arrays.npz").read_bytes()
            (broken / "arrays.npz").write_bytes(data[: len(data) // 2])
        else:
            (broken / "model.json").write_text('{"format": "cpgbn-mo')
        args = ["transform", broken.name, "train.tsv", "--out", "f.npy"]
        code, line = run(args)
        rows.append((name, shown(args), code, line))
    return rows


def main_():
    (ROOT / "docs" / "bad_input.md").write_text(table_text())


if __name__ == "__main__":
    main_()
