"""The Weibull convolutional encoder (cpgbn.backends.torch.encoder) and the packed batch layout.

1. The embedding-lookup H equals the dense one-hot convolution relu(C_1 * X + b_1), and Sigma,
   Lambda and the upper layers equal the dense convolution over the zero-padded H and the
   MLP on pool(H), on a tiny example (with edge padding, a short and an empty document, and
   bag-of-words counts).
2. Per-document results do not depend on the batch's composition or order.
3. Shapes; no NaN or infinity (values and gradients) for empty, one-token and long documents.
4. The upward-downward structure of the draws: each layer's shape adds Phi theta of the layer
   above, theta^(1) pools w; the mean path is deterministic and equals the Weibull means;
   the chunked feature path ``mean_thetas`` equals it.
5. Bad input raises CPGBNInputError.
"""

import numpy as np
import pytest
import torch
from helpers import random_token_documents
import torch.nn.functional as nnf

from cpgbn.backends.torch.elbo import elbo_terms
from cpgbn.backends.torch.encoder import LOG_SCALE_RANGE, SHAPE_RANGE, WeibullConvEncoder
from cpgbn.backends.torch.packed import pack, pack_tokens
from cpgbn.backends.torch.weibull import weibull_mean
from cpgbn.errors import CPGBNInputError
from cpgbn.layers.cells import from_bag_of_words, from_token_sequences

V, F = 11, 3
LAYERS = (5, 4, 3)


pytestmark = pytest.mark.usefixtures("torch_one_thread")


def _documents(lengths, seed=0):
    return random_token_documents(lengths, V, seed)


def _encoder(layers=LAYERS, seed=0, pooling="mean", vocab=V, width=F, **options):
    torch.manual_seed(seed)
    return WeibullConvEncoder(vocab, layers, width, pooling=pooling, **options).double()


def _globals(layers=LAYERS, seed=0, vocab=V, width=F):
    rng = np.random.default_rng(seed)
    phi = [rng.dirichlet(np.ones(layers[t - 1]), layers[t]).T for t in range(1, len(layers))]
    D = rng.dirichlet(np.full(vocab * width, 0.5), layers[0]).T.reshape(vocab, width, layers[0])
    r = np.full(layers[-1], 1.0 / layers[-1])
    return D, phi, r


def _dense_input(data, j):
    """X_j as a dense (V, L_j) tensor from the cells (value 1, or the count)."""
    cells = slice(data.doc_cells[j], data.doc_cells[j + 1])
    X = torch.zeros(V, int(data.doc_length[j]), dtype=torch.float64)
    values = data.cell_count[cells] if len(data.cell_count) else np.ones(cells.stop - cells.start)
    for v, col, x in zip(data.cell_word[cells], data.cell_col[cells], values):
        X[v, col] += float(x)
    return X


def _dense_forward(enc, data, j):
    """Every output of the encoder for document j by dense convolutions (torch.nn.functional)."""
    K1 = enc.layers[0]
    X = _dense_input(data, j)
    H = torch.relu(nnf.conv1d(X[None], enc.conv1_weight, enc.bias1))[0]       # (K1, S_j)
    left = (enc.filter_width - 1) // 2
    padded = nnf.pad(H, (left, enc.filter_width - 1 - left))                     # (K1, L_j)
    weight = enc.position_head.weight.view(2 * K1, enc.filter_width, K1).permute(0, 2, 1)
    out = nnf.conv1d(padded[None], weight, enc.position_head.bias)[0]           # (2 K1, S_j)
    log_shape_bounds = (np.log(SHAPE_RANGE[0]), np.log(SHAPE_RANGE[1]))
    shape = torch.exp(out[:K1].clamp(*log_shape_bounds)).T
    scale = torch.exp(out[K1:].clamp(*LOG_SCALE_RANGE)).T
    h = H.mean(dim=1) if enc.pooling == "mean" else H.max(dim=1).values
    upper = []
    for hidden, head, K in zip(enc.hidden, enc.heads, enc.layers[1:]):
        h = torch.relu(hidden(h))
        o = head(h)
        upper.append((torch.exp(o[:K].clamp(*log_shape_bounds)),
                      torch.exp(o[K:].clamp(*LOG_SCALE_RANGE))))
    return H.T, shape, scale, upper


@pytest.mark.parametrize("padding, pooling, gain", [
    (0, "mean", 1.0), (2, "mean", 1.0), (0, "max", 1.0),
    (0, "mean", 30.0),          # the heads' weights scaled up, so that the clips are exercised
])
def test_lookup_equals_dense_convolution(padding, pooling, gain):
    tokens, offsets = _documents([6, 1, 0, 9, 3])
    data = from_token_sequences(tokens, offsets, F, padding=padding)
    enc = _encoder(pooling=pooling)
    batch = pack(data)
    with torch.no_grad():
        for head in [enc.position_head, *enc.heads]:
            head.weight.mul_(gain)
        H = enc.first_hidden(batch)
        out = enc(batch)
        for j in range(data.n_docs):
            rows = slice(data.doc_positions[j], data.doc_positions[j + 1])
            H_d, shape_d, scale_d, upper_d = _dense_forward(enc, data, j)
            torch.testing.assert_close(H[rows], H_d, rtol=1e-12, atol=1e-12)
            torch.testing.assert_close(out.position_shape[rows], shape_d, rtol=1e-12, atol=0)
            torch.testing.assert_close(out.position_scale[rows], scale_d, rtol=1e-12, atol=0)
            for t, (shape, scale) in enumerate(upper_d):
                torch.testing.assert_close(out.layer_shape[t][j], shape, rtol=1e-12, atol=0)
                torch.testing.assert_close(out.layer_scale[t][j], scale, rtol=1e-12, atol=0)
    assert H.shape == (data.n_positions, LAYERS[0])
    assert (H >= 0).all()
    if gain > 1:   # both ends of the shapes' clip reached
        shapes = torch.cat([out.position_shape.flatten()] + [s.flatten() for s in out.layer_shape])
        assert torch.isclose(shapes, torch.tensor(SHAPE_RANGE[0], dtype=shapes.dtype)).any()
        assert torch.isclose(shapes, torch.tensor(SHAPE_RANGE[1], dtype=shapes.dtype)).any()


def test_bag_of_words_counts_enter_the_lookup():
    """F = 1 and one column per document: H = relu(C_1 x + b_1) with the word counts x."""
    tokens, offsets = _documents([7, 2, 12], seed=3)
    data = from_bag_of_words(tokens, offsets)
    enc = _encoder(layers=(4, 2), width=1)
    with torch.no_grad():
        H = enc.first_hidden(pack(data))
        for j in range(data.n_docs):
            H_d = _dense_forward(enc, data, j)[0]
            torch.testing.assert_close(H[j:j + 1], H_d, rtol=1e-12, atol=1e-12)
            counts = np.bincount(tokens[offsets[j]:offsets[j + 1]], minlength=V)
            x = torch.tensor(counts, dtype=torch.float64)
            manual = torch.relu(enc.conv1_weight[:, :, 0] @ x + enc.bias1)
            torch.testing.assert_close(H[j], manual, rtol=1e-12, atol=1e-12)


def test_results_do_not_depend_on_batch_composition():
    tokens, offsets = _documents([6, 1, 0, 9, 3, 14], seed=5)
    data = from_token_sequences(tokens, offsets, F, token_count=7, padding=1)
    enc = _encoder()
    D, phi, r = _globals()
    full, part = pack(data), pack(data, docs=[4, 1, 3])
    with torch.no_grad():
        out_full, out_part = enc(full), enc(part)
        mean_full = enc.sample(full, phi, mean=True, output=out_full)
        mean_part = enc.sample(part, phi, mean=True, output=out_part)
        terms_full = elbo_terms(full, mean_full, D, phi, r)
        terms_part = elbo_terms(part, mean_part, D, phi, r)
    for i, j in enumerate([4, 1, 3]):
        rows_full = slice(data.doc_positions[j], data.doc_positions[j + 1])
        p = part.doc_positions
        rows_part = slice(int(p[i]), int(p[i + 1]))
        for a, b in ((out_full.position_shape, out_part.position_shape),
                     (out_full.position_scale, out_part.position_scale),
                     (mean_full.w, mean_part.w)):
            torch.testing.assert_close(a[rows_full], b[rows_part], rtol=1e-12, atol=0)
        for a, b in zip(mean_full.theta, mean_part.theta):
            torch.testing.assert_close(a[j], b[i], rtol=1e-12, atol=0)
        torch.testing.assert_close(terms_full.negative_elbo[j], terms_part.negative_elbo[i],
                                   rtol=1e-12, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_shapes_and_finite_values_for_empty_short_and_long_documents(dtype):
    tokens, offsets = _documents([0, 1, 2, 3000, 5], seed=7)
    batch = pack_tokens(tokens, offsets, F, token_count=25)
    enc = _encoder().to(dtype)
    D, phi, r = _globals()
    sample = enc.sample(batch, phi, generator=torch.Generator().manual_seed(0))
    P, B = batch.n_total_positions, batch.n_docs
    assert P == 1 + 1 + 1 + 2998 + 3
    assert sample.w.shape == sample.w_shape.shape == sample.w_scale.shape == (P, LAYERS[0])
    assert [t.shape for t in sample.theta] == [(B, K) for K in LAYERS]
    assert [t.shape for t in sample.theta_shape] == [(B, K) for K in LAYERS[1:]]
    assert all(t.dtype == dtype for t in [sample.w] + sample.theta)
    terms = elbo_terms(batch, sample, D, phi, r)
    loss = terms.loss(n_docs_total=1000)
    for value in [sample.w, *sample.theta, terms.log_likelihood, *terms.kl]:
        assert torch.isfinite(value).all()
    loss.backward()
    for name, parameter in enc.named_parameters():
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), name


@pytest.mark.parametrize("w_shape_above", ["paper", "pooled"])
def test_draws_are_upward_downward(w_shape_above):
    tokens, offsets = _documents([4, 8, 2], seed=9)
    batch = pack_tokens(tokens, offsets, F)
    enc = _encoder(w_shape_above=w_shape_above)
    _, phi, _ = _globals()
    with torch.no_grad():
        out = enc(batch)
        sample = enc.sample(batch, phi, output=out, generator=torch.Generator().manual_seed(1))
    phi_t = [torch.tensor(p) for p in phi]
    theta = sample.theta
    torch.testing.assert_close(sample.theta_shape[-1], out.layer_shape[-1])   # top: sigma^(T)
    torch.testing.assert_close(sample.theta_shape[0], out.layer_shape[0] + theta[2] @ phi_t[1].T)
    from_above = (theta[1] @ phi_t[0].T)[batch.position_doc]
    if w_shape_above == "pooled":
        from_above = from_above / batch.n_positions[batch.position_doc, None]
    torch.testing.assert_close(sample.w_shape, out.position_shape + from_above)
    torch.testing.assert_close(sample.w_scale, out.position_scale)
    pooled = torch.zeros_like(theta[0]).index_add_(0, batch.position_doc, sample.w)
    torch.testing.assert_close(theta[0], pooled)
    # one layer (CPFA): q(w) = Weibull(Sigma, Lambda), no globals needed
    single = _encoder(layers=(5,))
    with torch.no_grad():
        s1 = single.sample(batch, [], generator=torch.Generator().manual_seed(1))
        torch.testing.assert_close(s1.w_shape, single(batch).position_shape)
    assert s1.n_layers == 1


def test_mean_path_is_deterministic_and_uses_weibull_means():
    tokens, offsets = _documents([5, 3], seed=11)
    batch = pack_tokens(tokens, offsets, F)
    enc = _encoder()
    _, phi, _ = _globals()
    with torch.no_grad():
        a = enc.sample(batch, phi, mean=True)
        b = enc.sample(batch, phi, mean=True)
    for x, y in zip([a.w] + a.theta, [b.w] + b.theta):
        torch.testing.assert_close(x, y, rtol=0, atol=0)
    torch.testing.assert_close(a.w, weibull_mean(a.w_shape, a.w_scale))
    for t in range(len(a.theta_shape)):
        torch.testing.assert_close(a.theta[t + 1], weibull_mean(a.theta_shape[t], a.theta_scale[t]))


@pytest.mark.parametrize("layers", [(5,), (5, 4), LAYERS])
@pytest.mark.parametrize("above", ["paper", "pooled"])
@pytest.mark.parametrize("chunk", [1, 7, 10_000])
def test_chunked_mean_thetas_equal_the_mean_path(layers, above, chunk):
    tokens, offsets = _documents([5, 0, 1, 12, 3, 9], seed=12)
    batch = pack_tokens(tokens, offsets, F)
    enc = _encoder(layers, w_shape_above=above)
    _, phi, _ = _globals(layers)
    with torch.no_grad():
        mean = enc.sample(batch, phi, mean=True)
    w = torch.full_like(mean.w, float("nan"))
    got = enc.mean_thetas(batch, phi, chunk_positions=chunk, w_out=w)
    assert len(got) == len(layers)
    for x, y in zip(got + [w], mean.theta + [mean.w]):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=0)
    with pytest.raises(CPGBNInputError, match="w_out must have shape"):
        enc.mean_thetas(batch, phi, w_out=w[1:])


@pytest.mark.parametrize("layers", [(5,), LAYERS])
def test_a_bfloat16_position_head_rounds_only_the_head(layers):
    """head_dtype=torch.bfloat16: theta^(1) within bfloat16 rounding of float32's (the
    head's pre-activations carry 8 mantissa bits: a few per cent at most on a position's
    Weibull mean), not equal to it (the rounding happened), the upper layers untouched."""
    tokens, offsets = _documents([5, 0, 1, 12, 3, 9], seed=14)
    batch = pack_tokens(tokens, offsets, F)
    enc = _encoder(layers)
    _, phi, _ = _globals(layers)
    full = enc.mean_thetas(batch, phi, chunk_positions=7)
    w = torch.empty(batch.n_total_positions, layers[0], dtype=full[0].dtype)
    half = enc.mean_thetas(batch, phi, chunk_positions=7, head_dtype=torch.bfloat16, w_out=w)
    assert all(x.dtype == full[0].dtype for x in half)
    torch.testing.assert_close(half[0], full[0], rtol=0.05, atol=1e-6)
    assert not torch.equal(half[0], full[0])
    for x, y in zip(half[1:], full[1:]):
        torch.testing.assert_close(x, y, rtol=0, atol=0)


def test_bad_input_raises():
    tokens, offsets = _documents([5, 3])
    batch = pack_tokens(tokens, offsets, F)
    enc = _encoder()
    _, phi, _ = _globals()
    with pytest.raises(CPGBNInputError, match="Phi"):
        enc.sample(batch, phi[:1])
    with pytest.raises(CPGBNInputError, match="shape"):
        enc.sample(batch, [phi[0].T, phi[1]])
    with pytest.raises(CPGBNInputError, match="filter width"):
        enc(pack_tokens(tokens, offsets, 2))
    with pytest.raises(CPGBNInputError, match="vocabulary"):
        _encoder(vocab=5)(batch)
    with pytest.raises(CPGBNInputError, match="pooling"):
        WeibullConvEncoder(V, LAYERS, F, pooling="sum")
    with pytest.raises(CPGBNInputError, match="w_shape_above"):
        WeibullConvEncoder(V, LAYERS, F, w_shape_above="half")
    with pytest.raises(CPGBNInputError, match="out of range"):
        pack(from_token_sequences(tokens, offsets, F), docs=[2])


def test_a_saved_configuration_without_the_shape_choice_rebuilds_the_paper_form():
    # models saved before "pooled" became the default name no choice; theirs was "paper"
    from cpgbn.backends.torch.encoder_backend import build_encoder
    from cpgbn.inference.hybrid import ENCODER_DEFAULTS
    old = {"vocab_size": V, "layers": list(LAYERS), "filter_width": F}
    assert build_encoder(old).w_shape_above == "paper"
    assert build_encoder({**old, **ENCODER_DEFAULTS}).w_shape_above == "pooled"
    assert WeibullConvEncoder(V, LAYERS, F).w_shape_above == ENCODER_DEFAULTS["w_shape_above"]
    # the trainer's written-out defaults are the encoder's own
    assert WeibullConvEncoder(V, LAYERS, F).pooling == ENCODER_DEFAULTS["pooling"]
