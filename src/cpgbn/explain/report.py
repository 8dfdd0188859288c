"""A self-contained HTML report of a fitted model (``cpgbn report``).

One HTML file with everything inline and no network resource of any kind: CSS and a small
script in the page, plots as base64 PNG data URIs, topic trees as inline SVG drawn here.  No table is wider than the page (cells wrap).  A
Content-Security-Policy in the page forbids loading anything from elsewhere.

Sections: summary (the facts of :func:`cpgbn.explain.summary.summary_facts`), training and
usage plots, topic coherence (CPGBN kernels vs LDA), the phrase table (search box and
click-to-sort headers; ``#q=how&sort=sharpness&order=desc`` in the address applies a filter
and a sort on load), and topic trees.  With documents (normally the training data) the report
adds the corpus phrases of each kernel, NPMI coherence and, with labels, per-class usage.

A classifier's report adds ``#classes`` (``table.class-units``, one per class) and, for the
texts it is asked to explain, ``#documents`` (``div.explained-doc`` with ``data-predicted``,
tokens ``span.tok`` with ``data-score``).  The sections, their order and where each applies
are declared once, in :data:`REPORT_SECTIONS`.

Element ids and classes for tools and tests: ``#summary``, ``#phrase-table`` (rows
``tr.kernel-row`` with ids ``kernel-K``), ``#phrase-search``, ``#phrase-count``,
``figure.topic-tree`` (each with an inline ``svg``), ``img.plot``, for a minibatch mode's
model ``figure.loss-plot`` (its ``img`` alt text names the running median's window and the
scale, :func:`~cpgbn.explain.plots.loss_png`); the script sets
``data-js="ready"`` on ``<body>`` when it has run.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from html import escape
from pathlib import Path

import numpy as np
from sklearn.base import is_classifier
from sklearn.utils.validation import check_is_fitted

from ..version import VERSION
from .coherence import DEFAULT_TOP_N, DEFAULT_WINDOW, CoherenceResult, model_coherence
from .hierarchy import HIDDEN, MIN_COLUMN_SHARE, check_layer, format_tree, topic_tree
from .kernel_table import kernel_table
from .phrases import KernelAssignments, assign_kernels, phrases_from_columns
from .phrase_quality import kernel_phrase_quality
from .summary import summary_facts


@dataclass(frozen=True)
class ReportSection:
    """One section of the report: its anchor, heading and name in the navigation, and where
    it applies (None: every model; else the name of the condition: "classifier", a fitted
    :class:`~cpgbn.classifier.CPGBNClassifier`; "explained", a classifier given texts to
    explain; "coherence", a report with NPMI coherence)."""

    id: str
    heading: str
    nav: str
    applies: str | None = None


#: The report's sections in the order it shows them; a new section is one entry here and
#: its body in :func:`build_report`.
REPORT_SECTIONS = (
    ReportSection("summary", "Summary", "Summary"),
    ReportSection("plots", "Training and usage", "Plots"),
    ReportSection("classes", "Classes", "Classes", applies="classifier"),
    ReportSection("documents", "Documents explained", "Documents", applies="explained"),
    ReportSection("coherence", "Topic coherence", "Coherence", applies="coherence"),
    ReportSection("phrases", "Phrase topics", "Phrases"),
    ReportSection("trees", "Topic trees", "Trees"),
)

_CSS = """
:root { --ink: #1d2430; --muted: #5d6675; --line: #d7dce3; --accent: #3367a6; --bg: #fbfcfd; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink);
       background: var(--bg); margin: 0; }
header, main, footer { max-width: 1400px; margin: 0 auto; padding: 0 20px; }
header { padding-top: 18px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 28px 0 10px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
nav a { margin-right: 14px; color: var(--accent); text-decoration: none; }
.muted { color: var(--muted); }
table.facts td { padding: 2px 14px 2px 0; vertical-align: top; }
table.facts td:first-child { color: var(--muted); white-space: nowrap; }
.plots { display: flex; flex-wrap: wrap; gap: 16px; align-items: flex-start; }
img.plot { max-width: 100%; border: 1px solid var(--line); background: #fff; }
figure.loss-plot { margin: 0; max-width: 642px; border: 1px solid var(--line); background: #fff; }
figure.loss-plot img { display: block; border: 0; }
figure.loss-plot figcaption { color: var(--muted); font-size: 12px; padding: 2px 8px 6px; }
/* no table wider than the page: a cell's lines break at spaces, and inside a word too long
   for the page (headers are short words and never break inside one) */
main table { max-width: 100%; }
main td { overflow-wrap: anywhere; }
#phrase-search { font-size: 14px; padding: 5px 8px; width: 320px; max-width: 100%; }
#phrase-table { border-collapse: collapse; margin-top: 8px; width: 100%; background: #fff; }
#phrase-table th, #phrase-table td { border: 1px solid var(--line); padding: 4px 6px; vertical-align: top; }
#phrase-table th { background: #eef2f7; cursor: pointer; user-select: none; position: sticky; top: 0; }
#phrase-table th[aria-sort="ascending"]::after { content: " \\25B2"; }
#phrase-table th[aria-sort="descending"]::after { content: " \\25BC"; }
#phrase-table td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
#phrase-table tr:target { outline: 2px solid var(--accent); }
ol.words, ol.phrases { margin: 0; padding-left: 18px; }
div.table-wrap { overflow-x: auto; }
ol.words li span, ol.phrases li span { color: var(--muted); font-size: 12px; margin-left: 4px;
                                       white-space: nowrap; }
figure.topic-tree { margin: 0 0 18px; overflow-x: auto; background: #fff; border: 1px solid var(--line);
                    padding: 8px; }
figure.topic-tree figcaption { color: var(--muted); margin-bottom: 6px; }
td.weak { color: #9aa3ae; }
div.share { font-size: 11px; color: var(--muted); }
pre { background: #f3f5f8; padding: 8px; overflow-x: auto; font-size: 12px; }
table.class-units { border-collapse: collapse; margin: 4px 0 14px; background: #fff; }
table.class-units td, table.class-units th { border: 1px solid var(--line); padding: 3px 8px;
                                             text-align: left; }
div.explained-doc { background: #fff; border: 1px solid var(--line); padding: 8px 10px;
                    margin: 0 0 14px; }
div.explained-doc p.text { line-height: 1.9; margin: 6px 0; }
span.tok { padding: 1px 2px; border-radius: 3px; }
.coh td, .coh th { padding: 3px 12px 3px 0; text-align: left; }
"""

_JS = """
(function () {
  "use strict";
  var table = document.getElementById("phrase-table");
  if (table) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var headers = Array.prototype.slice.call(table.tHead.rows[0].cells);
    var search = document.getElementById("phrase-search");
    var count = document.getElementById("phrase-count");
    var filter = function (query) {
      var q = query.trim().toLowerCase();
      var shown = 0;
      rows.forEach(function (row) {
        var hit = q === "" || row.textContent.toLowerCase().indexOf(q) >= 0;
        row.hidden = !hit;
        if (hit) { shown += 1; }
      });
      if (count) { count.textContent = shown + " of " + rows.length + " kernels shown"; }
    };
    var sortBy = function (th, descending) {
      var column = th.cellIndex;
      var numeric = th.getAttribute("data-type") === "num";
      var keyed = Array.prototype.slice.call(body.rows).map(function (row, position) {
        var cell = row.cells[column];
        var raw = cell.getAttribute("data-value");
        if (raw === null) { raw = cell.textContent; }
        return { row: row, key: numeric ? parseFloat(raw) : raw.toLowerCase(), position: position };
      });
      keyed.sort(function (a, b) {
        var aMissing = numeric && isNaN(a.key), bMissing = numeric && isNaN(b.key);
        if (aMissing || bMissing) { return aMissing === bMissing ? a.position - b.position : (aMissing ? 1 : -1); }
        if (a.key < b.key) { return descending ? 1 : -1; }
        if (a.key > b.key) { return descending ? -1 : 1; }
        return a.position - b.position;
      });
      keyed.forEach(function (item) { body.appendChild(item.row); });
      headers.forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", descending ? "descending" : "ascending");
    };
    headers.forEach(function (th) {
      th.title = "click to sort";
      th.addEventListener("click", function () {
        var current = th.getAttribute("aria-sort");
        var descending = current ? current === "ascending" : th.getAttribute("data-type") === "num";
        sortBy(th, descending);
      });
    });
    if (search) { search.addEventListener("input", function () { filter(search.value); }); }
    var state = {};
    var hash = window.location.hash.replace(/^#/, "");
    if (hash.indexOf("=") >= 0) {
      hash.split("&").forEach(function (part) {
        var pair = part.split("=");
        if (pair.length === 2) { state[pair[0]] = decodeURIComponent(pair[1].replace(/\\+/g, " ")); }
      });
    }
    if (state.sort) {
      headers.forEach(function (th) {
        if (th.getAttribute("data-key") === state.sort) {
          var order = state.order || (th.getAttribute("data-type") === "num" ? "desc" : "asc");
          sortBy(th, order === "desc");
        }
      });
    }
    if (state.q && search) { search.value = state.q; }
    filter(search ? search.value : "");
  }
  document.body.setAttribute("data-js", "ready");
})();
"""

_CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; base-uri 'none'; form-action 'none'")


def png_data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _img(png: bytes, alt: str) -> str:
    return f'<img class="plot" alt="{escape(alt)}" src="{png_data_uri(png)}">'


def _loss_figure(loss, name: str) -> str:
    """The minibatch loss (:func:`~cpgbn.explain.plots.loss_png`: a running median over the
    raw values, a log axis for a wide range), with what the loss is in a caption: it can be a
    long sentence, which HTML wraps."""
    from .plots import loss_png, loss_scale, median_window
    alt = (f"training loss over {len(loss)} steps: running median of "
           f"{median_window(len(loss))} steps, {loss_scale(loss)} scale")
    return (f'<figure class="loss-plot">{_img(loss_png(loss, name), alt)}'
            f"<figcaption>{escape(name[:1].upper() + name[1:])}.</figcaption></figure>")


def _words_cell(col, share=None, F: int = 1) -> str:
    items = ("".join(f"<li>{escape(w)}<span>{p:.3f}</span></li>" for w, p in col) if col
             else f'<li class="muted">{HIDDEN} (near-empty column)</li>')
    if share is None:
        return f'<td><ol class="words">{items}</ol></td>'
    weak = ' class="weak"' if share < 0.5 / F else ""
    return (f'<td{weak}><div class="share">{100 * share:.0f}% of tokens</div>'
            f'<ol class="words">{items}</ol></td>')


def _phrases_cell(phrases, percent: bool) -> str:
    items = "".join(
        f"<li>{escape(p.text)}<span>{(100 * p.weight):.1f}%</span></li>" if percent
        else f"<li>{escape(p.text)}<span>{p.weight:.2g}</span></li>" for p in phrases)
    return f'<ol class="phrases">{items}</ol>' if items else ""


def _num(value, fmt: str) -> str:
    if value is None or not np.isfinite(value):
        return '<td class="num" data-value="NaN">&ndash;</td>'
    return f'<td class="num" data-value="{value:.6g}">{format(value, fmt)}</td>'


def phrase_table_html(rows, *, with_corpus: bool, with_npmi: bool) -> str:
    """The ``#phrase-table`` markup (all text escaped)."""
    F = len(rows[0].columns) if rows else 0
    head = ['<th data-key="kernel" data-type="num">Kernel</th>',
            '<th data-key="usage" data-type="num">Usage %</th>',
            '<th data-key="sharpness" data-type="num">Sharpness</th>']
    with_width = any(r.width is not None for r in rows)
    if with_width:
        head.append('<th data-key="width" data-type="num">Width</th>')
    if with_npmi:
        head.append('<th data-key="npmi" data-type="num">NPMI</th>')
    head += [f'<th data-key="column{f + 1}">Column {f + 1}</th>' for f in range(F)]
    head.append('<th data-key="phrases">Best phrases</th>')
    if with_corpus:
        head.append('<th data-key="corpus">Corpus phrases (share of counts)</th>')
    body = []
    for r in rows:
        cells = [f'<td class="num" data-value="{r.kernel}">{r.kernel}</td>',
                 _num(100 * r.usage, ".2f"), _num(r.sharpness, ".3f")]
        if with_width:
            cells.append(_num(r.width, ".2f"))
        if with_npmi:
            cells.append(_num(r.npmi, "+.3f"))
        cells += [_words_cell(col, None if r.column_share is None else r.column_share[f], F)
                  for f, col in enumerate(r.columns)]
        cells.append(f"<td>{_phrases_cell(r.phrases, percent=False)}</td>")
        if with_corpus:
            cells.append(f"<td>{_phrases_cell(r.corpus_phrases, percent=True)}</td>")
        body.append(f'<tr class="kernel-row" id="kernel-{r.kernel}">{"".join(cells)}</tr>')
    return (f'<table id="phrase-table"><thead><tr>{"".join(head)}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def _tree_roots(model, layer: int, n_trees: int) -> list[int]:
    K = model.layers_[layer - 1]
    if layer == len(model.layers_):
        order = np.argsort(-np.asarray(model.globals_.r), kind="stable")
    else:
        order = np.arange(K)
    return [int(k) for k in order[:n_trees]]


def _facts_html(facts) -> str:
    rows = "".join(f"<tr><td>{escape(label)}</td><td>{escape(value)}</td></tr>" for label, value in facts)
    return f'<table class="facts">{rows}</table>'


def _coherence_html(coherence: CoherenceResult) -> str:
    def stats(values):
        values = np.asarray(values, dtype=np.float64)
        return (f"<td>{len(values)}</td><td>{np.nanmean(values):+.3f}</td>"
                f"<td>{np.nanmedian(values):+.3f}</td>")
    rows = []   # the counterpart of LDA's topic words first (CoherenceResult.describe)
    if coherence.corpus_npmi is not None:
        rows.append("<tr><td>CPGBN kernels: words they explain in the corpus</td>"
                    f"{stats(coherence.corpus_npmi)}</tr>")
    if coherence.lda_npmi is not None:
        rows.append(f"<tr><td>LDA (same vocabulary and documents)</td>{stats(coherence.lda_npmi)}</tr>")
    rows.append(f"<tr><td>CPGBN kernels: top words of the columns</td>{stats(coherence.kernel_npmi)}</tr>")
    where = ("whole documents" if coherence.window is None
             else f"sliding windows of {coherence.window} tokens (a shorter document is one window)")
    parts = [f"<p>Mean pairwise NPMI of each topic's top {coherence.top_n} words, counted over "
             f"{escape(where)}: {coherence.n_windows:,} windows.  A kernel's words are the union "
             "of its columns' top words, ranked by their largest column probability (last row: "
             "a column's words are alternatives, which seldom occur together), or the words "
             "whose occurrences it explains most in these documents.  -1: never "
             "together, 0: independent, +1: always together.</p>",
             '<table class="coh"><thead><tr><th>topics</th><th>count</th><th>mean</th>'
             f'<th>median</th></tr></thead><tbody>{"".join(rows)}</tbody></table>']
    if coherence.lda_topics:
        order = np.argsort(-np.nan_to_num(coherence.lda_npmi, nan=-2.0), kind="stable")[:20]
        items = "".join(f"<li>{escape(' '.join(coherence.lda_topics[i]))} "
                        f"<span class=\"muted\">({coherence.lda_npmi[i]:+.3f})</span></li>" for i in order)
        parts.append(f"<details><summary>The 20 most coherent LDA topics</summary><ol>{items}</ol>"
                     "</details>")
    return "".join(parts)


def _classes_html(model, top: int, phrases: int) -> str:
    """The classifier's units per class (:func:`cpgbn.explain.classes.class_units`)."""
    from .classes import class_phrases, class_units
    units_by_class = class_units(model, top=top, phrases=phrases)
    pushing = class_phrases(model, top=12) or {}
    recorded = any(u.usage is not None for rows in units_by_class.values() for u in rows)
    parts = ['<p class="muted">For each class, the units of the softmax\'s input that push '
             "towards it most: the encoder's filters (their mean activation h^(1) over the "
             "document, when the softmax reads it), the kernels (layer 1) and topics (deeper "
             "layers). "
             + ("Push = the softmax's weight (centred over the classes) times the unit's "
                "usage, its mean input to the softmax over the training documents. A filter's "
                "phrases are the windows of the training documents that carry most of its "
                "activation, with how often each occurs.</p>" if recorded else
                "Ranked by the softmax's weight (centred over the classes): this model "
                "recorded no usage.</p>")]
    for label, units in units_by_class.items():
        rows = "".join(
            f"<tr><td class=\"num\">{u.push:+.3f}</td><td class=\"num\">{u.weight:+.2f}</td>"
            f"<td class=\"num\">{'-' if u.usage is None else f'{u.usage:.3f}'}</td><td>"
            + (f'<a href="#kernel-{u.unit}">kernel {u.unit}</a>' if u.layer == 1
               else f"filter {u.unit}" if u.layer == 0
               else f"layer {u.layer}, topic {u.unit}")
            + "</td><td>" + escape(" | ".join(
                p + ("" if u.counts is None else f" (x{n})")
                for p, n in zip(u.phrases, u.counts or [None] * len(u.phrases))))
            + "</td></tr>" for u in units)
        said = pushing.get(label)
        if said:
            parts.append(f"<h3>class {escape(str(label))}</h3><p class=\"class-phrases\">"
                         "Phrases of the training documents that push towards it most: "
                         + " | ".join(f"{escape(p.text)} <span class=\"muted\">x{p.count}</span>"
                                      for p in said) + "</p>")
        else:
            parts.append(f"<h3>class {escape(str(label))}</h3>")
        parts.append("<table class=\"class-units\">"
                     "<thead><tr><th>push</th><th>weight</th><th>usage</th><th>unit</th>"
                     f"<th>phrases</th></tr></thead><tbody>{rows}</tbody></table>")
    return "".join(parts)


def _token_style(score: float, scale: float) -> str:
    """Background of a token: green towards the explained class, red away, by |score|."""
    alpha = min(1.0, abs(score) / scale) * 0.75 if scale > 0 else 0.0
    colour = "46, 160, 67" if score > 0 else "215, 58, 73"
    return f"background: rgba({colour}, {alpha:.2f})"


def explained_document_html(explanation, index: int) -> str:
    """One document's explanation (:func:`cpgbn.explain.classes.explain_document`): the text
    with each token highlighted by its score, the prediction and the top phrases."""
    scores = explanation.token_scores
    scale = float(np.abs(scores).max()) if len(scores) else 0.0
    tokens = " ".join(
        f'<span class="tok" data-score="{score:.4f}" title="{score:+.3f}" '
        f'style="{_token_style(score, scale)}">{escape(token)}</span>'
        for token, score in zip(explanation.tokens, scores))
    probs = ", ".join(f"{escape(str(label))} {p:.3f}"
                      for label, p in explanation.probabilities.items())
    phrases = "".join(
        f"<li>{escape(' '.join(w.words))} <span>{w.score:+.3f}, words "
        f"{max(w.start, 0) + 1}-{max(w.start, 0) + len(w.words)}, "
        + (f'<a href="#kernel-{w.kernel}">kernel {w.kernel}</a>' if explanation.unit == "kernel"
           else f"{escape(explanation.unit)} {w.kernel}") + "</span></li>"
        for w in explanation.phrases)
    return (f'<div class="explained-doc" id="doc-{index}" '
            f'data-predicted="{escape(str(explanation.predicted))}">'
            f"<div><b>predicted: {escape(str(explanation.predicted))}</b> "
            f'<span class="muted">({probs})</span></div>'
            f'<p class="text">{tokens}</p><ol class="phrases">{phrases}</ol></div>')


def build_report(model, texts=None, labels=None, *, title: str | None = None, source: str | None = None,
                 top_words: int = 4, top_phrases: int = 3, corpus_top: int = 3, beam: int = 10,
                 trees: int = 3, children: int = 3, tree_layer: int | None = None,
                 npmi: bool = True, lda: bool = True, window: int | None = DEFAULT_WINDOW,
                 npmi_words: int = DEFAULT_TOP_N, lda_iter: int = 50, sweeps: int = 10,
                 burn_in: int = 5, hide_unknown: bool = True,
                 min_column_share: float = MIN_COLUMN_SHARE,
                 assignments: KernelAssignments | None = None,
                 coherence: CoherenceResult | None = None, explain=(),
                 explain_top: int = 5, explain_note: str = "") -> str:
    """The report as one HTML string.

    ``texts`` (strings or a Corpus over the model's vocabulary; normally the training
    documents) adds corpus phrases (``sweeps`` sweeps of inference, the first ``burn_in``
    discarded), NPMI coherence (``npmi``; LDA comparison with ``lda``) and, with ``labels``,
    per-class usage.  Precomputed ``assignments`` or ``coherence`` are used as given.
    Phrase columns with less than ``min_column_share`` of their kernel's or topic's mass are
    hidden (see :mod:`cpgbn.explain.hierarchy`).

    A classifier (:class:`~cpgbn.classifier.CPGBNClassifier`) adds the units that push towards
    each class and, for each text of ``explain``, its prediction with every token highlighted
    by how much it moved it (:mod:`cpgbn.explain.classes`; ``explain_top`` phrases listed);
    ``explain_note`` says where those texts come from (documents the model trained on, or
    held-out ones).
    """
    from . import plots
    check_is_fitted(model)
    corpus = model.encode(texts) if texts is not None else None
    if corpus is not None and assignments is None:
        assignments = assign_kernels(model, corpus, n_iter=sweeps, burn_in=burn_in)
    if corpus is not None and npmi and coherence is None:
        coherence = model_coherence(model, corpus, window=window, top_n=npmi_words, lda=lda,
                                    lda_iter=lda_iter, assignments=assignments)
    rows = kernel_table(model, top_words=top_words, top_phrases=top_phrases, beam=beam,
                        hide_unknown=hide_unknown, assignments=assignments, corpus_top=corpus_top,
                        npmi=None if coherence is None else coherence.kernel_npmi,
                        min_column_share=min_column_share)
    rows.sort(key=lambda r: (-r.usage, r.kernel))
    facts = summary_facts(model, corpus=corpus, labels=labels, coherence=coherence,
                          assignments=assignments,
                          phrases=None if corpus is None else kernel_phrase_quality(rows, corpus))
    layers = tuple(model.layers_)
    title = title or f"CPGBN {'-'.join(map(str, layers))}"

    # plots
    if len(model.loglik_trace_):
        png = plots.loglik_png(model.loglik_trace_, model.n_train_tokens_,
                               model.burn_in)
        figures = [_img(png, "training log-likelihood")]
    else:   # a minibatch mode: its per-step loss (not a log-likelihood)
        figures = [_loss_figure(model.loss_trace_, model.loss_name or "loss")]
    # label the usage bars by what the kernel does in the data when known, else its best phrase
    best = {r.kernel: (f'"{r.corpus_phrases[0].text}"' if r.corpus_phrases
                       else r.phrases[0].text if r.phrases else "") for r in rows}
    figures.append(_img(plots.usage_png(model.kernel_usage(), top=30, labels=best), "kernel usage"))
    if assignments is not None and labels is not None:
        if len(labels) != len(assignments.corpus):
            from ..errors import CPGBNInputError
            raise CPGBNInputError(f"{len(labels)} labels for {len(assignments.corpus)} documents")
        figures.append(_img(plots.class_usage_png(assignments.doc_kernel, labels),
                            "kernel usage per class"))

    # trees
    layer = len(layers) if tree_layer is None else check_layer(layers, tree_layer)
    tree_parts = []
    for k in _tree_roots(model, layer, trees):
        node = topic_tree(model.globals_, model.vocabulary_, layer, k, children,
                          max(top_words, top_phrases), hide_unknown, min_column_share)
        label = ", ".join(p.text for p in phrases_from_columns(node.columns, 2))
        tree_parts.append(
            f'<figure class="topic-tree" id="tree-{layer}-{k}"><figcaption>Layer {layer}, topic {k}'
            f" &mdash; {escape(label)}</figcaption>{plots.tree_svg(node, phrases=2, link_kernels=True)}"
            f"<details><summary>as text</summary><pre>{escape(format_tree(node))}</pre></details>"
            "</figure>")
    tree_note = ("A tree starts at a topic of layer {layer} (the heaviest by r first) and follows "
                 "the {children} largest entries of its Phi column down to layer 1; edge width "
                 "shows the weight, hover a box for all its column words.").format(
                     layer=layer, children=children)
    if len(layers) == 1:
        tree_note = ("This is a single-layer model, so each tree is a single kernel (the most "
                     "used by r); fit more layers (e.g. 200,100,50) for topic hierarchies.")

    data_note = "" if corpus is not None else (
        '<p class="muted">Run <code>cpgbn report MODEL_DIR DATA</code> with the training data to '
        "add corpus phrases, NPMI coherence and per-class usage.</p>")
    classifier = is_classifier(model)
    if len(explain) and not classifier:
        from .classes import require_classifier
        require_classifier(model)   # its one-line error

    def documents_html() -> str:
        from .classes import explain_document
        docs = "".join(explained_document_html(explain_document(model, text, top=explain_top), i)
                       for i, text in enumerate(explain))
        return ('<p class="muted">Each token is shaded by how much the '
                "predicted class's log-odds falls when that token alone is "
                "removed, its column left empty (green: towards the class, red: "
                "away; "
                "hover for the number); the phrases are the windows whose kernels "
                "carry most of the decision (gradient times input at the "
                "encoder's position weights)."
                + (f" {escape(explain_note)}" if explain_note else "")
                + "</p>" + docs)

    def phrases_html() -> str:
        F = model.globals_.D.shape[1]
        return (f'<p class="muted">Each kernel is a distribution over {F}-word '
                "phrases: its columns' top words (probability within the column), the most "
                "probable phrases (beam search; probability), and"
                + (" the corpus phrases it explains most (share of its counts)."
                   if assignments is not None
                   else " (with data) the corpus phrases it explains most.")
                + f" A column with less than {100 * min_column_share:.0f}% of a kernel's mass is "
                f"near-empty (the prior and a few rare words) and shown as {HIDDEN}."
                + " Sharpness is the mean over the shown columns of the top word's probability."
                + (" Width is the effective number of columns the kernel uses in the data (1 to "
                   f"{F}); each column shows its share of the tokens the "
                   "kernel explains, greyed when small." if assignments is not None else "")
                + (" The out-of-vocabulary token is hidden." if hide_unknown else "") + "</p>"
                '<p><input id="phrase-search" type="search" placeholder="filter kernels by word" '
                'aria-label="filter kernels by word"> '
                '<span id="phrase-count" class="muted"></span></p>'
                + '<div class="table-wrap">'
                + phrase_table_html(rows, with_corpus=assignments is not None,
                                    with_npmi=coherence is not None) + "</div>")

    # every section, in the report's order, with where it applies; a body is built only there
    present = {"classifier": classifier, "explained": classifier and len(explain) > 0,
               "coherence": coherence is not None}
    bodies = {
        "summary": lambda: _facts_html(facts) + data_note,
        "plots": lambda: '<div class="plots">' + "".join(figures) + "</div>",
        "classes": lambda: _classes_html(model, top=top_phrases + 2, phrases=2),
        "documents": documents_html,
        "coherence": lambda: _coherence_html(coherence),
        "phrases": phrases_html,
        "trees": lambda: f'<p class="muted">{escape(tree_note)}</p>' + "".join(tree_parts),
    }
    shown = [section for section in REPORT_SECTIONS
             if section.applies is None or present[section.applies]]
    sections = [f'<section id="{section.id}"><h2>{section.heading}</h2>{bodies[section.id]()}'
                "</section>" for section in shown]
    nav = "".join(f'<a href="#{section.id}">{escape(section.nav)}</a>' for section in shown)
    subtitle = f"cpgbn {VERSION}" + (f" &middot; {escape(source)}" if source else "")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(title)}</title><style>{_CSS}</style></head>\n<body>"
            f'<header><h1>{escape(title)}</h1><p class="muted">{subtitle}</p><nav>{nav}</nav></header>'
            f"<main>{''.join(sections)}</main>"
            f'<footer><p class="muted">Self-contained report: no network resources.</p></footer>'
            f"<script>{_JS}</script></body></html>\n")


def write_report(html: str, path) -> Path:
    """Write the report atomically (a temporary sibling renamed into place)."""
    from ..files import write_file_atomically
    return write_file_atomically(path, lambda fh: fh.write(html))
