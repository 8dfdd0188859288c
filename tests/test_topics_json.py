"""``cpgbn topics --json``: the same kernels, in the same order, with the same columns and
phrases as the text table, on a tiny fitted model."""
import json
import re

import numpy as np
import pytest

from cpgbn import CPGBN
from cpgbn.cli import main
from cpgbn.explain import HIDDEN, kernel_table

from helpers import phrase_corpus

CELL = 16   # format_kernel_table's column width


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    texts, _ = phrase_corpus(60, seed=0)
    model = CPGBN(layers=(4,), vocab_size=50, n_iter=4, burn_in=2, random_state=0,
                  n_threads=1).fit(texts)
    path = tmp_path_factory.mktemp("topics") / "m"
    model.save(path)
    return path


def _run(capsys, argv) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


def _text_kernels(text: str) -> list[dict]:
    """Per kernel of the text table (with --columns): its index and name, the windows it
    explains in the corpus with their counts, the first row of its column grid (what each
    column shows first, HIDDEN for a hidden one) and its best phrases."""
    kernels = []
    for line in text.splitlines():
        header = re.match(r'kernel (\d+)(?:  "(.*)")?  usage', line)
        if header:
            kernels.append({"kernel": int(header.group(1)), "name": header.group(2),
                            "first": None, "phrases": [], "corpus": []})
        elif line.startswith("   best phrase: "):
            kernels[-1]["phrases"] = line[len("   best phrase: "):].split(" | ")
        elif line.startswith("   in corpus: "):
            kernels[-1]["corpus"] = [re.fullmatch(r"(.*) \((\d+)x, \d+%\)", item).groups()
                                     for item in line[len("   in corpus: "):].split(" | ")]
        elif kernels[-1]["first"] is None:
            row = line[3:]
            kernels[-1]["first"] = [row[i:i + CELL].strip() for i in range(0, len(row), CELL + 2)]
    return kernels


@pytest.mark.parametrize("options", [
    [],
    ["--sort", "sharpness", "--kernels", "3", "--top", "2", "--phrases", "2"],
    ["--ids", "3,0,2", "--min-column-share", "0.34"],   # F = 3: every kernel hides a column
    ["--sort", "kernel", "--min-column-share", "0", "--phrases", "4"],
])
def test_json_lists_what_the_text_table_shows(model_dir, capsys, options):
    text = _text_kernels(_run(capsys, ["topics", str(model_dir), *options, "--columns"]))
    record = json.loads(_run(capsys, ["topics", str(model_dir), *options, "--json"]))
    kernels = record["kernels"]
    assert [k["kernel"] for k in kernels] == [k["kernel"] for k in text]
    assert record["hidden"] == HIDDEN and record["filter_width"] == 3 and record["layers"] == [4]
    usage = CPGBN.load(model_dir).kernel_usage_
    for shown, row in zip(text, kernels):
        assert row["usage"] == pytest.approx(float(usage[row["kernel"]]))
        assert [" ".join(p["tokens"]) for p in row["phrases"]] == shown["phrases"]
        assert all(isinstance(p["weight"], float) for p in row["phrases"])
        # a column the text table hides is hidden here, and an open slot of every phrase
        hidden = [col["hidden"] for col in row["columns"]]
        assert hidden == [cell == HIDDEN for cell in shown["first"]]
        assert [col["words"][0]["word"] for col in row["columns"] if not col["hidden"]] == [
            cell for cell in shown["first"] if cell != HIDDEN]
        assert all((token == HIDDEN) == h for p in row["phrases"] for token, h in
                   zip(p["tokens"], hidden))
        assert row["n_shown"] == hidden.count(False)
        # the windows the kernel explains, with their counts, and the name both views give it
        assert [(" ".join(p["tokens"]), str(p["count"])) for p in
                row.get("corpus_phrases", [])] == [tuple(c) for c in shown["corpus"]]
        assert row["name"] == (shown["name"] or shown["phrases"][0])
    if "--min-column-share" in options and "0.34" in options:
        assert all(any(col["hidden"] for col in row["columns"]) for row in kernels)


def test_json_of_a_row_has_no_nan(model_dir):
    model = CPGBN.load(model_dir)
    rows = kernel_table(model, npmi=[np.nan, 0.1, -0.2, np.nan])
    records = [row.to_dict() for row in rows]
    assert records[0]["npmi"] is None and records[1]["npmi"] == pytest.approx(0.1)
    assert "width" not in records[0]
    json.dumps(records, allow_nan=False)
    # a model saved before fits recorded their windows: no corpus phrases, named by its best
    # phrase
    del model.kernel_windows_, model.kernel_window_counts_, model.kernel_window_shares_
    record = kernel_table(model)[0].to_dict()
    assert "corpus_phrases" not in record
    assert record["name"] == " ".join(record["phrases"][0]["tokens"])


def test_json_errors_are_one_line(model_dir, capsys):
    assert main(["topics", str(model_dir), "--json", "--ids", "9"]) == 2
    err = capsys.readouterr().err
    assert "--ids: the model has kernels 0..3" in err and err.count("\n") == 1
