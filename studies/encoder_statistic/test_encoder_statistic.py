"""The encoder-statistic study's paths on a small fit, its mean-path variants against the
library's path and scipy's Weibull median, and its table."""
import warnings

import numpy as np
import pytest

pytest.importorskip("torch")

from cpgbn.model import CPGBN  # noqa: E402
from studies.encoder_statistic import encoder_statistic as study  # noqa: E402


def test_the_paths_give_positive_rows_the_mean_is_transform_and_the_median_differs():
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(15)]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(4, 9)))) for _ in range(24)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = CPGBN(layers=(4, 3), inference="hybrid", n_epochs=1, batch_size=12,
                      random_state=0, n_iter=4, burn_in=2).fit(texts)
    rows = {path: study.features(model, path, texts[:5]) for path in study.PATHS}
    for path, f in rows.items():
        assert f.shape == (5, 4) and np.isfinite(f).all() and (f > 0).all(), path
    np.testing.assert_array_equal(rows["mean"], model.set_params(refine_iter=0).transform(texts[:5]))
    assert not np.allclose(rows["median"], rows["mean"])
    assert not np.allclose(rows["floor-1"], rows["mean"])
    np.testing.assert_allclose(rows["proportions"].sum(axis=1), 1.0)
    mean = rows["mean"]
    np.testing.assert_allclose(rows["proportions"], mean / mean.sum(axis=1, keepdims=True))
    with pytest.raises(ValueError, match="unknown path"):
        study.features(model, "mode", texts[:5])


def test_the_table_reads_the_records():
    record = {"dataset": "trec", "seed": 0, "fit": {"n_epochs": 5},
              "paths": {p: {"accuracy": 0.5, "feature_seconds": 1.0,
                            "train_sum_quartiles": [1.0, 2.0, 4.0]} for p in study.PATHS}}
    longer = dict(record, fit={"n_epochs": 20})
    table = study.report([record, dict(record, seed=1), longer])
    assert "| TREC acc | TREC sum (q75/q25) | TREC 20 ep acc |" in table
    assert "| median | 50.0 +- 0.0 (n=2) | 2 (4.00) | 50.0 (n=1) | 2 (4.00) |" in table
    assert study.cell_name("trec", 1, 5) == "trec--seed1.json"
    assert study.cell_name("trec", 1, 20) == "trec--seed1--20ep.json"


def test_the_variants_of_the_mean_path():
    """With neither variant the study's path is the library's chunked mean path; the median
    variant pools scipy's Weibull medians of the same q(w) (the upper layers unchanged); a
    shape floor at the encoder's own clip (0.1) changes nothing, a higher one does."""
    import torch
    from scipy.stats import weibull_min

    from cpgbn.backends.torch.encoder import SHAPE_RANGE, WeibullConvEncoder
    from cpgbn.backends.torch.packed import pack_tokens

    rng = np.random.default_rng(13)
    lengths = [5, 0, 1, 12, 3, 9]
    tokens, offsets = rng.integers(0, 11, sum(lengths)), np.cumsum([0] + lengths)
    batch = pack_tokens(tokens, offsets, 3)
    torch.manual_seed(0)
    encoder = WeibullConvEncoder(11, (5, 4, 3), 3).double()
    phi = [rng.dirichlet(np.ones(5), 4).T, rng.dirichlet(np.ones(4), 3).T]
    library = encoder.mean_thetas(batch, phi, chunk_positions=7)[0]
    torch.testing.assert_close(study.mean_path_theta1(encoder, batch, phi), library,
                               rtol=1e-12, atol=0)
    torch.testing.assert_close(study.mean_path_theta1(encoder, batch, phi,
                                                      shape_floor=SHAPE_RANGE[0]), library,
                               rtol=1e-12, atol=0)
    assert not torch.allclose(study.mean_path_theta1(encoder, batch, phi, shape_floor=1.0),
                              library)
    with torch.no_grad():
        mean = encoder.sample(batch, phi, mean=True)
    median = weibull_min.median(mean.w_shape.numpy(), scale=mean.w_scale.numpy())
    want = np.zeros((batch.n_docs, 5))
    np.add.at(want, batch.position_doc.numpy(), median)
    got = study.mean_path_theta1(encoder, batch, phi, median=True)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10)
