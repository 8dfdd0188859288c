"""Progress when stderr is not a terminal (issue 49): plain lines instead of a tqdm bar.

A ``cpgbn fit`` whose stderr goes to a pipe (a log file, ``nohup``, CI) prints a line when it
starts, a progress line at most every ``CPGBN_PROGRESS_INTERVAL`` seconds (30 by default;
0 here, so that a tiny fit prints one after each sweep) and a final line; ``--quiet`` prints
none; on a terminal the bar is tqdm's, as before (:mod:`cpgbn.progress`).
"""
from __future__ import annotations

import io
import os
import re
import subprocess

import pytest
from tqdm import tqdm as std_tqdm
from tqdm.auto import tqdm as auto_tqdm

from cpgbn.progress import INTERVAL, INTERVAL_VARIABLE, line_interval, progress_bar
from helpers import cpgbn_command, random_labeled, write_tsv

TINY = ["--layers", "4", "--vocab-size", "30", "--iterations", "6", "--burn-in", "3",
        "--threads", "1"]
CLOCK = r"(\d+:)?\d\d:\d\d"
STATS = r", docs/s=\d+, loss=\S+"   # the bar's postfix, after the progress
PROGRESS = re.compile(rf"^fit: sweep [1-5]/6 \(\d+%\), {CLOCK} elapsed, ~{CLOCK} left{STATS}$")
FINAL = re.compile(rf"^fit: sweep 6/6 \(100%\), {CLOCK} elapsed, done{STATS}$")


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    texts, labels = random_labeled(60, seed=0)
    return write_tsv(tmp_path_factory.mktemp("data") / "train.tsv", texts, labels)


def _fit(corpus_file, out, *extra, interval="0"):
    """``cpgbn fit`` as a real process, stdout and stderr to pipes (not terminals)."""
    env = {**os.environ, INTERVAL_VARIABLE: interval}
    run = subprocess.run([*cpgbn_command(), "fit", str(corpus_file), "--out", str(out), *TINY,
                          *extra], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    return run


def test_fit_to_a_pipe_prints_progress_lines_and_a_final_line(corpus_file, tmp_path):
    run = _fit(corpus_file, tmp_path / "model")
    assert "\r" not in run.stderr, "a tqdm bar was written to a pipe"
    # the fit's sweeps, then the sweeps that give the training documents' features
    assert all(line.startswith(("fit: ", "transform: ")) for line in run.stderr.splitlines())
    lines = [line for line in run.stderr.splitlines() if line.startswith("fit: ")]
    assert lines[0] == "fit: sweep 0/6 (0%), started", run.stderr
    progress = [line for line in lines if PROGRESS.match(line)]
    assert progress, f"no progress line in {run.stderr!r}"
    assert FINAL.match(lines[-1]), run.stderr
    # one line per sweep at interval 0: the start, sweeps 1..5, the final line
    assert len(lines) == 7 and len(progress) == 5, run.stderr
    assert (tmp_path / "model" / "model.json").is_file()


def test_quiet_fit_prints_no_progress(corpus_file, tmp_path):
    run = _fit(corpus_file, tmp_path / "model", "--quiet")
    assert run.stderr == ""


class _Terminal(io.StringIO):
    def isatty(self):
        return True


class _Pipe(io.StringIO):
    def isatty(self):
        return False


def test_a_terminal_gets_the_tqdm_bar(monkeypatch):
    monkeypatch.setenv(INTERVAL_VARIABLE, "0")
    stream = _Terminal()
    bar = progress_bar(total=3, desc="fit", unit="sweep", leave=False, file=stream)
    assert type(bar) is auto_tqdm and not bar.disable
    bar.update(3)
    bar.close()
    assert stream.getvalue().startswith("\rfit:   0%|")   # a bar, redrawn in place

    monkeypatch.setattr("sys.stderr", _Terminal())   # the default stream: stderr as it is now
    bar = progress_bar(total=3, desc="fit", unit="sweep")
    assert type(bar) is auto_tqdm and not bar.disable
    bar.close()


def test_not_a_terminal_gets_lines_at_the_interval(monkeypatch):
    monkeypatch.setenv(INTERVAL_VARIABLE, "3600")   # far longer than this test
    stream = _Pipe()
    with progress_bar(total=1000, desc="fit", unit="sweep", leave=False, file=stream) as bar:
        assert isinstance(bar, std_tqdm) and type(bar) is not auto_tqdm
        for _ in range(999):
            bar.update(1)
    # no line between the first and the last: the interval has not passed
    assert stream.getvalue().splitlines()[0] == "fit: sweep 0/1000 (0%), started"
    assert len(stream.getvalue().splitlines()) == 2
    assert re.match(r"^fit: sweep 999/1000 \(100%\), 00:\d\d elapsed, stopped$",
                    stream.getvalue().splitlines()[1])


def test_progress_off_writes_nothing():
    stream = _Pipe()
    with progress_bar(total=5, desc="fit", unit="sweep", enabled=False, file=stream) as bar:
        bar.update(5)
    terminal = _Terminal()
    with progress_bar(total=5, desc="fit", unit="sweep", enabled=False, file=terminal) as bar:
        bar.update(5)
    assert stream.getvalue() == "" and terminal.getvalue() == ""


@pytest.mark.parametrize("value, seconds", [("", INTERVAL), ("2.5", 2.5), ("0", 0.0),
                                            ("-1", INTERVAL), ("soon", INTERVAL)])
def test_the_interval_variable(monkeypatch, value, seconds):
    monkeypatch.setenv(INTERVAL_VARIABLE, value)
    assert line_interval() == seconds
