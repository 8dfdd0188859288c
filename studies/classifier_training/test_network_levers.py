"""The network-levers study's copy of the classifier's network: given the library encoder's
weights it computes the library's softmax input (short and empty documents included), the
levers' networks run, and a fit keeps its best epoch."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from cpgbn.backends.torch.encoder import WeibullConvEncoder  # noqa: E402
from cpgbn.backends.torch.packed import pack_tokens  # noqa: E402
from studies.classifier_training import network_levers as study  # noqa: E402

V, K = 12, 5


def _documents(lengths, seed=0):
    """Random documents of the given lengths as (token ids, offsets) and the study's
    (padded ids, lengths)."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, V, size=int(sum(lengths))).astype(np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    ids = np.full((len(lengths), max(max(lengths), 1)), V, dtype=np.int64)
    for j, (lo, hi) in enumerate(zip(offsets[:-1], offsets[1:])):
        ids[j, :hi - lo] = tokens[lo:hi]
    return tokens, offsets, (ids, np.asarray(lengths, dtype=np.int64))


@pytest.mark.parametrize("width", [2, 3, 4])
def test_the_reference_computes_the_library_networks_softmax_input(width):
    torch.manual_seed(0)
    encoder = WeibullConvEncoder(V, (K,), width, n_classes=3, classifier_input="hidden")
    with torch.no_grad():
        encoder.bias1.normal_()   # a bias of 0 would hide an empty position's relu(b)
    network = study.build_network(V, 3, (width,), K)
    with torch.no_grad():
        network.tables[0].weight[:V] = encoder.conv1.weight
        network.biases[0].copy_(encoder.bias1)
        network.softmax.load_state_dict(encoder.classifier.state_dict())
    # shorter than the filter, empty, as long as it, longer
    lengths = [1, 0, width, 7, 2, 11]
    tokens, offsets, documents = _documents(lengths)
    batch = pack_tokens(tokens, offsets, width, token_count=800)
    with torch.no_grad():
        hidden = encoder.classifier_hidden(encoder.first_hidden(batch), batch)
        expected = encoder.softmax_input(None, batch.n_positions, hidden)
        ids, n = study.batch_tensors(documents, np.arange(len(lengths)), width, V)
        got = network.softmax_input(ids, n)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        np.testing.assert_allclose(network(ids, n).numpy(),
                                   encoder.classifier(expected).numpy(), rtol=1e-5, atol=1e-6)


def test_the_levers_networks_read_every_width_and_ignore_the_empty_columns():
    _, _, documents = _documents([1, 3, 6, 0])
    for name, shape in study.CELLS.items():
        torch.manual_seed(0)
        network = study.build_network(V, 2, shape["widths"], K, shape["embedding"])
        ids, n = study.batch_tensors(documents, np.arange(4), max(shape["widths"]), V)
        z = network.softmax_input(ids, n)
        assert z.shape == (4, K * len(shape["widths"])) and torch.isfinite(z).all(), name
        # more empty columns after a document change nothing
        wider = torch.cat([ids, torch.full((4, 5), V)], dim=1)
        torch.testing.assert_close(network.softmax_input(wider, n), z)


def test_a_fit_keeps_its_best_epoch_and_its_weights_score_as_recorded():
    rng = np.random.default_rng(1)
    lengths = rng.integers(2, 9, size=80)
    _, _, documents = _documents(lengths, seed=1)
    # the class is whether word 0 occurs: learnable
    codes = (documents[0] == 0).any(axis=1).astype(np.int64)
    torch.manual_seed(0)
    network = study.build_network(V, 2, (3,), K)
    training = dict(study.TRAINING, batch_size=10, n_epochs=6, patience=2)
    best, curve, n_steps, norms = study.fit(network, documents, codes, 0, **training)
    assert 1 <= best <= len(curve) <= 6 and n_steps == len(norms) == 8 * len(curve)
    assert curve[best - 1] == max(curve) and max(curve[:best - 1], default=-1) < max(curve)
    _, held = study.held_out(codes, 0, 0.1)
    assert study.accuracy(network, study.subset(documents, held), codes[held]) == curve[best - 1]


@pytest.mark.parametrize("width", [2, 3])
def test_the_copys_max_pooling_is_the_librarys_and_top_k_spans_max_to_mean(width):
    torch.manual_seed(1)
    encoder = WeibullConvEncoder(V, (K,), width, n_classes=3, classifier_input="hidden",
                                 classifier_pooling="max")
    with torch.no_grad():
        encoder.bias1.normal_()
    lengths = [1, 0, width, 7, 2, 11]
    tokens, offsets, documents = _documents(lengths, seed=2)
    batch = pack_tokens(tokens, offsets, width, token_count=800)
    ids, n = study.batch_tensors(documents, np.arange(len(lengths)), width, V)
    networks = {}
    for pooling in ("max", "mean", 1, 3, 11):
        network = networks[pooling] = study.build_network(V, 3, (width,), K, pooling=pooling)
        with torch.no_grad():
            network.tables[0].weight[:V] = encoder.conv1.weight
            network.biases[0].copy_(encoder.bias1)
    with torch.no_grad():
        H = encoder.first_hidden(batch)
        expected = encoder.softmax_input(None, batch.n_positions,
                                         encoder.classifier_hidden(H, batch))
        got = {p: net.softmax_input(ids, n) for p, net in networks.items()}
        # the mean of the top 3 by hand, per document, from the library's H
        top3 = torch.stack([torch.log1p(torch.topk(H[batch.position_doc == j],
                                                   min(3, int(batch.n_positions[j])),
                                                   dim=0).values.mean(dim=0))
                            for j in range(len(lengths))])
    np.testing.assert_allclose(got["max"].numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)
    # k = 1 is the max; k at least every document's positions is the mean
    np.testing.assert_allclose(got[1].numpy(), got["max"].numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got[11].numpy(), got["mean"].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[3].numpy(), top3.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="pooling"):
        study.build_network(V, 3, (width,), K, pooling=0)
