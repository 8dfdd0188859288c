"""Interrupted fits resume to exactly the model of an uninterrupted fit (kill -9 of a real process)."""
import subprocess
from pathlib import Path

import numpy as np
import pytest

from cpgbn import CPGBN, CPGBNInputError

from helpers import cpgbn_command, kill_9_after_checkpoint, random_texts, write_tsv

SETTINGS = ["--layers", "12,4", "--vocab-size", "40", "--iterations", "600", "--burn-in", "400",
            "--checkpoint-every", "20", "--seed", "3", "--quiet", "--threads", "2"]


@pytest.mark.slow
def test_kill_9_then_resume_gives_the_uninterrupted_model(tmp_path):
    corpus = tmp_path / "train.tsv"
    write_tsv(corpus, random_texts(150, seed=5), ["a", "b"] * 75)
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    subprocess.run([*cpgbn_command(), "fit", str(corpus), "--out", str(whole), *SETTINGS], check=True,
                   capture_output=True, timeout=600)

    checkpoint = Path(f"{resumed}.checkpoint")
    interrupted_at = kill_9_after_checkpoint(
        [*cpgbn_command(), "fit", str(corpus), "--out", str(resumed), *SETTINGS], checkpoint, 100)
    assert 100 <= interrupted_at < 600 and not resumed.exists()

    run = subprocess.run([*cpgbn_command(), "fit", str(corpus), "--out", str(resumed), *SETTINGS,
                          "--resume"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "resuming from" in run.stderr
    assert not checkpoint.exists()  # removed once the fit completed

    a, b = CPGBN.load(whole), CPGBN.load(resumed)
    np.testing.assert_array_equal(a.globals_.D, b.globals_.D)
    for pa, pb in zip(a.globals_.phi, b.globals_.phi):
        np.testing.assert_array_equal(pa, pb)
    np.testing.assert_array_equal(a.globals_.r, b.globals_.r)
    np.testing.assert_array_equal(a.loglik_trace_, b.loglik_trace_)
    np.testing.assert_array_equal(a.kernel_usage(), b.kernel_usage())


def test_checkpoint_from_other_data_is_refused(tmp_path, monkeypatch):
    texts = random_texts(40, seed=1)
    model = CPGBN(layers=(4,), vocab_size=30, n_iter=9, burn_in=4, random_state=0)
    ckpt = tmp_path / "ckpt"

    calls = []

    class Stop(Exception):
        pass

    # interrupt a fit right after its first checkpoint is written
    import cpgbn.inference.checkpoint as module
    original = module.save_checkpoint

    def save_then_stop(*args, **kwargs):
        original(*args, **kwargs)
        calls.append(1)
        raise Stop

    with monkeypatch.context() as patch:
        patch.setattr(module, "save_checkpoint", save_then_stop)
        with pytest.raises(Stop):
            model.fit(texts, checkpoint_dir=ckpt, checkpoint_every=3)
    assert calls and (ckpt / "checkpoint.json").is_file()
    with pytest.raises(CPGBNInputError, match="other data or parameters"):
        model.fit(random_texts(40, seed=2), checkpoint_dir=ckpt, resume=True)
    with pytest.raises(CPGBNInputError, match="other data or parameters"):
        CPGBN(layers=(4,), vocab_size=30, n_iter=9, burn_in=4, random_state=1).fit(
            texts, checkpoint_dir=ckpt, resume=True)
    # same data and parameters: resumes and equals an uninterrupted fit
    resumed = model.fit(texts, checkpoint_dir=ckpt, resume=True)
    whole = CPGBN(layers=(4,), vocab_size=30, n_iter=9, burn_in=4, random_state=0).fit(texts)
    np.testing.assert_array_equal(resumed.globals_.D, whole.globals_.D)
    np.testing.assert_array_equal(resumed.train_features_, whole.train_features_)
    assert not ckpt.exists()
