"""The backend protocols of cpgbn.inference.backend_protocols: every implementation has every member.

For each backend class (numba, PyTorch) and the hybrid's encoder backend: an instance passes
``isinstance`` against its ``runtime_checkable`` protocol, and every method the protocol
declares exists with the protocol's parameters (same names, same kinds: positional or
keyword-only), extra parameters of the implementation having defaults.  A member the schedule
starts to call belongs in the protocol, and then in both backends, or this test fails.
"""

import inspect

import numpy as np
import pytest

from cpgbn.backends.numba.numba_backend import NumbaBackend
from cpgbn.inference.backend_protocols import Backend, EncoderBackend, protocol_members
from cpgbn.layers.cells import from_token_sequences


def _data():
    return from_token_sequences(np.array([1, 2, 3, 1, 4]), np.array([0, 3, 5]), 2)


def _missing_or_different(protocol, implementation) -> list[str]:
    """The protocol's members that ``implementation`` lacks, or whose parameters differ."""
    problems = []
    for name in protocol_members(protocol):
        if not hasattr(implementation, name):
            problems.append(f"{name}: missing")
            continue
        declared = getattr(protocol, name, None)
        if not callable(declared):
            continue                                  # an attribute: present is enough
        want = list(inspect.signature(declared).parameters.values())[1:]    # without self
        have = inspect.signature(getattr(implementation, name)).parameters
        for p in want:
            if p.name not in have or have[p.name].kind != p.kind:
                problems.append(f"{name}: parameter {p.name!r} ({p.kind.description}) differs")
        extra = [q for q in have.values() if q.name not in {p.name for p in want}
                 and q.default is q.empty
                 and q.kind not in (q.VAR_POSITIONAL, q.VAR_KEYWORD)]
        problems += [f"{name}: required parameter {q.name!r} not in the protocol" for q in extra]
    return problems


def test_the_protocols_declare_what_the_schedule_calls():
    members = protocol_members(Backend)
    for name in ("data", "works_on_host", "count_dtype", "column_block", "draw_first_layer",
                 "draw_kernels", "split_tables", "draw_doc_gammas", "column_normals",
                 "assignment_changes", "to_backend", "to_numpy", "empty_like"):
        assert name in members
    assert len(members) == len(set(members))
    assert {"gradient", "apply_gradient", "mean_path", "load"} <= set(protocol_members(EncoderBackend))


def test_the_numba_backend_has_every_member():
    backend = NumbaBackend(_data(), 0)
    assert isinstance(backend, Backend)
    assert _missing_or_different(Backend, backend) == []


def test_the_torch_backend_has_every_member():
    pytest.importorskip("torch")
    from cpgbn.backends.torch.torch_backend import TorchBackend

    backend = TorchBackend(_data(), 0, device="cpu")
    assert isinstance(backend, Backend)
    assert _missing_or_different(Backend, backend) == []


def test_the_torch_encoder_backend_has_every_member():
    pytest.importorskip("torch")
    from cpgbn.backends.torch.encoder_backend import TorchEncoderBackend

    config = {"vocab_size": 6, "layers": [3, 2], "filter_width": 2}
    encoder = TorchEncoderBackend.for_training(config, init_seed=0, learning_rate=0.01)
    assert isinstance(encoder, EncoderBackend)
    assert _missing_or_different(EncoderBackend, encoder) == []
    assert isinstance(encoder.gibbs_backend(_data(), 0), Backend)


def test_the_check_finds_a_missing_member_and_a_changed_parameter():
    class Renamed(NumbaBackend):
        def draw_phi(self, phi, counts, concentration, stream):
            return phi

    problems = _missing_or_different(Backend, Renamed(_data(), 0))
    assert problems == ["draw_phi: parameter 'eta' (positional or keyword) differs",
                        "draw_phi: required parameter 'concentration' not in the protocol"]

    class Bare:
        data = None

    assert "column_normals: missing" in _missing_or_different(Backend, Bare())
    assert not isinstance(Bare(), Backend)
