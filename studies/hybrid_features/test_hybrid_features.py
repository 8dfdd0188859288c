"""The hybrid-features study's feature paths on a small fit, and its table."""
import numpy as np
import pytest

pytest.importorskip("torch")

from cpgbn.model import CPGBN  # noqa: E402
from studies.hybrid_features import hybrid_features as study  # noqa: E402


def test_every_feature_path_gives_one_finite_row_per_document_and_the_table_lists_them():
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(15)]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(4, 9)))) for _ in range(24)]
    model = CPGBN(layers=(4, 3), inference="hybrid", n_epochs=1, batch_size=12,
                  random_state=0, n_iter=4, burn_in=2).fit(texts)
    for path in ("encoder", "refine-2", "gibbs-2", "gibbs-200"):
        f = study.features(model, path, texts[:5])
        assert f.shape == (5, 4) and np.isfinite(f).all() and (f > 0).all(), path
    np.testing.assert_array_equal(study.features(model, "encoder", texts[:5]),
                                  model.set_params(refine_iter=0).transform(texts[:5]))
    record = {"dataset": "trec", "seed": 0,
              "paths": {p: {"accuracy": 0.5, "feature_seconds": 1.0} for p in study.PATHS}}
    table = study.report([record, dict(record, seed=1)])
    assert "| gibbs-200 | 50.0 +- 0.0 (n=2) | 1.0 |" in table
