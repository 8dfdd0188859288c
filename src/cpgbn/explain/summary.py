"""The essentials of a fitted model on one screen (``CPGBN.summary()``, ``cpgbn summary``).

:func:`summary_facts` gathers (label, value) pairs about the model, its training and, when
documents are given, the data and topic coherence; :func:`summary_text` prints them with the
most used kernels and their best phrases.  The HTML report shows the same facts.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .coherence import DEFAULT_TOP_N, DEFAULT_WINDOW, CoherenceResult, model_coherence
from .phrase_quality import KernelPhraseQuality, kernel_phrase_quality
from .hierarchy import HIDDEN, MIN_COLUMN_SHARE, shown_columns
from .kernel_table import KernelSummary, kernel_table, sort_kernels
from .phrases import assign_kernels


def _thousands(n) -> str:
    return f"{int(n):,}"


def _padding_note(padding: int) -> str:
    if not padding:
        return ""
    return f", {padding} empty column{'s' if padding > 1 else ''} around every document (padding)"


def usage_concentration(usage) -> tuple[float, float]:
    """(effective number of kernels exp(entropy of the usage), share carried by the top 10%)."""
    usage = np.asarray(usage, dtype=np.float64)
    usage = usage / max(usage.sum(), 1e-300)
    nz = usage[usage > 0]
    effective = float(np.exp(-(nz * np.log(nz)).sum())) if len(nz) else 0.0
    top = max(1, int(np.ceil(0.1 * len(usage))))
    return effective, float(np.sort(usage)[::-1][:top].sum())


def _training_facts(model) -> list[tuple[str, str]]:
    """The training, the training data, the time and the training figure: the Gibbs chain's
    log-likelihood, or in the minibatch modes their per-step loss (no log-likelihood;
    the model's ``loss_name`` says what it is)."""
    gibbs = model.loss_name is None   # the minibatch modes name their per-step loss
    trace = np.asarray(model.loglik_trace_ if gibbs else model.loss_trace_, dtype=np.float64)
    n = len(trace)
    if gibbs:
        burn_in = int(model.burn_in or 0)
        training = (f"{n} Gibbs sweeps ({min(burn_in, n)} burn-in, {max(n - burn_in, 0)} "
                    f"averaged), seed {model.seed_}")
    else:
        training = (f"inference={model.mode_name!r}: {n} minibatch steps of up to "
                    f"{model.batch_size} documents ({model.n_epochs} epochs), seed {model.seed_}")
    facts = [("training", training)]
    n_docs = model.recorded("train_features_")
    docs = f"{_thousands(n_docs.shape[0])} documents, " if n_docs is not None else ""
    facts.append(("training data", f"{docs}{_thousands(model.n_train_tokens_)} tokens"))
    seconds = np.asarray(model.sweep_seconds_ if gibbs else model.step_seconds_, dtype=np.float64)
    unit = "sweep" if gibbs else "step"
    if len(seconds):
        facts.append(("time", f"{np.median(seconds):.3f} s per {unit} (median), "
                              f"{seconds.sum():.1f} s in all"))
    if n and gibbs:
        per_token = trace / max(int(model.n_train_tokens_), 1)
        tail = per_token[-max(1, n // 10):]
        facts.append(("log-likelihood", f"{per_token[-1]:.4f} per token at the last sweep "
                                        f"(first sweep {per_token[0]:.4f}; last 10% of sweeps "
                                        f"{tail.mean():.4f} +- {tail.std():.4f})"))
    elif n:
        tail = trace[-max(1, n // 10):]
        name = model.loss_name or "loss"
        facts.append(("training loss", f"{name}: {trace[-1]:.4g} at the last step "
                                       f"(first step {trace[0]:.4g}; last 10% of steps "
                                       f"{tail.mean():.4g} +- {tail.std():.4g})"))
    curve = model.recorded("validation_curve_")
    if curve is not None and len(curve) and model.recorded("best_epoch_") is not None:
        best = int(model.best_epoch_)
        facts.append(("model selection", f"epoch {best} of {len(curve)} kept: validation "
                                         f"accuracy {100 * curve[best - 1]:.1f}% on "
                                         f"{100 * float(model.validation_fraction):g}% of the "
                                         "training documents held out (by epoch: "
                                         + " ".join(f"{100 * a:.1f}" for a in curve) + ")"))
    mixing = model.recorded("mixing_")   # None for a model saved before it was measured
    if mixing is not None:
        facts.extend(mixing.describe())
    return facts


def summary_facts(model, *, corpus=None, labels=None, coherence: CoherenceResult | None = None,
                  assignments=None, min_column_share: float = MIN_COLUMN_SHARE,
                  phrases: KernelPhraseQuality | None = None) -> list[tuple[str, str]]:
    """(label, value) pairs: model, vocabulary, observation model, training, fit, mixing, usage, the
    kernels' near-empty columns (below ``min_column_share`` of their mass), and with ``corpus``
    (an encoded :class:`~cpgbn.text.Corpus`) the data, with ``assignments`` the phrase widths,
    with ``phrases`` how the kernels' names read as phrases
    (:func:`~cpgbn.explain.phrase_quality.kernel_phrase_quality`), with ``coherence`` NPMI."""
    check_is_fitted(model)
    g = model.globals_
    layers = tuple(model.layers_)
    V, F, K = g.D.shape
    facts = [("model", f"CPGBN {'-'.join(map(str, layers))} ({len(layers)} layer"
                       f"{'s' if len(layers) > 1 else ''}), filter width F = {F}"
                       + _padding_note(model.get_params().get("padding", 0)))]
    facts.append(("vocabulary", f"{_thousands(V)} rows, including the out-of-vocabulary <unk>"))
    facts.append(("observation", model.observation_model.describe()))
    hyper = model.hyper_
    eta = ", ".join(f"{e:g}" for e in hyper.eta)
    facts.append(("priors", f"eta = {eta}; e0 = {hyper.e0:g}, f0 = {hyper.f0:g}; "
                            f"r {'sampled' if hyper.sample_r else 'fixed at 1/K_T'}"))
    beta = hyper.pooling_concentration
    facts.append(("pooling", "tied prior w_jks ~ Gam(a_jk / S_j, 1/c_j) (paper eq. 3)"
                  if beta is None else
                  f"pooling_concentration = {beta:g}: theta^(1)_jk ~ Gam(a_jk, 1/c_j), "
                  f"positional split ~ Dir({beta:g}, ..., {beta:g})"))
    facts += _training_facts(model)
    effective, top_share = usage_concentration(model.kernel_usage())
    facts.append(("kernel usage", f"effective number of kernels {effective:.1f} of {K}; the "
                                  f"top 10% carry {100 * top_share:.1f}% of theta^(1)"))
    if min_column_share > 0:
        n_shown = np.array([len(shown_columns(g.D[:, :, k], min_column_share)) for k in range(K)])
        facts.append(("kernel columns", f"{K * F - int(n_shown.sum())} of {K * F} columns hold less "
                                        f"than {100 * min_column_share:g}% of their kernel's mass "
                                        f"and are shown as {HIDDEN}; {int((n_shown == 1).sum())} kernels "
                                        f"write one column, {int((n_shown == F).sum())} all {F}"))
    version = model.recorded("saved_by_version_")
    if version:
        facts.append(("saved by", f"cpgbn {version}"))
    if corpus is not None:
        oov = float(np.mean(corpus.tokens == 0)) if corpus.n_tokens else 0.0
        text = (f"{_thousands(len(corpus))} documents, {_thousands(corpus.n_tokens)} tokens "
                f"({100 * oov:.1f}% out of vocabulary), mean length {corpus.lengths.mean():.1f}")
        if labels is not None:
            text += f", {len(set(map(str, labels)))} classes"
        facts.append(("data", text))
    if assignments is not None:
        width = assignments.width
        single = int(np.count_nonzero(width < 1.5))
        facts.append(("phrase width", f"median {np.median(width):.2f} of F = {F} columns used "
                                      f"(effective number, from the tokens each column explains "
                                      f"in the data); {single} of {K} kernels use essentially one "
                                      "column (width < 1.5)"))
    if phrases is not None:
        facts.append(("phrases", phrases.describe()))
    if coherence is not None:
        facts.append(("coherence", coherence.describe()))
    return facts


def top_kernels_text(rows: list[KernelSummary], top: int = 5) -> str:
    """The ``top`` most used kernels, one line each: usage, sharpness, NPMI, and the windows
    each explains in the corpus with their counts, its name first (its best phrases for a
    model without them)."""
    rows = sort_kernels(rows, "usage")[:top]
    with_npmi = any(r.npmi is not None for r in rows)
    with_width = any(r.width is not None for r in rows)
    head = (f"  {'kernel':>6}  {'usage':>6}  {'sharp':>5}" + (f"  {'width':>5}" if with_width else "")
            + (f"  {'NPMI':>6}" if with_npmi else ""))
    named = any(r.corpus_phrases for r in rows)
    lines = [head + ("  name and windows in the corpus (count)" if named else "  best phrases")]
    for r in rows:
        line = f"  {r.kernel:>6}  {100 * r.usage:5.2f}%  {r.sharpness:5.2f}"
        if with_width:
            line += f"  {r.width:5.2f}" if r.width is not None else "  " + " " * 5
        if with_npmi:
            line += f"  {r.npmi:+6.3f}" if r.npmi is not None and np.isfinite(r.npmi) else "  " + " " * 6
        phrases = ([f"{p.text} ({p.count})" if p.count is not None else p.text
                    for p in r.corpus_phrases] or [p.text for p in r.phrases])
        lines.append(line + "  " + " | ".join(phrases))
    return "\n".join(lines)


def summary_text(model, texts=None, *, top: int = 5, npmi: bool = True, lda: bool = True,
                 window: int | None = DEFAULT_WINDOW, top_words: int = DEFAULT_TOP_N,
                 lda_iter: int = 50, sweeps: int = 10, labels=None,
                 coherence: CoherenceResult | None = None, assignments=None,
                 min_column_share: float = MIN_COLUMN_SHARE) -> str:
    """A one-screen summary of a fitted model.

    With ``texts`` (documents as strings or a Corpus, normally the training data): the data
    size; the kernels' phrase widths and top corpus phrases from ``sweeps`` sweeps of inference
    with the globals fixed (half of them burn-in); and, when ``npmi``, the NPMI coherence of the
    kernels (and of an LDA with as many topics when ``lda``) over windows of ``window`` tokens.
    Precomputed ``assignments`` or ``coherence`` are used as they are.  Phrase columns with
    less than ``min_column_share`` of their kernel's mass are shown as ``_``.
    """
    corpus = model.encode(texts) if texts is not None else None
    if corpus is not None and assignments is None and sweeps:
        assignments = assign_kernels(model, corpus, n_iter=sweeps, burn_in=sweeps // 2)
    if coherence is None and corpus is not None and npmi:
        coherence = model_coherence(model, corpus, window=window, top_n=top_words, lda=lda,
                                    lda_iter=lda_iter, assignments=assignments)
    rows = kernel_table(model, top_words=1, top_phrases=2, assignments=assignments, corpus_top=2,
                        npmi=None if coherence is None else coherence.kernel_npmi,
                        min_column_share=min_column_share)
    facts = summary_facts(model, corpus=corpus, labels=labels, coherence=coherence,
                          assignments=assignments, min_column_share=min_column_share,
                          phrases=None if corpus is None else kernel_phrase_quality(rows, corpus))
    width = max(len(label) for label, _ in facts)
    lines = [f"{label:<{width}}  {value}" for label, value in facts]
    lines.append("")
    lines.append(f"most used kernels (of {len(rows)}):")
    lines.append(top_kernels_text(rows, top))
    if corpus is None:
        lines.append("(give the training documents to add phrase widths, the phrases each kernel "
                     "explains in them, and NPMI coherence)")
    return "\n".join(lines)
