"""The encoder-ELBO study's variants reach the trainer, its held-out bound, and its table."""
import numpy as np
import pytest

pytest.importorskip("torch")

from cpgbn.model import CPGBN  # noqa: E402
from studies.encoder_elbo import encoder_elbo as study  # noqa: E402


def _texts(n=24, seed=0):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(15)]
    return [" ".join(rng.choice(words, size=int(rng.integers(4, 9)))) for _ in range(n)]


def test_a_variant_reaches_the_trainer_and_the_bound_is_finite():
    texts = _texts()
    fits = {}
    for name in ("one-paper-gibbs", "conditional-pooled-encoder"):
        model = CPGBN(layers=(4, 3), inference=study.variant_mode(study.VARIANTS[name]),
                      n_epochs=1, batch_size=12, random_state=0).fit(texts)
        assert model.encoder_config_["w_shape_above"] == study.VARIANTS[name]["w_shape_above"]
        bound = study.heldout_bound(model, texts[:6])
        assert np.isfinite(bound["negative_elbo_per_token"]) and bound["c2_median"] > 0
        fits[name] = model.globals_.D
    # the statistics path changes the globals' chain
    assert not np.array_equal(fits["one-paper-gibbs"], fits["conditional-pooled-encoder"])


def test_the_table_lists_every_variant_measured():
    cell = {"dataset": "trec", "seed": 0, "variant": "one-paper-gibbs", "fit": {"n_epochs": 5},
            "paths": {p: {"accuracy": 0.5, "sum_median": 400.0} for p in study.PATHS},
            "heldout": {"negative_elbo_per_token": 10.0, "log_likelihood_per_token": -9.0}}
    imdb = dict(cell, dataset="imdb", fit={"n_epochs": 1},
                paths={"encoder": {"accuracy": 0.7, "sum_median": 300.0}})
    table = study.report([cell, dict(cell, seed=1), imdb])
    assert "| one-paper-gibbs | 50.0 +- 0.0 | 50.0 +- 0.0 | 400 | 400 | 10.0 | -9.0 | 2 |" \
        in table
    assert "| one-paper-gibbs (1 epochs) | 70.0 | - | 300 | - | 10.0 | -9.0 | 1 |" in table
