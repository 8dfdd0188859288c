"""Resource limits and numerical safety under extreme settings."""
import numpy as np
import pytest

from cpgbn import CPGBN, CPGBNInputError
from cpgbn.inference.gibbs import GibbsSampler
from cpgbn.inference.memory import estimate_bytes
from cpgbn.inference.state import Hyperparameters
from cpgbn.layers.cells import from_token_sequences

from helpers import random_texts, random_token_documents


def test_memory_estimate_covers_the_allocated_state():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 40, size=50)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    tokens = rng.integers(0, 30, size=offsets[-1]).astype(np.int32)
    data = from_token_sequences(tokens, offsets, 3, 5)
    layers = (16, 8)
    sampler = GibbsSampler(data, Hyperparameters(eta=(0.05, 0.05)), seed=0)
    state = sampler.initial_state(layers, 30)
    held = 0   # a pass holds the m store it reads and the one it writes (w is not kept)
    for _ in range(4):
        before = state.m
        sampler.sweep(state)
        assert state.w is None
        held = max(held, before.nbytes + state.m.nbytes)
    slabs = sampler.backend.count_slabs(state.globals.D.shape)  # the sweep's own slabs
    allocated = (held + state.A.nbytes + state.globals.D.nbytes
                 + slabs.nbytes + sum(t.nbytes for t in state.theta)
                 + sum(c.nbytes for c in state.c))
    estimate = estimate_bytes(data.n_docs, data.n_positions, data.n_cells, 30, 3, layers,
                              slabs.shape[0])
    # the estimate is the dense start's bound: every pair stored in both m stores
    dense_start = allocated - held + 2 * data.n_positions * layers[0] * 5
    assert allocated <= estimate <= 3 * dense_start


def test_memory_estimate_of_a_sparse_start_covers_its_stores():
    """A chain started sparse from fitted kernels (8 live kernels of 64 per position) holds
    at most the sparse estimate's stores, a fraction of the dense start's bound."""
    rng = np.random.default_rng(1)
    lengths = rng.integers(1, 40, size=80)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    tokens = rng.integers(0, 30, size=offsets[-1]).astype(np.int32)
    data = from_token_sequences(tokens, offsets, 3, 20)
    layers, hyper = (64,), Hyperparameters(eta=(0.05,))
    dense = GibbsSampler(data, hyper, seed=0)
    fitted = dense.initial_state(layers, 30)
    for _ in range(5):
        dense.sweep(fitted)
    sampler = GibbsSampler(data, hyper, seed=1)
    state = sampler.initial_state(layers, 30, fitted.globals)
    held = 0
    for _ in range(5):
        before = state.m
        sampler.sweep(state)
        held = max(held, before.nbytes + state.m.nbytes)
    args = (data.n_docs, data.n_positions, data.n_cells, 30, 3, layers, 1)
    sparse = estimate_bytes(*args, sparse_start=sampler.start_live_kernels)
    fixed = sparse - 2 * data.n_positions * sampler.start_live_kernels * 5 - 8 * data.n_positions
    assert held <= sparse - fixed < (estimate_bytes(*args) - fixed) / 4
    # a pilot's dense sample larger than the sparse stores bounds the estimate instead
    assert estimate_bytes(*args, sparse_start=8, dense_positions=data.n_positions) == \
        estimate_bytes(*args)


def test_fit_refuses_beyond_memory_limit_before_allocating():
    model = CPGBN(layers=(400,), vocab_size=30, n_iter=2, burn_in=1, memory_limit=10_000)
    with pytest.raises(CPGBNInputError, match=r"needs about .* memory_limit"):
        model.fit(random_texts(30))
    with pytest.raises(CPGBNInputError, match="memory_limit"):
        CPGBN(memory_limit=0).fit(random_texts(5))


def test_the_hybrid_and_minibatch_gibbs_are_checked_against_their_own_estimates():
    """Each mode is refused by its own estimate, not the other's: minibatch Gibbs infers every
    training document at once afterwards, but from a sparse start (8 live kernels a
    position), here less than the hybrid's graph of five documents at K_1 = 300 and its
    D-sized arrays.  A limit between the two estimates lets minibatch Gibbs fit and refuses
    the hybrid before it allocates."""
    pytest.importorskip("torch")
    from cpgbn.inference.gibbs import START_LIVE_KERNELS
    from cpgbn.inference.hybrid import ENCODER_CHUNK_POSITIONS
    from cpgbn.inference.memory import estimate_hybrid_bytes

    texts = random_texts(40, min_len=80, max_len=100)
    layers, V, batch_size = (300,), 30, 5
    from cpgbn.params import DEFAULT_TOKEN_COUNT
    from cpgbn.text import Corpus
    corpus = Corpus.from_texts(texts, vocab_size=V)   # as the estimator encodes them
    corpus_data = from_token_sequences(corpus.tokens, corpus.offsets, 3, DEFAULT_TOKEN_COUNT)
    gibbs = estimate_bytes(corpus_data.n_docs, corpus_data.n_positions, corpus_data.n_cells, V,
                           3, layers, 1, training=False, sparse_start=START_LIVE_KERNELS)
    per_batch = -(-corpus_data.n_positions * batch_size // corpus_data.n_docs)
    hybrid = estimate_hybrid_bytes(corpus_data.n_docs, corpus_data.n_positions,
                                   corpus_data.n_cells, V, 3, layers,
                                   chunk_positions=min(ENCODER_CHUNK_POSITIONS, per_batch))
    assert gibbs < 0.5 * hybrid
    limit = (hybrid + gibbs) // 2
    fast = dict(layers=layers, vocab_size=V, n_epochs=1, batch_size=batch_size, n_iter=2, burn_in=1,
                random_state=0, n_threads=1, memory_limit=limit)
    CPGBN(inference="minibatch-gibbs", **fast).fit(texts)
    with pytest.raises(CPGBNInputError, match=r"needs about .* memory_limit"):
        CPGBN(inference="hybrid", **fast).fit(texts)


def test_the_pytorch_sampler_is_checked_against_its_own_larger_estimate():
    """The PyTorch sampler on the CPU holds its m fields (the one read, the one written and
    its joined copy, the host's store) and float64 temporaries of max_elements: more than
    numba's stores.  A limit between the two estimates lets the numba fit run and refuses
    device="cpu" before anything is allocated; the estimate covers the fields a sweep holds."""
    torch = pytest.importorskip("torch")
    from cpgbn.inference.gibbs import TorchGibbsSampler
    from cpgbn.params import DEFAULT_TOKEN_COUNT
    from cpgbn.text import Corpus
    texts = random_texts(60, min_len=40, max_len=60)
    layers, V = (50,), 30
    corpus = Corpus.from_texts(texts, vocab_size=V)
    data = from_token_sequences(corpus.tokens, corpus.offsets, 3, DEFAULT_TOKEN_COUNT)
    sizes = (data.n_docs, data.n_positions, data.n_cells, V, 3, layers, 1)
    numba_bytes, cpu_bytes = estimate_bytes(*sizes), estimate_bytes(*sizes, device_type="cpu")
    assert cpu_bytes > 3 * numba_bytes
    assert estimate_bytes(*sizes, device_type="cuda") < cpu_bytes   # the GPU holds the rest
    fast = dict(layers=layers, vocab_size=V, n_iter=2, burn_in=1, random_state=0, n_threads=1,
                memory_limit=(numba_bytes + cpu_bytes) // 2)
    CPGBN(**fast).fit(texts)
    with pytest.raises(CPGBNInputError, match=r"needs about .* memory_limit"):
        CPGBN(device="cpu", **fast).fit(texts)

    from cpgbn.backends.torch.position_field import DeviceField
    sampler = TorchGibbsSampler(data, Hyperparameters(eta=(0.05,)), seed=0)
    state = sampler.on_backend(sampler.initial_state(layers, V))
    before = state.m
    sampler.sweep(state)   # from the dense start: counts at most pairs of every position
    assert isinstance(state.m, DeviceField) and state.w is None   # w not kept
    assert state.m.nnz > data.n_positions   # more than one kernel a position
    held = before.nbytes + 2 * state.m.nbytes + sampler.to_numpy(state).m.nbytes
    assert state.m.dtype == torch.int32 and held <= cpu_bytes


EXTREMES = [
    dict(layers=(1,)),                                  # a single kernel
    dict(layers=(3, 1), eta=1e-6),                      # tiny Dirichlet concentration
    dict(layers=(4,), token_count=100_000),             # huge pseudo-counts
    dict(layers=(4, 2), token_count="bernoulli-poisson", e0=1e-3, f0=1e-3),
    dict(layers=(5, 3, 2), filter_width=7),             # most documents shorter than F
]


@pytest.mark.parametrize("settings", EXTREMES, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_no_nan_or_inf_under_extreme_settings(settings):
    texts = random_texts(40, min_len=1, max_len=3, seed=1) + [" ".join(["w01"] * 1500),
                                                               " ".join(random_texts(1, 800, 800)[0:1])]
    model = CPGBN(vocab_size=30, n_iter=40, burn_in=20, random_state=0, **settings)
    features = model.fit_transform(texts)
    g = model.globals_
    for array in (features, model.transform(texts[:5]), g.D, g.r, model.loglik_trace_, *g.phi):
        assert np.all(np.isfinite(array)), settings
    assert np.all(g.D > 0) and np.all(features >= 0)
    assert np.allclose(g.D.sum(axis=(0, 1)), 1.0, rtol=1e-4)


def test_a_gpu_gibbs_fit_checks_the_host_memory_it_holds(monkeypatch):
    """With a GPU the PyTorch sampler still holds the written-back store of m on the host:
    a Gibbs fit checks it before anything is allocated.  The GPU's free memory is checked
    against what the sampler surely holds there (the offsets of the m field read and of the
    one written, 16 bytes a position, and two float64 temporaries of max_elements: a lower
    bound).  The hybrid's estimate is of arrays a GPU would hold, so it is not checked
    against the host.  No GPU is needed: the fit is refused first."""
    from cpgbn.backends.torch.devices import MAX_ELEMENTS
    torch = pytest.importorskip("torch")
    from cpgbn.modes.gibbs_mode import GibbsMode
    from cpgbn.modes.hybrid_mode import HybridMode
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    gpu = {"free": 2**40}
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (gpu["free"], 2**40))
    texts = random_texts(60, min_len=40, max_len=60)
    with pytest.raises(CPGBNInputError, match=r"needs about .* memory_limit"):
        CPGBN(layers=(50,), vocab_size=30, n_iter=2, burn_in=1, device="cuda",
              memory_limit=1000).fit(texts)
    corpus_positions = sum(len(t.split()) - 2 for t in texts)
    gpu["free"] = corpus_positions * 16 + 16 * MAX_ELEMENTS["cuda"] - 1   # one byte short
    with pytest.raises(CPGBNInputError, match=rf"needs more than .* GB of GPU memory "
                                              rf"\({corpus_positions:,} positions, 50 kernels"):
        CPGBN(layers=(50,), vocab_size=30, n_iter=2, burn_in=1, device="cuda").fit(texts)
    gpu["free"] = 2**40
    data = from_token_sequences(*random_token_documents([40, 50], 30), 3, 800)
    sizes = (data.n_docs, data.n_positions, data.n_cells, 30, 3, (50,), 1)
    settings = dict(n_threads=1, device="cuda:0", refine_iter=0, batch_size=100)
    assert GibbsMode(settings).training_bytes(data, (50,), 30) == estimate_bytes(
        *sizes, device_type="cuda")
    assert HybridMode(settings).training_bytes(data, (50,), 30) is None
