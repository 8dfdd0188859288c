"""prior_share.py: the share of theta^(1)'s gamma shape that the layers above give."""
from types import SimpleNamespace

import numpy as np

from helpers import random_texts
from studies.prior_share import prior_share


def test_share_is_the_prior_shape_over_the_whole_shape():
    phi2 = np.array([[0.5, 0.0], [0.5, 1.0]])  # (K_1, K_2), columns on the simplex
    theta2 = np.array([[2.0, 1.0], [0.0, 4.0]])  # (N, K_2)
    A = np.array([[3, 0], [4, 4]], dtype=np.int32)  # (N, K_1)
    state = SimpleNamespace(theta=[None, theta2], globals=SimpleNamespace(phi=[phi2]), A=A)
    # a_j. = sum_k (Phi^(2) theta^(2)_j)_k = theta^(2)_j. because Phi's columns sum to 1
    np.testing.assert_allclose(prior_share.prior_shares(state), [3 / 6, 4 / 12])
    one_layer = SimpleNamespace(theta=[None], globals=SimpleNamespace(r=np.array([0.5, 0.5])), A=A)
    np.testing.assert_allclose(prior_share.prior_shares(one_layer), [1 / 4, 1 / 9])


def test_the_share_falls_as_the_pseudo_count_grows(monkeypatch):
    texts = random_texts(30)
    monkeypatch.setattr(prior_share, "load_dataset", lambda *a, **k: (texts, None))
    monkeypatch.setitem(prior_share.V, "tiny", 40)
    low = prior_share.measure("tiny", "6-3", 1, 0, None, 8, 4)
    high = prior_share.measure("tiny", "6-3", 100, 0, None, 8, 4)
    assert low["n_collected"] == 4 and low["n_docs"] == 30
    assert 0 < high["median"] < low["median"] < 1
