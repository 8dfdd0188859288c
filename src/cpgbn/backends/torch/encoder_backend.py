"""The tensor side of the hybrid inference (paper Algorithm 1): the Weibull encoder, its
gradient step on the negative ELBO and its mean path, on one torch device.

:class:`cpgbn.inference.hybrid.HybridTrainer` holds the schedule (which draw feeds which
update, which documents are grouped, when the encoder steps, what a checkpoint holds) and
calls this module's :class:`TorchEncoderBackend` for every operation on tensors (the members
of :class:`cpgbn.inference.backend_protocols.EncoderBackend`):

* :meth:`~TorchEncoderBackend.gradient`: steps 1-2 of Algorithm 1 up to the update: a
  reparameterised draw of w and theta^(2..T) from the encoder's upward-downward q
  (:meth:`~cpgbn.backends.torch.encoder.WeibullConvEncoder.sample`) and the gradient of the
  negative ELBO per document (:func:`~cpgbn.backends.torch.elbo.elbo_terms`, the globals
  constants), accumulated over groups of documents;
* :meth:`~TorchEncoderBackend.apply_gradient`: the optimiser's step (Adam, the gradient's norm
  clipped);
* :meth:`~TorchEncoderBackend.draw_locals` and :meth:`~TorchEncoderBackend.expected_kernel_counts`:
  the encoder's draw as the local variables of a Gibbs state, and its Rao-Blackwellised kernel
  counts, for the paper's form of step 3 (statistics from the encoder);
* :meth:`~TorchEncoderBackend.mean_path`: the deterministic feature path for new documents
  (:meth:`~cpgbn.backends.torch.encoder.WeibullConvEncoder.mean_thetas`), optionally with w as
  a start for Gibbs sweeps;
* the encoder's weights and the optimiser's moments as numpy arrays, for checkpoints and saved
  models.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...errors import CPGBNInputError
from .torch_backend import TorchBackend
from .devices import resolve_device
from .elbo import conditional_rates, elbo_terms, expected_kernel_counts
from .encoder import WeibullConvEncoder, WeibullSample
from .packed import PackedDocuments, pack

__all__ = ["TorchEncoderBackend", "EncoderDraw", "build_encoder"]


def build_encoder(encoder_config: dict, weights: dict | None = None, device="cpu"):
    """A WeibullConvEncoder from its config (vocab_size, layers, filter_width and the encoder's
    options) and weights (numpy arrays by ``state_dict`` name), on ``device``."""
    cfg = dict(encoder_config)
    # a model saved before the encoder's default became "pooled" records no choice: its
    # encoder was trained with "paper", and must be rebuilt so
    cfg.setdefault("w_shape_above", "paper")
    encoder = WeibullConvEncoder(cfg.pop("vocab_size"), cfg.pop("layers"),
                                 cfg.pop("filter_width"), **cfg)
    if weights is not None:
        state = {name: torch.as_tensor(np.asarray(value)) for name, value in weights.items()}
        missing = set(encoder.state_dict()) - set(state)
        if missing:
            raise CPGBNInputError(f"encoder weights lack {sorted(missing)[0]!r}")
        encoder.load_state_dict(state)
    return encoder.to(device)


def adam(params, learning_rate: float):
    """Adam over ``params``, its fused implementation where torch has one for the device
    (one pass over each tensor instead of a dozen, which on the CPU made a step over the first
    layer's V F K_1 weights several times faster; its arithmetic is per entry, so a seed still
    gives the same model on every run); the plain one elsewhere."""
    params = list(params)
    try:
        return torch.optim.Adam(params, lr=learning_rate, fused=True)
    except (RuntimeError, TypeError, ValueError):   # no fused kernel for this device or torch
        return torch.optim.Adam(params, lr=learning_rate)


@dataclass
class EncoderDraw:
    """The encoder's last draw of a group of documents: the group packed, the sample, and the
    prior rates its ELBO took (None: 1)."""

    packed: PackedDocuments
    sample: WeibullSample
    rates: list | None = None


class TorchEncoderBackend:
    """The Weibull encoder of the hybrid inference on a torch device (module docstring).

    Build it with :meth:`for_training` (seeded initial weights and an Adam optimiser) or
    :meth:`from_weights` (a fitted encoder, in evaluation mode, for features).
    """

    def __init__(self, encoder, device, optimizer=None):
        self.last_cross_entropy = None
        self.encoder = encoder
        self.device = device
        self.optimizer = optimizer

    @classmethod
    def for_training(cls, encoder_config: dict, *, init_seed: int, learning_rate: float,
                     device="cpu") -> "TorchEncoderBackend":
        """A new encoder whose initial weights are a function of ``init_seed`` (the caller's
        torch RNG untouched), with Adam at ``learning_rate``."""
        device = resolve_device(device)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(init_seed)
            encoder = build_encoder(encoder_config, device=device)
        return cls(encoder, device, adam(encoder.parameters(), learning_rate))

    @classmethod
    def from_weights(cls, encoder_config: dict, weights: dict,
                     device="cpu") -> "TorchEncoderBackend":
        """A fitted encoder in evaluation mode (no optimiser)."""
        encoder = build_encoder(encoder_config, weights, device)
        encoder.eval()
        return cls(encoder, device)

    @property
    def device_type(self) -> str:
        return torch.device(self.device).type

    # ------------------------------------------------------------------ arrays
    def to_device(self, array: np.ndarray, dtype) -> torch.Tensor:
        return torch.as_tensor(np.array(array, dtype=dtype), device=self.device)

    @staticmethod
    def to_host(array: torch.Tensor) -> np.ndarray:
        return array.cpu().numpy().copy()

    def gibbs_backend(self, data, seed: int) -> TorchBackend:
        """The Gibbs draws on this device (the paper's form of step 3 runs the schedule's
        local part on them)."""
        return TorchBackend(data, seed, device=self.device)

    # ------------------------------------------------------------------ training
    def gradient(self, batch, groups: list, seed: int, globals_, rate_prior=None,
                 supervision=None, *, elbo: bool = True, loss_scale: float = 1.0,
                 elbo_reaches_filters: bool = True):
        """Zero the gradient; for each group of documents of ``batch`` (index arrays; one
        group: the batch as it is), draw from q with the step's generator (seeded by ``seed``,
        so the groups draw in turn) and add the group's share of the batch's mean loss
        (times ``loss_scale``) to the gradient.  Returns (loss, KL) per document as floats
        (unscaled) and the last group's :class:`EncoderDraw`.  The documents are independent
        given the globals, so the batch's gradient is the sum of its groups', whatever the
        grouping.

        ``rate_prior``: (e0, f0), the prior of the rates c: the KL terms take the rates'
        conditional means at the draw (:func:`~.elbo.conditional_rates`); None: rates 1.

        ``supervision``: sCPGBN's (codes, xi): each document's class index (-1: unlabelled)
        and the weight xi of the cross-entropy; the loss per document becomes
        L_g + xi L_c (paper section 2.3), L_c the cross-entropy of the softmax
        (:meth:`~.encoder.WeibullConvEncoder.class_logits`) on the encoder's mean path's
        theta^(1..T) (the Weibull means, top-down, from the same forward pass as the draw)
        and its pooled first hidden layer, by the encoder's ``classifier_input``, for a
        labelled document, 0 for an unlabelled one.  The mean path and not the draw:
        predictions read the mean path, and with the small Weibull shapes of text (down to
        0.1) a draw's theta is typically orders of magnitude below its mean (the median of
        Weibull(0.1, lambda) is 7e-9 of its mean), so a softmax trained on draws predicted one
        class for every SUBJ test document from the means (docs/classifier.md).
        :attr:`last_cross_entropy` keeps the batch's (sum of L_c, labelled documents, correct
        predictions at the mean path).  ``elbo=False``: the cross-entropy alone, no draw
        (the discriminative baseline: the same network without its generative half; the
        returned KL is 0 and the draw None).  ``elbo_reaches_filters=False``: the ELBO's
        gradient stops at the first layer's output H (``forward(hidden_gradient=False)``), so
        the filters C_1 learn from the cross-entropy alone and the generative half trains the
        layers above them."""
        generator = torch.Generator(device=self.device)
        generator.manual_seed(seed)
        self.encoder.train()
        self.optimizer.zero_grad(set_to_none=True)
        loss = kl = 0.0
        draw = None
        self.last_cross_entropy = [0.0, 0, 0] if supervision is not None else None
        for docs in groups:
            packed = pack(batch, None if len(groups) == 1 else docs, device=self.device)
            labels = None
            if supervision is not None:
                codes, xi = supervision
                labels = (torch.as_tensor(np.asarray(codes)[docs], device=self.device), xi)
            draw, part_loss, part_kl = self._loss_and_gradient(
                packed, generator, batch.n_docs, globals_, rate_prior, labels, elbo=elbo,
                loss_scale=loss_scale, elbo_reaches_filters=elbo_reaches_filters)
            loss, kl = loss + part_loss, kl + part_kl
        if supervision is not None:
            self.last_cross_entropy = tuple(self.last_cross_entropy)
        return loss, kl, draw

    def _loss_and_gradient(self, packed, generator, n_batch: int, globals_, rate_prior,
                           labels=None, *, elbo: bool = True, loss_scale: float = 1.0,
                           elbo_reaches_filters: bool = True):
        """Draw from q for the documents ``packed`` (part of a batch of ``n_batch``) and add
        their share of the batch's mean loss to the gradient; returns (the draw, their share
        of the loss, of the KL).  ``labels``: (class codes of these documents, xi) or None."""
        g = globals_
        output = self.encoder(packed, hidden_gradient=elbo_reaches_filters or labels is None)
        draw, loss, kl = None, None, 0.0
        if elbo:
            sample = self.encoder.sample(packed, g.phi, generator=generator, output=output)
            rates = None if rate_prior is None else conditional_rates(sample, g.r, *rate_prior)
            terms = elbo_terms(packed, sample, g.D, g.phi, g.r, rates)
            loss = terms.negative_elbo.sum()
            kl = float(torch.stack(terms.kl).sum(dim=0).sum().detach()) / n_batch
            draw = EncoderDraw(packed, sample, rates)
        if labels is not None:
            codes, xi = labels
            known = codes >= 0
            if bool(known.any()):
                # the softmax reads the encoder's mean path, as it does at prediction time
                thetas = (self.encoder.sample(packed, g.phi, mean=True, output=output).theta
                          if self.encoder.reads_theta else None)
                logits = self.encoder.class_logits(thetas, packed.n_positions,
                                                   output.pooled_hidden,
                                                   generator=generator)[known]
                target = codes[known]
                cross_entropy = torch.nn.functional.cross_entropy(
                    logits.to(torch.float64), target, reduction="sum")
                loss = xi * cross_entropy if loss is None else loss + xi * cross_entropy
                tally = self.last_cross_entropy
                tally[0] += float(cross_entropy.detach())
                tally[1] += int(known.sum())
                tally[2] += int((logits.detach().argmax(dim=1) == target).sum())
        if loss is None:    # no ELBO and no labelled document: nothing to learn from
            return draw, 0.0, kl
        loss = loss / n_batch
        if torch.isfinite(loss):
            (loss * loss_scale).backward()
        return draw, float(loss.detach()), kl

    def average_gradients(self, communicator, n_docs: int, loss: float,
                          kl: float) -> tuple[float, float, int]:
        """Data parallelism: every worker's gradient (of its batch's mean loss) weighted by
        its batch's size, summed over the workers and divided by their documents, so each
        worker holds the gradient of the mean loss over the union of the batches, the same
        everywhere.  One all-reduce (through ``communicator``: torch.distributed) of the
        flat gradient, each parameter's has-a-gradient flag, and the losses.  Returns
        (loss, KL) per document of the union and its number of documents.

        What DistributedDataParallel does, without its module wrapper: the loss is
        accumulated over groups of documents by several backward passes through the
        encoder's own methods (not its forward), and a step's all-reduce is small beside the
        encoder's work, so overlapping it with the backward pass would gain little.

        One process: the gradients, loss and KL as they are (``g * n / n`` may round
        differently), so that the collective is exact in a group of one."""
        if communicator.world_size == 1:
            return loss, kl, n_docs
        params = list(self.encoder.parameters())
        parts = [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                 .to(torch.float64) for p in params]
        as_vector = dict(dtype=torch.float64, device=self.device)
        flags = torch.tensor([float(p.grad is not None) for p in params], **as_vector)
        losses = torch.tensor([loss * n_docs, kl * n_docs, float(n_docs)], **as_vector)
        total = communicator.sum(torch.cat([torch.cat(parts) * float(n_docs), flags, losses]))
        loss_sum, kl_sum, n_total = (float(x) for x in total[-3:])
        offset, has_gradient = 0, total[-(len(params) + 3):-3]
        for p, part, flag in zip(params, parts, has_gradient):
            size = part.numel()
            p.grad = (None if float(flag) == 0 else
                      (total[offset:offset + size] / n_total).reshape(p.shape).to(p.dtype))
            offset += size
        return loss_sum / n_total, kl_sum / n_total, int(round(n_total))

    #: The parameters of the softmax's own path (the first layer's filters and the softmax):
    #: with ``apply_gradient(..., separate=True)`` they are clipped apart from the rest
    SOFTMAX_PATH = ("conv1.weight", "bias1", "classifier.weight", "classifier.bias")

    def apply_gradient(self, max_grad_norm: float | None, *, separate: bool = False) -> float:
        """Clip the gradient's norm at ``max_grad_norm`` (None: no clip), then Adam's step.
        Returns the gradient's norm before the clip.

        ``separate=True`` (a classifier): the parameters of the softmax's path
        (:data:`SOFTMAX_PATH`) and the generative heads are clipped each on its own, so that
        the cross-entropy's gradient on the first path does not shrink the ELBO's on the
        heads to nothing (or the reverse): one clip of the whole scales every parameter by
        the larger loss's norm."""
        named = [(n, p) for n, p in self.encoder.named_parameters() if p.grad is not None]
        limit = float("inf") if max_grad_norm is None else max_grad_norm
        if not separate:
            norm = float(torch.nn.utils.clip_grad_norm_([p for _, p in named], limit))
        else:
            norms = [float(torch.nn.utils.clip_grad_norm_(group, limit)) if group else 0.0
                     for group in ([p for n, p in named if n in self.SOFTMAX_PATH],
                                   [p for n, p in named if n not in self.SOFTMAX_PATH])]
            norm = float(np.hypot(*norms))
        self.optimizer.step()
        return norm

    @staticmethod
    def draw_locals(draw: EncoderDraw) -> tuple:
        """w (float32) and theta^(1..T) (float64) of the draw, detached from the graph."""
        sample = draw.sample
        return (sample.w.detach().to(torch.float32),
                [t.detach().to(torch.float64) for t in sample.theta])

    @staticmethod
    def draw_rates(draw: EncoderDraw) -> list:
        """The rates c^(2..T+1) of the draw's documents as the ELBO took them (float64, (B,)
        each; ones where it took 1)."""
        sample = draw.sample
        if draw.rates is None:
            n_docs = sample.theta[0].shape[0]
            return [sample.w.new_ones(n_docs, dtype=torch.float64)
                    for _ in range(sample.n_layers)]
        return [c.to(torch.float64) for c in draw.rates]

    @staticmethod
    def expected_kernel_counts(draw: EncoderDraw, D) -> torch.Tensor:
        """E[n_{k,v,f} | w, D] of the draw's documents (:func:`~.elbo.expected_kernel_counts`)."""
        return expected_kernel_counts(draw.packed, draw.sample.w, D)

    # ------------------------------------------------------------------ features
    def mean_path(self, phi, data, *, batch_size: int, head_precision: str = "float32",
                  with_w: bool = False) -> tuple:
        """The encoder's mean path over ``data`` (no randomness), ``batch_size`` documents at
        a time by the chunked ``mean_thetas``: theta^(1..T) as (N, K_t) float64 arrays and,
        with ``with_w``, the Weibull means of w as a (P, K_1) float32 array (else None), equal
        to ``sample(mean=True)``'s without its (P, K_1) temporaries.  ``head_precision``
        "bfloat16" runs the position head in bfloat16 (``mean_thetas(head_dtype=...)``)."""
        encoder = self.encoder
        head_dtype = torch.bfloat16 if head_precision == "bfloat16" else None
        K1 = encoder.layers[0]
        w = np.empty((data.n_positions, K1), dtype=np.float32) if with_w else None
        thetas = [np.empty((data.n_docs, k)) for k in encoder.layers]
        positions = np.asarray(data.doc_positions)
        for lo in range(0, data.n_docs, batch_size):
            hi = min(data.n_docs, lo + batch_size)
            batch = pack(data, np.arange(lo, hi), device=self.device)
            w_batch = (torch.empty((batch.n_total_positions, K1), dtype=torch.float32,
                                   device=batch.position_doc.device) if with_w else None)
            for t, theta in enumerate(encoder.mean_thetas(batch, phi, w_out=w_batch,
                                                          head_dtype=head_dtype)):
                thetas[t][lo:hi] = theta.double().cpu().numpy()
            if with_w:
                w[positions[lo]:positions[hi]] = w_batch.cpu().numpy()
        return w, thetas

    def class_probabilities(self, phi, data, *, batch_size: int = 512,
                            head_precision: str = "float32") -> np.ndarray:
        """sCPGBN's softmax (:meth:`~.encoder.WeibullConvEncoder.class_logits`) on the mean
        path of the documents ``data`` (theta^(1..T) and h^(1), ``batch_size`` documents at a
        time): (N, C) float64 probabilities, no randomness.  A softmax on h^(1) alone needs
        the first layer only (an embedding sum per position and a mean per document)."""
        out = np.empty((data.n_docs, self.encoder.n_classes))
        for lo, hi, z in self._softmax_inputs(phi, data, batch_size, head_precision):
            logits = self.encoder.classifier(z)
            out[lo:hi] = torch.softmax(logits.double(), dim=1).cpu().numpy()
        return out

    def softmax_inputs(self, phi, data, *, batch_size: int = 512,
                       head_precision: str = "float32") -> np.ndarray:
        """(N, units) float64: what the softmax reads of each document of ``data`` on the
        mean path (:meth:`~.encoder.WeibullConvEncoder.softmax_input`), the units in the
        order of the classifier's weight columns."""
        parts = [z.double().cpu().numpy()
                 for _, _, z in self._softmax_inputs(phi, data, batch_size, head_precision)]
        width = self.encoder.classifier.in_features
        return np.concatenate(parts) if parts else np.zeros((0, width))

    def _softmax_inputs(self, phi, data, batch_size: int, head_precision: str):
        """(lo, hi, z) per ``batch_size`` documents of ``data``: z the softmax's input on
        the encoder's mean path, without gradients."""
        encoder = self.encoder
        head_dtype = torch.bfloat16 if head_precision == "bfloat16" else None
        encoder.eval()
        with torch.no_grad():
            for lo in range(0, data.n_docs, batch_size):
                hi = min(data.n_docs, lo + batch_size)
                batch = pack(data, np.arange(lo, hi), device=self.device)
                if encoder.reads_theta:
                    hidden = batch.position_doc.new_empty((hi - lo, encoder.layers[0]),
                                                          dtype=torch.float32)
                    thetas = [t.double() for t in encoder.mean_thetas(
                        batch, phi, head_dtype=head_dtype, hidden_out=hidden)]
                else:   # h^(1) alone: the first layer and its pooling, no Weibull head
                    thetas = None
                    hidden = encoder.classifier_hidden(encoder.first_hidden(batch), batch)
                yield lo, hi, encoder.softmax_input(thetas, batch.n_positions, hidden)

    def class_attributions(self, phi, data, targets) -> np.ndarray:
        """How much each (position, unit) of the documents ``data`` moved them towards the
        classes ``targets`` (one index per document): (P, K_1) float64, the gradient of the
        target's log-odds, ln p(c | doc) - ln(1 - p(c | doc)) = z_c - logsumexp_{c' != c} z_c'
        (z the logits), times the input, at the encoder's mean path.  The log-odds, not
        ln p(c | doc): where the softmax is sure, the latter is flat and every gradient
        vanishes.

        The input is what carries a window's words to the softmax: for a softmax on theta
        alone (``classifier_input="theta"``), the weights w_jks (theta^(1)_jk = sum_s w_jks;
        the upper layers' theta, computed from the pooled first hidden layer, do not depend
        on w), so a unit is a kernel; when the softmax also reads h^(1), the first hidden
        layer H_js = relu(C_1 * X + b_1) at the window, through which every path from the
        window's words runs (to h^(1) and to w), so a unit is a filter of the encoder."""
        batch = pack(data, device=self.device)
        self.encoder.eval()
        output = self.encoder(batch)
        sample = self.encoder.sample(batch, phi, mean=True, output=output)
        logits = self.encoder.class_logits(sample.theta, batch.n_positions,
                                           output.pooled_hidden).double()
        index = torch.as_tensor(np.asarray(targets), device=logits.device)[:, None]
        others = logits.scatter(1, index, float("-inf"))
        log_odds = logits.gather(1, index)[:, 0] - torch.logsumexp(others, dim=1)
        by = output.padded_hidden if self.encoder.reads_hidden else sample.w
        (grad,) = torch.autograd.grad(log_odds.sum(), [by])
        contribution = (grad * by)[:batch.n_total_positions]
        return contribution.detach().double().cpu().numpy()

    # ------------------------------------------------------------------ checkpoints
    def weights(self) -> dict:
        return {name: value.detach().cpu().numpy().copy()
                for name, value in self.encoder.state_dict().items()}

    def optimizer_state(self) -> tuple:
        """({parameter index: {moment name: numpy array}}, the parameter groups)."""
        state = self.optimizer.state_dict()
        moments = {index: {key: value.detach().cpu().numpy() for key, value in m.items()}
                   for index, m in state["state"].items()}
        return moments, [dict(group) for group in state["param_groups"]]

    def load(self, weights: dict, moments: dict, param_groups) -> None:
        self.encoder.load_state_dict({k: torch.as_tensor(v) for k, v in weights.items()})
        state = {index: {name: torch.as_tensor(value) for name, value in m.items()}
                 for index, m in moments.items()}
        self.optimizer.load_state_dict({"state": state, "param_groups": param_groups})
