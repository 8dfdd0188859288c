"""The study patch experiments/expected_counts.py (the authors' fractional expected counts).

It overrides hooks of the PyTorch sweep (``count_dtype``, ``_split_units``,
``_position_tables``); this test keeps it working when the sweep changes, so that a session
with a GPU can run the study as the README says.  The patch changes the class for the whole
process, so the test puts the original attributes back.
"""

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the study patches the PyTorch backend")

from cpgbn import CPGBN  # noqa: E402
from cpgbn.inference import torch_sweep  # noqa: E402

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"
HOOKS = ("count_dtype", "_split_units", "_position_tables", "_sweep")


@pytest.fixture
def patched_sampler():
    cls = torch_sweep.TorchGibbsSampler
    saved = {name: cls.__dict__[name] for name in HOOKS}
    sys.path.insert(0, str(EXPERIMENTS))
    try:
        from expected_counts import DROP, use_expected_counts
        use_expected_counts()
        yield cls, DROP
    finally:
        sys.path.remove(str(EXPERIMENTS))
        for name, value in saved.items():
            setattr(cls, name, value)


def test_expected_counts_are_fractional_and_keep_every_unit(patched_sampler):
    cls, drop = patched_sampler
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(25)]
    texts = [" ".join(rng.choice(words, size=8)) for _ in range(30)]
    seen = []
    sweep = cls._sweep

    def spy(self, ts):
        sweep(self, ts)
        seen.append((float(ts.A.sum()), bool((ts.m != torch.round(ts.m)).any()), ts.m.dtype))

    cls._sweep = spy
    count, K, F = 25, 4, 3
    model = CPGBN(layers=(K, 2), vocab_size=30, token_count=count, n_iter=4, burn_in=2,
                  device="cpu", random_state=0).fit(texts)
    units = count * model.n_train_tokens_
    assert len(seen) == 4
    for total, fractional, dtype in seen:
        assert dtype == torch.float64 and fractional
        # only shares below DROP of a unit are left out: at most F * K of them per token
        assert units - model.n_train_tokens_ * F * K * drop <= total <= units * (1 + 1e-12)
    assert np.isfinite(model.train_features_).all()
    assert np.isfinite(model.transform(texts[:5])).all()
