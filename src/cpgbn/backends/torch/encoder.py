"""The Weibull convolutional inference network of CPGBN (paper section 2.3, Fig. 1 lower part).

Symbols and shapes (B documents in a batch, P = sum_j S_j positions, C cells, V vocabulary,
F filter width, K_t units of layer t, T layers; the batch layout is
:class:`~cpgbn.backends.torch.packed.PackedDocuments`):

* H^(1)_j = relu(C_1 * X_j + b_1)                  H: (P, K_1), one row per position s of
  document j.  C_1 is (K_1, V, F); since X_j is one-hot, (C_1 * X_j)[:, s] =
  sum_f C_1[:, v_{s+f}, f], so H is an embedding lookup of each cell's word (a table of V rows
  of F * K_1 numbers) summed over the F-window: no dense one-hot tensor is ever built.  Cells
  carry a value x (1 for text, the count for bag-of-words) that multiplies the looked-up row.
* Sigma_j = exp(C_2 * pad(H_j) + b_2), Lambda_j = exp(C_3 * pad(H_j) + b_3)   both (P, K_1):
  the shape and scale of q(w_jks) before the top-down term.  C_2, C_3 are (K_1, K_1, F); pad
  adds F - 1 zero columns ((F - 1) // 2 left, the rest right; the paper does not say how they
  are split) so that the output has S_j columns again.
* h^(1)_j = pool(H_j)                              (B, K_1), the mean over the S_j positions
  (``pooling="mean"``, the default) or the maximum (``pooling="max"``).  The mean is the
  default because the generative pooling layer is linear too (theta^(1)_jk = sum_s w_jks, so
  the mean of H is the same summary up to the factor 1/S_j), every position receives gradient
  (the max passes it to one position per unit), and its activations stay on one scale for a
  5-token question and a 1000-token review.  Neither keeps the document's length; the scales
  lambda^(t) below have to be learned from the content alone (the paper's architecture).
* h^(t)_j = relu(U_1^(t) h^(t-1)_j + b_1^(t)), sigma^(t)_j = exp(U_2^(t) h^(t)_j + b_2^(t)),
  lambda^(t)_j = exp(U_3^(t) h^(t)_j + b_3^(t))    all (B, K_t), t = 2..T.

The variational distribution is upward-downward (paper eq. for Q, as in WHAI): drawn from
the top layer down,

    q(theta^(T)_j)  = Weibull(sigma^(T)_j, lambda^(T)_j),
    q(theta^(t)_j)  = Weibull(sigma^(t)_j + Phi^(t+1) theta^(t+1)_j, lambda^(t)_j),  t = T-1..2,
    q(w_jks)        = Weibull(Sigma_jks + (Phi^(2) theta^(2)_j)_k, Lambda_jks),

and theta^(1)_jk = sum_s w_jks (the pooling layer).  By default (``w_shape_above="pooled"``) the
shape of w adds the per-position share (Phi^(2) theta^(2)_j)_k / S_j, which is w's own prior
shape (paper eq. 3), the analogue of what every upper layer adds (its prior shape, as in WHAI)
and of the Gibbs conditional Gam(m_jks + a_jk / S_j, .); ``"paper"`` adds the whole
(Phi^(2) theta^(2)_j)_k as the paper writes it.  With "paper" every position's shape is at least
a_jk (typically >> 1), so q(w) cannot put its mass near 0 where the prior Gam(a_jk / S_j, .) of
an empty position has it, and every (position, kernel) pair pays that in the KL: on TREC the
weights' KL per token is 128-147 nats with "pooled" against 199-224 with "paper" (three seeds),
and the held-out bound 1865 against 1964 nats per token, at the same accuracy of the features
(docs/hybrid.md).  "paper" stays for the models saved before that
choice (their configuration names none: :func:`cpgbn.backends.torch.encoder_backend.build_encoder`
reads them as "paper").  With
T = 1 (CPFA) there is no layer above w and its shape is Sigma alone.

The Weibull family has a floor on its KL to a gamma of small shape alpha, whatever k and
lambda: min over (k, lambda) of KL(Weibull || Gam(alpha, 1)) is 1.34, 1.01, 0.58, 0.16 nats at
alpha = 1e-4, 1e-3, 1e-2, 0.1 (optimal k 0.0008, 0.006, 0.04, 0.22), and 5.3, 3.1, 0.98, 0.79
nats with k held at 0.1.  Every (position, kernel) pair of a document pays it, so on text
(a_jk / S_j of 1e-3 to 1e-2) the KL of the weights is of the order of S_j * K_1 nats per
document, and the clip of the encoder's shapes at 0.1 (:data:`SHAPE_RANGE`) costs an empty
position about 2 nats more.

Safe ranges: the logarithms of every shape (Sigma, sigma) are clipped to [ln 0.1, ln 1000]
and of every scale (Lambda, lambda) to [-40, 20] before the exp (:data:`SHAPE_RANGE`,
:data:`LOG_SCALE_RANGE`); see their comments for why.  The draws themselves are clipped by
:func:`~cpgbn.backends.torch.weibull.weibull_rsample`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from ...errors import CPGBNInputError
from .packed import PackedDocuments, gather_rows, segment_sum
from .weibull import weibull_mean, weibull_rsample

__all__ = ["WeibullConvEncoder", "EncoderOutput", "WeibullSample", "SHAPE_RANGE",
           "LOG_SCALE_RANGE", "W_SHAPE_ABOVE", "CLASSIFIER_INPUTS"]

#: Bounds of the encoder's Weibull shapes (Sigma, sigma^(t)).  Below: a draw is
#: lambda E^(1/k), so k >= 0.1 keeps the exponent <= 10 (the draw spans at most
#: eps^10 .. 16^10 times lambda, and the reparameterisation gradient -x ln(E) / k^2 stays
#: moderate).  The price: the KL to a gamma prior of tiny shape is smallest at a smaller k
#: (0.006 for shape 1e-3; module docstring), so an empty position pays about 2 nats more than
#: the Weibull family's floor.  Above: exp of an unbounded linear output overflows float32 past
#: e^88; k = 1000 (a coefficient of variation of 0.1%) is sharper than any gamma posterior of
#: the model needs (shape 1e6).
SHAPE_RANGE = (0.1, 1000.0)
#: The choices of ``w_shape_above`` (module docstring).
W_SHAPE_ABOVE = ("paper", "pooled")
#: Bounds of ln Lambda and ln lambda^(t).  e^-40 (4e-18) is still a normal float32 whose
#: logarithm and products with kernel entries stay finite, and small enough for the mean of an
#: empty position, lambda Gamma(1 + 1/k) ~ 1e-5 at k = 0.1 (lambda ~ 3e-12); e^20 (5e8) is far
#: above any count a document carries, and times Gamma(1 + 1/k) <= 3.6e6 stays below
#: sqrt(float32 max).
LOG_SCALE_RANGE = (-40.0, 20.0)
_LOG_SHAPE_RANGE = (math.log(SHAPE_RANGE[0]), math.log(SHAPE_RANGE[1]))
_POOLINGS = ("mean", "max")
#: What sCPGBN's softmax reads (:meth:`WeibullConvEncoder.class_logits`): "theta", the paper's
#: theta^(1..T); "hidden+theta", the pooled first hidden layer h^(1) beside them; "hidden",
#: h^(1) alone (the one-hot CNN that the discriminative baseline trains).
CLASSIFIER_INPUTS = ("theta", "hidden+theta", "hidden")


@dataclass
class EncoderOutput:
    """The deterministic part of the encoder for one batch (no globals involved).

    position_shape, position_scale : (P, K_1) -- Sigma and Lambda of q(w), per position row.
    layer_shape, layer_scale : lists of (B, K_t) for t = 2..T (index t - 2) -- sigma^(t),
        lambda^(t).
    pooled_hidden : (B, K_1) -- H pooled over the positions as the softmax reads it
        (``classifier_pooling``; with ``classifier_input`` "hidden+theta" or "hidden"); the
        mean, h^(1), is what the upper layers read.
    padded_hidden : (P + 1, K_1) -- H with its zero sentinel row: every path from a
        document's words to the outputs goes through it (explanations differentiate by it).
    """

    position_shape: torch.Tensor
    position_scale: torch.Tensor
    layer_shape: list
    layer_scale: list
    pooled_hidden: torch.Tensor | None = None
    padded_hidden: torch.Tensor | None = None


@dataclass
class WeibullSample:
    """A top-down draw (or the top-down means) of the local variables of one batch.

    w : (P, K_1) -- w_jks, one row per position.
    w_shape, w_scale : (P, K_1) -- the Weibull parameters of q(w): Sigma + (Phi^(2) theta^(2))_k
        broadcast to the document's positions, and Lambda.
    theta : list of (B, K_t) for t = 1..T (index t - 1) -- theta^(1)_j = sum_s w_js (pooling),
        then the drawn theta^(2..T).
    theta_shape, theta_scale : lists of (B, K_t) for t = 2..T (index t - 2) -- the parameters
        of q(theta^(t)): sigma^(t) + Phi^(t+1) theta^(t+1) (sigma^(T) at the top), lambda^(t).

    Every tensor is differentiable in the encoder's parameters (the globals are constants).
    """

    w: torch.Tensor
    w_shape: torch.Tensor
    w_scale: torch.Tensor
    theta: list
    theta_shape: list
    theta_scale: list

    @property
    def n_layers(self) -> int:
        return len(self.theta)


class WeibullConvEncoder(nn.Module):
    """The convolutional inference network: documents -> parameters of the Weibull q.

    Parameters
    ----------
    vocab_size : int
        V.
    layers : sequence of int
        (K_1, ..., K_T), as the model's ``layers``.
    filter_width : int
        F, the model's filter width.
    pooling : "mean" or "max"
        pool(H) over the positions of a document (see the module docstring for the choice).
    w_shape_above : "paper" or "pooled"
        What the layer above adds to the shape of q(w): (Phi^(2) theta^(2)_j)_k, or that divided
        by S_j (module docstring).

    Parameters of the network (paper names):

    * ``conv1``: nn.Embedding(V, F * K_1), row v = C_1[:, v, :] laid out (f, k); ``bias1``: b_1.
    * ``position_head``: nn.Linear(F * K_1, 2 * K_1) on the F-window of pad(H) laid out (o, k);
      its first K_1 outputs are C_2 * pad(H) + b_2 (ln Sigma), the last K_1 C_3 * pad(H) + b_3
      (ln Lambda).
    * ``hidden[t - 2]``: nn.Linear(K_{t-1}, K_t) = U_1^(t), b_1^(t); ``heads[t - 2]``:
      nn.Linear(K_t, 2 K_t) = (U_2^(t); U_3^(t)), (b_2^(t); b_3^(t)), for t = 2..T.
    """

    def __init__(self, vocab_size: int, layers, filter_width: int, *, pooling: str = "mean",
                 w_shape_above: str = "pooled", n_classes: int = 0,
                 classifier_input: str = "theta", classifier_dropout: float = 0.0,
                 classifier_pooling: str = "mean"):
        super().__init__()
        layers = tuple(int(k) for k in layers)
        if int(vocab_size) < 1:
            raise CPGBNInputError(f"vocab_size must be >= 1, got {vocab_size}")
        if not layers or min(layers) < 1:
            raise CPGBNInputError(f"layers must be positive integers, got {layers}")
        if int(filter_width) < 1:
            raise CPGBNInputError(f"filter_width must be >= 1, got {filter_width}")
        if pooling not in _POOLINGS:
            raise CPGBNInputError(f"pooling must be one of {_POOLINGS}, got {pooling!r}")
        self.vocab_size = int(vocab_size)
        self.layers = layers
        self.filter_width = int(filter_width)
        if w_shape_above not in W_SHAPE_ABOVE:
            raise CPGBNInputError(f"w_shape_above must be one of {W_SHAPE_ABOVE}, got "
                                  f"{w_shape_above!r}")
        self.pooling = pooling
        self.w_shape_above = w_shape_above
        K1, F = layers[0], self.filter_width
        self.conv1 = nn.Embedding(self.vocab_size, F * K1)
        # a text column holds one word, so a position sums F rows: unit variance before relu
        nn.init.normal_(self.conv1.weight, std=1.0 / math.sqrt(F))
        self.bias1 = nn.Parameter(torch.zeros(K1))
        self.position_head = nn.Linear(F * K1, 2 * K1)
        self.hidden = nn.ModuleList(nn.Linear(layers[t - 1], layers[t])
                                    for t in range(1, len(layers)))
        self.heads = nn.ModuleList(nn.Linear(k, 2 * k) for k in layers[1:])
        if int(n_classes) < 0 or int(n_classes) == 1:
            raise CPGBNInputError(f"n_classes must be 0 (no classifier) or >= 2, got {n_classes}")
        self.n_classes = int(n_classes)
        if classifier_input not in CLASSIFIER_INPUTS:
            raise CPGBNInputError(f"classifier_input must be one of {CLASSIFIER_INPUTS}, got "
                                  f"{classifier_input!r}")
        if not 0.0 <= float(classifier_dropout) < 1.0:
            raise CPGBNInputError(f"classifier_dropout must be in [0, 1), got "
                                  f"{classifier_dropout!r}")
        self.classifier_input = classifier_input
        self.classifier_dropout = float(classifier_dropout)
        if classifier_pooling not in _POOLINGS:
            raise CPGBNInputError(f"classifier_pooling must be one of {_POOLINGS}, got "
                                  f"{classifier_pooling!r}")
        self.classifier_pooling = classifier_pooling
        # sCPGBN (paper section 2.3): a softmax on the concatenation of theta^(1..T) (and of
        # the pooled first hidden layer, by classifier_input)
        width = {"theta": sum(layers), "hidden+theta": K1 + sum(layers), "hidden": K1}
        self.classifier = (nn.Linear(width[classifier_input], self.n_classes)
                           if self.n_classes else None)

    @property
    def reads_hidden(self) -> bool:
        """Whether the softmax reads h^(1) (``classifier_input`` "hidden+theta" or "hidden")."""
        return self.classifier_input != "theta"

    @property
    def reads_theta(self) -> bool:
        """Whether the softmax reads theta^(1..T) (``classifier_input`` "theta" or
        "hidden+theta")."""
        return self.classifier_input != "hidden"

    # ------------------------------------------------------------------ deterministic part
    @property
    def conv1_weight(self) -> torch.Tensor:
        """C_1 as the paper's (K_1, V, F) tensor (a view of ``conv1.weight``)."""
        K1, F = self.layers[0], self.filter_width
        return self.conv1.weight.view(self.vocab_size, F, K1).permute(2, 0, 1)

    def _check_batch(self, batch: PackedDocuments) -> None:
        if batch.filter_width != self.filter_width:
            raise CPGBNInputError(f"the batch was packed for filter width {batch.filter_width}, "
                                  f"the encoder has {self.filter_width}")
        if batch.n_cells and int(batch.cell_word.max()) >= self.vocab_size:
            raise CPGBNInputError(f"word id {int(batch.cell_word.max())} out of range for the "
                                  f"encoder's vocabulary of {self.vocab_size}")

    def first_hidden(self, batch: PackedDocuments) -> torch.Tensor:
        """H = relu(C_1 * X + b_1), (P, K_1): position s sums, for f = 0..F-1, filter row f of
        the word in column s + f (times its x).  A view of :meth:`_padded_hidden`."""
        return self._padded_hidden(batch)[:-1]

    def _padded_hidden(self, batch: PackedDocuments) -> torch.Tensor:
        """H with a zero row P appended, (P + 1, K_1): the sentinel that ``position_window``
        points at outside a document (the zero padding of pad(H)).

        One ``embedding_bag`` over the (V F, K_1) view of ``conv1``'s table, the bags being the
        batch's ``bag_rows`` / ``bag_offsets`` plus an empty bag for the sentinel: a fused
        gather-and-sum, several times faster than gathering every cell's F rows and scattering
        them with index_add, and no copy of H to append the padding row."""
        self._check_batch(batch)
        K1, P = self.layers[0], batch.n_total_positions
        table = self.conv1.weight.view(-1, K1)
        offsets = torch.cat([batch.bag_offsets, batch.bag_offsets.new_full((1,), len(batch.bag_rows))])
        padded = torch.nn.functional.embedding_bag(
            batch.bag_rows, table, offsets, mode="sum",
            per_sample_weights=batch.bag_weights.to(table.dtype))
        padded[:P] += self.bias1
        return padded.relu_()

    def pool(self, H: torch.Tensor, batch: PackedDocuments, how: str | None = None
             ) -> torch.Tensor:
        """h^(1)_j = pool(H_j), (B, K_1): mean or max (``how``; default the encoder's
        ``pooling``) over the document's S_j >= 1 positions."""
        B = batch.n_docs
        if (how or self.pooling) == "mean":
            total = segment_sum(H, batch.position_doc, B)
            return total / batch.n_positions.to(H.dtype)[:, None]
        index = batch.position_doc[:, None].expand_as(H)
        return H.new_zeros((B, H.shape[1])).scatter_reduce(0, index, H, "amax",
                                                           include_self=False)

    def _shape_and_scale(self, pre: torch.Tensor, K: int) -> tuple[torch.Tensor, torch.Tensor]:
        shape = torch.exp(pre[..., :K].clamp(*_LOG_SHAPE_RANGE))
        scale = torch.exp(pre[..., K:].clamp(*LOG_SCALE_RANGE))
        return shape, scale

    def _position_window(self, padded: torch.Tensor, batch: PackedDocuments, rows=slice(None)):
        """The F-wide windows of pad(H) at the positions ``rows``, (n, F K_1), from H with its
        sentinel row (``_padded_hidden``)."""
        K1, F = self.layers[0], self.filter_width
        return gather_rows(padded, batch.position_window[rows]).reshape(-1, F * K1)

    def _position_pre(self, padded: torch.Tensor, batch: PackedDocuments, rows=slice(None)):
        """[C_2; C_3] * pad(H) + [b_2; b_3] at the positions ``rows``: (n, 2 K_1)."""
        return self.position_head(self._position_window(padded, batch, rows))

    def classifier_hidden(self, H: torch.Tensor, batch: PackedDocuments,
                          pooled: torch.Tensor | None = None) -> torch.Tensor:
        """What the softmax reads of H, (B, K_1): its pooling over the positions by
        ``classifier_pooling`` (``pooled``: the document path's h^(1), reused when the two
        poolings agree)."""
        if pooled is not None and self.classifier_pooling == self.pooling:
            return pooled
        return self.pool(H, batch, self.classifier_pooling)

    def _document_path(self, H: torch.Tensor, batch: PackedDocuments):
        """sigma^(t), lambda^(t) for t = 2..T from h^(1) = pool(H): two lists of (B, K_t), and
        h^(1) itself, (B, K_1)."""
        h = pooled = self.pool(H, batch)
        layer_shape, layer_scale = [], []
        for hidden, head, K in zip(self.hidden, self.heads, self.layers[1:]):
            h = torch.relu(hidden(h))
            shape, scale = self._shape_and_scale(head(h), K)
            layer_shape.append(shape)
            layer_scale.append(scale)
        return layer_shape, layer_scale, pooled

    def forward(self, batch: PackedDocuments, *, hidden_gradient: bool = True) -> EncoderOutput:
        """Sigma, Lambda (per position), sigma^(t), lambda^(t) and h^(1) (per document).

        ``hidden_gradient=False``: the heads (Sigma, Lambda and the upper layers) read H
        detached, so a loss of theirs (the ELBO) sends no gradient into the first layer's
        filters C_1, b_1; ``pooled_hidden`` keeps its gradient (the softmax's path)."""
        padded = self._padded_hidden(batch)
        heads = padded if hidden_gradient else padded.detach()
        pre = self._position_pre(heads, batch)
        position_shape, position_scale = self._shape_and_scale(pre, self.layers[0])
        layer_shape, layer_scale, pooled = self._document_path(heads[:-1], batch)
        pooled = self.classifier_hidden(padded[:-1], batch,
                                        pooled if hidden_gradient else None)
        return EncoderOutput(position_shape, position_scale, layer_shape, layer_scale, pooled,
                             padded)

    @torch.no_grad()
    def mean_thetas(self, batch: PackedDocuments, phi=(), *, chunk_positions: int = 2048,
                    w_out: torch.Tensor | None = None,
                    head_dtype: torch.dtype | None = None,
                    hidden_out: torch.Tensor | None = None) -> list:
        """theta^(1..T) of ``sample(batch, phi, mean=True)`` (equal up to float rounding)
        without its (P, K_1) tensors: a list of (B, K_t), no gradient.  With ``w_out``, a
        (P, K_1) tensor, the Weibull means of w (``sample``'s ``w``) are also written into it
        (a start for Gibbs sweeps, :func:`cpgbn.inference.hybrid.refine_with_gibbs`).

        The feature path for new documents.  Positions are taken ``chunk_positions`` at a
        time: each chunk's window, [ln Sigma; ln Lambda], the shape of q(w) and the Weibull
        mean Lambda Gamma(1 + 1/k) are computed in place on a block small enough to stay in
        cache and summed into theta^(1) (the pooling layer) before the next chunk; the
        upper layers' means are those of ``sample``.  Memory-bound elementwise passes over
        all P positions were two thirds of the time of ``sample(mean=True)`` on IMDB reviews.

        ``head_dtype=torch.bfloat16`` runs the position head [C_2; C_3] * pad(H), some two
        thirds of the time once the passes above were fused, on bfloat16 copies of pad(H) and
        of the head's weights (float32 sums); its outputs ln Sigma and ln Lambda keep 8
        significant bits (Sigma and Lambda move by up to |ln Sigma| 2^-8 relative), and all
        that follows runs in the encoder's dtype (None: the head too).  Fast where the CPU
        has bfloat16 dot products (AVX512-BF16, AMX) or on a GPU; emulated, and slower,
        elsewhere.  ``benchmarks/hybrid_imdb.py`` measures its time and its features'
        accuracy.

        ``hidden_out``, a (B, K_1) tensor, receives h^(1) = pool(H) (what the softmax reads
        beside the thetas with ``classifier_input`` "hidden+theta").
        """
        phi = self._check_phi(phi)
        K1 = self.layers[0]
        if w_out is not None and tuple(w_out.shape) != (batch.n_total_positions, K1):
            raise CPGBNInputError(f"w_out must have shape {(batch.n_total_positions, K1)}, got "
                                  f"{tuple(w_out.shape)}")
        padded = self._padded_hidden(batch)
        H = padded[:-1]
        layer_shape, layer_scale, pooled = self._document_path(H, batch)
        if hidden_out is not None:
            hidden_out.copy_(self.classifier_hidden(H, batch, pooled))
        phi = [torch.as_tensor(p, dtype=H.dtype, device=H.device) for p in phi]
        upper, _, _ = self._top_down(layer_shape, layer_scale, phi, weibull_mean)
        from_above = self._w_shape_from_above(upper, phi, batch)     # (B, K_1) or None
        theta1 = H.new_zeros((batch.n_docs, K1))
        low, high = _LOG_SHAPE_RANGE
        # the head's shape and scale halves as two products, so that every elementwise pass
        # below runs on a contiguous block (on a strided half, torch hands MKL one row at a
        # time, and each call opens a thread team: 300x slower when numba's OpenMP runtime
        # started first; see cpgbn/__init__.py)
        dtype = H.dtype
        head_dtype = dtype if head_dtype is None else head_dtype
        weight, bias = (self.position_head.weight.to(head_dtype),
                        self.position_head.bias.to(head_dtype))
        shape_head, scale_head = (weight[:K1].T, bias[:K1]), (weight[K1:].T, bias[K1:])
        head_input = padded.to(head_dtype)   # no copy at the encoder's own dtype
        for lo in range(0, batch.n_total_positions, int(chunk_positions)):
            rows = slice(lo, min(batch.n_total_positions, lo + int(chunk_positions)))
            window = self._position_window(head_input, batch, rows)
            doc = batch.position_doc[rows]
            shape = torch.addmm(shape_head[1], window, shape_head[0]).to(dtype)
            shape.clamp_(low, high).exp_()
            if from_above is not None:
                shape += from_above[doc]
            # ln E[w] = ln Lambda + lnGamma(1 + 1/k), as weibull_mean
            log_mean = shape.reciprocal_().add_(1.0).lgamma_()
            log_mean += (torch.addmm(scale_head[1], window, scale_head[0]).to(dtype)
                         .clamp_(*LOG_SCALE_RANGE))
            theta1.index_add_(0, doc, log_mean.exp_())
            if w_out is not None:
                w_out[rows] = log_mean
        return [theta1] + upper

    # ------------------------------------------------------------------ the classifier
    def class_logits(self, thetas, n_positions: torch.Tensor, hidden: torch.Tensor | None = None,
                     *, generator: torch.Generator | None = None) -> torch.Tensor:
        """sCPGBN's softmax layer (paper section 2.3) on B documents: (B, C) logits
        = W z_j + b, z_j the concatenation of what ``classifier_input`` names:
        ln(1 + h^(1)_j) for the pooled first hidden layer (``hidden``, (B, K_1)) and
        ln(1 + theta^(t)_j / S_j), t = 1..T (``thetas``).

        The paper feeds the concatenation of the thetas and says no more.  theta^(1)_j sums
        w over the document's S_j positions and grows with its length (and with the
        observation model's pseudo-count per token), the upper layers with it, so the raw
        values span orders of magnitude across a corpus of 5-word questions and 1000-word
        reviews; divided by S_j (as the unsupervised features are divided by the length) and
        log-compressed, every unit enters the softmax on one scale.  h^(1), the mean over
        positions of relu(C_1 * X + b_1), is on one scale already and log-compressed alike.

        ``generator``: in training mode with ``classifier_dropout`` p > 0, each entry of z is
        zeroed with probability p (the rest scaled by 1 / (1 - p)), the mask drawn from this
        generator (so a step's mask is a function of its seed); none in evaluation mode.
        Differentiable in the encoder's parameters (the reparameterised draw) and in W, b."""
        if self.classifier is None:
            raise CPGBNInputError("this encoder has no classifier (n_classes = 0)")
        z = self.softmax_input(thetas, n_positions, hidden)
        if self.training and self.classifier_dropout > 0:
            keep = 1.0 - self.classifier_dropout
            mask = torch.rand(z.shape, generator=generator, device=z.device) < keep
            z = z * mask.to(z.dtype) / keep
        return self.classifier(z)

    def softmax_input(self, thetas, n_positions: torch.Tensor,
                      hidden: torch.Tensor | None = None) -> torch.Tensor:
        """z_j, (B, units): what the softmax of :meth:`class_logits` reads (before dropout),
        in the classifier weight's dtype."""
        parts = []
        if self.reads_hidden:
            if hidden is None:
                raise CPGBNInputError("this classifier reads the pooled hidden layer h^(1): "
                                      "pass hidden")
            parts.append(torch.log1p(hidden))
        if self.reads_theta:
            per_position = n_positions.to(thetas[0].dtype)[:, None]
            parts += [torch.log1p(theta / per_position) for theta in thetas]
        dtype = self.classifier.weight.dtype
        return torch.cat([part.to(dtype) for part in parts], dim=1)

    # ------------------------------------------------------------------ top-down draws
    def _check_phi(self, phi) -> list:
        phi = list(phi)
        if len(phi) != len(self.layers) - 1:
            raise CPGBNInputError(f"expected {len(self.layers) - 1} matrices Phi^(2..T), "
                                  f"got {len(phi)}")
        for t, p in enumerate(phi, start=2):
            want = (self.layers[t - 2], self.layers[t - 1])
            if tuple(p.shape) != want:
                raise CPGBNInputError(f"Phi^({t}) must have shape {want}, got {tuple(p.shape)}")
        return phi

    def sample(self, batch: PackedDocuments, phi=(), *, mean: bool = False,
               generator: torch.Generator | None = None,
               output: EncoderOutput | None = None) -> WeibullSample:
        """Draw theta^(T), ..., theta^(2), then w, from the upward-downward q (module docstring).

        ``phi`` is the list Phi^(2), ..., Phi^(T) of (K_{t-1}, K_t) tensors or arrays (constants:
        no gradient flows into them).  With ``mean=True`` every layer takes the Weibull mean
        lambda Gamma(1 + 1/k) instead of a draw, the layer below using that mean in its shape:
        a deterministic feature path for new documents.  ``output`` reuses a forward pass.
        Draws are reparameterised (differentiable in the encoder's parameters).
        """
        phi = self._check_phi(phi)
        out = self.forward(batch) if output is None else output
        dtype, device = out.position_shape.dtype, out.position_shape.device
        phi = [torch.as_tensor(p, dtype=dtype, device=device) for p in phi]

        def draw(shape, scale):
            if mean:
                return weibull_mean(shape, scale)
            return weibull_rsample(shape, scale, generator=generator)

        upper, shapes, scales = self._top_down(out.layer_shape, out.layer_scale, phi, draw)
        w_shape = out.position_shape
        from_above = self._w_shape_from_above(upper, phi, batch)
        if from_above is not None:
            w_shape = w_shape + gather_rows(from_above, batch.position_doc)
        w = draw(w_shape, out.position_scale)
        theta1 = segment_sum(w, batch.position_doc, batch.n_docs)
        return WeibullSample(w, w_shape, out.position_scale, [theta1] + upper, shapes, scales)

    def _top_down(self, layer_shape, layer_scale, phi, draw):
        """theta^(T), ..., theta^(2) drawn by ``draw(shape, scale)`` from the top down, each
        layer's shape sigma^(t) + Phi^(t+1) theta^(t+1): three lists (index t - 2): the draws,
        their shapes, their scales."""
        T = len(self.layers)
        upper, shapes, scales = [None] * (T - 1), [None] * (T - 1), [None] * (T - 1)
        above = None                                   # theta^(t+1) of the layer drawn last
        for t in range(T, 1, -1):
            shape = layer_shape[t - 2]
            if above is not None:
                shape = shape + above @ phi[t - 1].T   # Phi^(t+1) theta^(t+1)_j
            scale = layer_scale[t - 2]
            above = draw(shape, scale)
            upper[t - 2], shapes[t - 2], scales[t - 2] = above, shape, scale
        return upper, shapes, scales

    def _w_shape_from_above(self, upper, phi, batch: PackedDocuments):
        """What the layer above adds to the shape of q(w), per document: (B, K_1), the
        a_jk = (Phi^(2) theta^(2)_j)_k ("paper") or a_jk / S_j ("pooled"); None when T = 1."""
        if len(self.layers) == 1:
            return None
        from_above = upper[0] @ phi[0].T
        if self.w_shape_above == "pooled":
            from_above = from_above / batch.n_positions.to(from_above.dtype)[:, None]
        return from_above
