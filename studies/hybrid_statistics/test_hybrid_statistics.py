"""The hybrid-statistics study's cell and table on a few steps."""
import numpy as np
import pytest

pytest.importorskip("torch")

from studies.hybrid_statistics import hybrid_statistics as study  # noqa: E402


def test_cell_records_recovery_and_features_and_the_table_shows_them():
    cell = study.run_cell("gibbs", 0, 3, "planted", 10.0)
    # three steps of the exact minibatch chain from the planted globals stay near them (one
    # TLASGR step on 50 documents alone moves a kernel by about 0.15; random globals: 0.75)
    assert cell["worst_kernel_tv"] < 0.3 and cell["worst_phi_tv"] < 0.3
    assert np.isfinite(cell["median_loss_last_50"]) and cell["gibbs_theta1_doc_sum"] > 0
    assert -1 <= cell["normalised_theta1_corr"] <= 1 and cell["commit"]
    table = study.report({"k": cell})
    assert "| gibbs | one | pooled | planted | 10.0 | 0 | 3 |" in table
