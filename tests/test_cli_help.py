"""What the command line tells a new user: every option's help says its default, a mean of
one value is printed without a spread, and the README's examples fit one vocabulary size.

The help checks walk the parser that ``cpgbn`` itself builds (:func:`cpgbn.cli.build_parser`),
so a new option or subcommand is checked without being listed here.  An option's help must
say "default" in words ("default %(default)s", argparse's own substitution, or "default:
the protocol's"); flags (store_true) are off unless given, and an option that is required
has no default.  Every positional argument says what it is.
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from cpgbn.cli import build_parser, main
from cpgbn.evaluate.user_files import table_text

#: Actions whose help needs no default: -h, --version and flags, which are off unless given.
NO_DEFAULT = (argparse._HelpAction, argparse._VersionAction, argparse._StoreTrueAction,
              argparse._StoreFalseAction)


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def help_problems(parser: argparse.ArgumentParser) -> list[str]:
    """Each argument of ``parser`` whose help is missing or does not say its default."""
    problems = []
    for action in parser._actions:
        name = "/".join(action.option_strings) or action.metavar or action.dest
        text = action.help or ""
        if text == argparse.SUPPRESS:   # hidden on purpose
            continue
        if not text.strip():
            problems.append(f"{name}: no help")
        elif action.option_strings and not action.required and not isinstance(action, NO_DEFAULT):
            # "%(default)s" alone is a value, not the word: the help must say it is the default
            if "default" not in re.sub(r"%\(default\)[^a-z]*[a-z]", "", text):
                problems.append(f"{name}: the help does not give the default ({text!r})")
    return problems


def test_every_subcommand_is_checked():
    assert set(subcommands()) == {"fit", "transform", "topics", "tree", "download", "report",
                                  "summary", "evaluate", "predict", "explain"}


@pytest.mark.parametrize("command", sorted(subcommands()))
def test_every_argument_has_help_and_every_option_its_default(command):
    parser = subcommands()[command]
    problems = help_problems(parser)
    assert not problems, f"cpgbn {command}:\n" + "\n".join(problems)
    parser.format_help()   # every %(...)s substitution renders


def test_help_shows_defaults_as_the_user_types_them():
    # string defaults go through the option's type: the help shows 200, the parse gives (200,)
    fit = subcommands()["fit"]
    assert "(default 200)" in " ".join(fit.format_help().split())
    args = build_parser().parse_args(["fit", "docs.tsv", "--out", "m"])
    assert args.layers == (200,) and args.token_count == 800
    args = build_parser().parse_args(["evaluate", "trec"])
    assert args.layers == (200,) and args.seeds == [0] and args.token_count == 800


# ------------------------------------------------------------------ one value has no spread
def _file_record(n_runs: int) -> dict:
    """A record of :func:`cpgbn.evaluate.user_files.evaluate_labeled`, as much of it as
    :func:`~cpgbn.evaluate.user_files.table_text` reads, with ``n_runs`` runs per model."""
    runs = [dict(seed=seed, split="test", accuracy=0.8 + 0.02 * seed, ece=None)
            for seed in range(n_runs)]
    with_ece = [dict(run, ece=0.05) for run in runs]
    return dict(train="train.tsv", n_train=100, classes=["a", "b"], test="test.tsv", n_test=40,
                split=dict(kind="test"), seeds=list(range(n_runs)),
                splits=[dict(seed=seed, split="test") for seed in range(n_runs)],
                majority_accuracy=0.5, settings=dict(ece_bins=15),
                models=[dict(name="svm-bigram", accuracy_mean=0.81, accuracy_std=0.0 if n_runs == 1
                             else 0.014, ece_mean=None, ece_std=None, seconds=1.0, runs=runs),
                        dict(name="lr-bigram", accuracy_mean=0.8, accuracy_std=0.0 if n_runs == 1
                             else 0.02, ece_mean=0.05, ece_std=0.0 if n_runs == 1 else 0.01,
                             seconds=1.0, runs=with_ece)])


def test_file_table_prints_no_spread_of_one_run():
    rows = table_text(_file_record(1)).splitlines()
    assert "+-" not in "\n".join(rows)
    assert rows[2].split() == ["svm-bigram", "81.0", "-", "1.0"]
    assert rows[3].split() == ["lr-bigram", "80.0", "0.050", "1.0"]
    rows = table_text(_file_record(2)).splitlines()   # two runs: mean +- std
    assert rows[2].split() == ["svm-bigram", "81.0", "+-", "1.4", "-", "1.0"]
    assert rows[3].split() == ["lr-bigram", "80.0", "+-", "2.0", "0.050", "+-", "0.010", "1.0"]


@pytest.mark.parametrize("seeds, shown", [("0", "accuracy 81.0 %"),
                                          ("0,1", "accuracy 81.0 +- 1.4 %")])
def test_dataset_line_prints_no_spread_of_one_seed(seeds, shown, monkeypatch, capsys):
    def evaluate(dataset, **kwargs):   # the record of cpgbn.evaluate.evaluate, without the work
        return dict(dataset=dataset, model=kwargs["model"], layers=list(kwargs["layers"]),
                    protocol=kwargs["protocol"], features=kwargs["features"],
                    seeds=kwargs["seeds"], accuracy_mean=0.81,
                    accuracy_std=0.014 if len(kwargs["seeds"]) > 1 else 0.0)

    monkeypatch.setattr("cpgbn.evaluate.evaluate", evaluate)
    monkeypatch.delenv("CPGBN_DOWNLOAD", raising=False)   # main sets it for the process
    assert main(["evaluate", "trec", "--seeds", seeds, "--quiet"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.endswith(f": {shown}"), line


def test_readme_examples_fit_the_same_vocabulary_size():
    # the library's vocab_size and the CLI's --vocab-size both count the out-of-vocabulary row
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    python = re.findall(r"```python\n(.*?)```", readme, re.S)[0]
    shell = re.findall(r"```bash\n(.*?)```", readme, re.S)
    (library,) = re.findall(r"vocab_size=(\d+)", python)
    command_line = {n for block in shell for n in re.findall(r"--vocab-size (\d+)", block)}
    assert command_line == {library}
    (fit_option,) = [a for a in subcommands()["fit"]._actions if a.dest == "vocab_size"]
    assert "including the out-of-vocabulary row" in fit_option.help


def test_predict_reads_a_named_datasets_test_split_by_default():
    """Predicting a dataset's training split by default would score documents the model saw."""
    args = build_parser().parse_args(["predict", "model", "trec"])
    assert args.split == "test"
