"""Model visualisation: phrases (beam search, corpus phrases), plots (the loss's running
median), tree SVG, summary, the self-contained HTML report, the ``report``/``summary``
commands, and the report in headless Chromium (its tables within a 1280-pixel window; skipped
when Chromium is not installed)."""
import base64
import itertools
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import numpy as np
import pytest

from cpgbn import CPGBN, CPGBNInputError
from cpgbn.cli import main as explain_main
from cpgbn.explain import (HIDDEN, Phrase, TopicNode, assign_kernels, best_phrases, build_report,
                           class_usage_png, corpus_phrases, format_kernel_table, kernel_table,
                           loglik_png, phrases_from_columns, save_tree_svg, sharpness, sort_kernels,
                           summary_text,
                           top_words_per_column, tree_svg, usage_png, write_report)
from cpgbn.explain.plots import loss_png, loss_scale, median_window, running_median
from cpgbn.explain.summary import summary_facts
from cpgbn.text import Corpus, Vocabulary

from helpers import phrase_corpus, write_tsv

PLANTED = {"red apple pie", "warm cherry jam", "sweet berry tart", "fresh peach cake",
           "cold steel rail", "heavy iron gate", "sharp copper wire", "loud brass bell"}
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def corpus_and_labels():
    return phrase_corpus(80, seed=0)


@pytest.fixture(scope="module")
def model(corpus_and_labels):
    texts, _ = corpus_and_labels
    return CPGBN(layers=(6, 3), vocab_size=40, n_iter=10, burn_in=5, random_state=0).fit(texts)


@pytest.fixture(scope="module")
def assignments(model, corpus_and_labels):
    return assign_kernels(model, corpus_and_labels[0], n_iter=6, burn_in=3)


@pytest.fixture(scope="module")
def oov_model(corpus_and_labels):
    """A vocabulary too small for the corpus: many tokens become <unk>."""
    return CPGBN(layers=(4,), vocab_size=12, n_iter=6, burn_in=3, random_state=1).fit(
        corpus_and_labels[0])


@pytest.fixture(scope="module")
def report_html(model, corpus_and_labels, assignments):
    texts, labels = corpus_and_labels
    return build_report(model, texts, labels, title="tiny <model> & co", source="tests",
                        assignments=assignments, lda_iter=5)


@pytest.fixture(scope="module")
def wide_report():
    """The report of a minibatch-gibbs model (a training loss, not a log-likelihood) whose
    phrase table would be wide: six columns of 40-letter words, corpus phrases, NPMI."""
    rng = np.random.default_rng(0)
    words = [f"{'x' * 40}{i}" for i in range(20)] + ["the", "a"]
    texts = [" ".join(rng.choice(words, 12)) for _ in range(60)]
    model = CPGBN(inference="minibatch-gibbs", layers=(5,), vocab_size=30, filter_width=6,
                  batch_size=20, n_epochs=2, n_iter=4, burn_in=2, random_state=0,
                  n_threads=1).fit(texts)
    return build_report(model, texts, ["a", "b"] * 30, lda=False, sweeps=2, burn_in=1)


# ---------------------------------------------------------------------- phrases
def test_best_phrases_are_the_exact_top_sequences():
    rng = np.random.default_rng(0)
    V, F = 7, 3
    D = rng.gamma(0.3, size=(V, F))
    vocab = Vocabulary(["<unk>"] + [f"v{i}" for i in range(1, V)])
    probs = D / D.sum(axis=0)
    brute = sorted(((np.prod([probs[v, f] for f, v in enumerate(seq)]), seq)
                    for seq in itertools.product(range(1, V), repeat=F)), key=lambda x: -x[0])
    found = best_phrases(D, vocab, top_n=5, beam=5)
    assert [p.words for p in found] == [tuple(vocab.decode(list(s))) for _, s in brute[:5]]
    np.testing.assert_allclose([p.weight for p in found], [w for w, _ in brute[:5]])
    # a beam narrower than top_n is widened; the <unk> row is used only when asked
    assert len(best_phrases(D, vocab, top_n=4, beam=1)) == 4
    D[0] = 100.0
    assert all("<unk>" not in p.words for p in best_phrases(D, vocab, top_n=3))
    assert best_phrases(D, vocab, top_n=1, hide_unknown=False)[0].words == ("<unk>",) * F
    # the same phrases from the (word, probability) columns that trees keep
    columns = top_words_per_column(D, vocab, 4)
    assert [p.text for p in phrases_from_columns(columns, 3)] == [
        p.text for p in best_phrases(D, vocab, top_n=3)]
    with pytest.raises(CPGBNInputError):
        best_phrases(D[:3], vocab)


def test_sharpness():
    vocab_size = 5
    one_hot = np.zeros((vocab_size, 3))
    one_hot[[1, 2, 3], [0, 1, 2]] = 1.0
    assert sharpness(one_hot) == pytest.approx(1.0)
    assert sharpness(np.ones((vocab_size, 3))) == pytest.approx(1 / vocab_size)
    unknown = np.zeros((vocab_size, 2))
    unknown[0] = 1.0
    assert sharpness(unknown) == 0.0 and sharpness(unknown, hide_unknown=False) == 1.0


def test_assignments_account_for_every_token(model, corpus_and_labels, assignments):
    texts, _ = corpus_and_labels
    corpus = assignments.corpus
    K, F = 6, 3
    assert assignments.counts.shape == (assignments.doc_positions[-1], K)
    assert assignments.grams.shape == (assignments.doc_positions[-1], F)
    first = corpus.document(0)
    np.testing.assert_array_equal(assignments.grams[0], first[:F])
    # responsibilities of every token sum to one
    assert assignments.column_tokens.sum() == pytest.approx(corpus.n_tokens, rel=1e-5)
    np.testing.assert_allclose(assignments.word_tokens.sum(axis=1),
                               np.bincount(corpus.tokens, minlength=len(model.vocabulary_)),
                               rtol=1e-5, atol=1e-6)
    assert assignments.usage.sum() == pytest.approx(1.0)
    assert np.all((assignments.width >= 1 - 1e-9) & (assignments.width <= F + 1e-9))


def test_corpus_phrases_recover_planted_phrases(model, corpus_and_labels, assignments):
    texts, _ = corpus_and_labels
    from cpgbn.explain import top_corpus_phrases
    found = top_corpus_phrases(assignments, model.vocabulary_, top_n=3)
    assert len(found) == 6 and all(1 <= len(k) <= 3 for k in found)
    grams = {" ".join(t.split()[i:i + 3]) for t in texts for i in range(len(t.split()) - 2)}
    assert all(p.text in grams for k in found for p in k)
    assert all(p1.weight >= p2.weight for k in found for p1, p2 in zip(k, k[1:]))
    tops = {k[0].text for k in found}
    assert len(tops & PLANTED) >= 4, tops
    # the convenience wrapper runs its own inference
    again = corpus_phrases(model, texts[:20], top_n=2, n_iter=3, burn_in=1)
    assert len(again) == 6


def test_unknown_token_is_hidden_by_default(oov_model, corpus_and_labels):
    texts, _ = corpus_and_labels
    corpus = Corpus.from_texts(texts, vocabulary=oov_model.vocabulary_)
    assert np.mean(corpus.tokens == 0) > 0.2
    assignments = assign_kernels(oov_model, corpus, n_iter=3, burn_in=1)
    rows = kernel_table(oov_model, assignments=assignments)
    text = format_kernel_table(rows, columns=True)
    # the columns and best phrases hide it; the windows a kernel explains show it as the word
    # it stands for (a rare word), so that a kernel of rare words is not named by another
    kernel_view = [line for line in text.splitlines()
                   if not line.startswith(("kernel ", "   in corpus: "))]
    assert "<unk>" not in "\n".join(kernel_view)
    assert any("<unk>" in r.name for r in rows)
    shown = kernel_table(oov_model, assignments=assignments, hide_unknown=False)
    assert "<unk>" in "\n".join(line for line in format_kernel_table(shown, columns=True)
                                 .splitlines() if not line.startswith(("kernel ", "   in ")))


def test_kernel_table_sort_and_format(model, assignments):
    rows = kernel_table(model, top_words=3, top_phrases=2, assignments=assignments,
                        npmi=np.linspace(-0.5, 0.5, 6))
    assert [r.kernel for r in rows] == list(range(6))
    assert all(len(r.columns) == 3 and len(r.phrases) == 2 for r in rows)
    assert all(isinstance(p, Phrase) for r in rows for p in r.corpus_phrases)
    by_usage = sort_kernels(rows, "usage")
    assert [r.usage for r in by_usage] == sorted((r.usage for r in rows), reverse=True)
    assert sort_kernels(rows, "npmi")[0].kernel == 5
    assert [r.kernel for r in sort_kernels(by_usage, "kernel")] == list(range(6))
    with pytest.raises(CPGBNInputError, match="sort key"):
        sort_kernels(rows, "colour")
    text = format_kernel_table(sort_kernels(rows, "sharpness"), columns=True)
    assert text.count("kernel ") == 6 and text.count("best phrase: ") == 6
    assert text.count("in corpus:") == sum(1 for r in rows if r.corpus_phrases) > 0
    assert "% of tokens]" in text and "width" in text
    # the default view: names and corpus windows, the per-column view only where there are none
    text = format_kernel_table(rows)
    assert text.count("best phrase: ") == sum(1 for r in rows if not r.corpus_phrases)
    assert rows[0].to_dict()["kernel"] == 0


# ---------------------------------------------------------------------- plots and trees
def test_plots_are_png(model, assignments, corpus_and_labels):
    _, labels = corpus_and_labels
    for png in (loglik_png(model.loglik_trace_, model.n_train_tokens_, 5),
                usage_png(model.kernel_usage(), top=4, labels=[f"k{k}" for k in range(6)]),
                class_usage_png(assignments.doc_kernel, labels)):
        assert png.startswith(PNG) and len(png) > 1000
    with pytest.raises(CPGBNInputError):
        class_usage_png(assignments.doc_kernel, labels[:3])
    with pytest.raises(CPGBNInputError):
        loglik_png([])


def test_running_median_ignores_spikes():
    assert [median_window(n) for n in (1, 3, 4, 100, 1000, 10000)] == [1, 1, 3, 11, 31, 101]
    y = np.full(200, 5.0)
    y[::17] = 1e4                      # spikes fill far less than half of any window
    y[50] = np.nan
    np.testing.assert_array_equal(running_median(y, 15), 5.0)
    np.testing.assert_array_equal(running_median(np.arange(10.0), 3, at=[0, 5, 9]), [0.5, 5, 8.5])
    assert np.isnan(running_median([np.nan, np.nan], 1)).all()


def test_the_loss_plot_follows_the_trend_on_a_log_axis_for_a_wide_range():
    rng = np.random.default_rng(0)
    trend = 5e5 * (1 + 3 * np.exp(-np.arange(3000) / 300))
    loss = trend * np.exp(rng.normal(0, 0.05, 3000))
    loss[rng.choice(3000, 10, replace=False)] = 1.5e8   # spikes 300 times the trend
    assert loss_scale(loss) == "log" and median_window(len(loss)) == 55
    # the plotted median follows the trend within 5%, far below the spikes
    median = running_median(loss, median_window(len(loss)))
    assert np.max(np.abs(median / trend - 1)) < 0.05
    assert loss_png(loss, "negative <ELBO>").startswith(PNG)
    # all within two decades, or not all positive: a linear axis
    assert loss_scale(trend) == "linear" and loss_scale(np.r_[-1.0, 1e4, np.inf, 5.0]) == "linear"
    assert loss_png([7.0]).startswith(PNG)
    with pytest.raises(CPGBNInputError):
        loss_png([])


def test_tree_svg_is_well_formed_and_escaped(model):
    root = model.tree(topic=0, children=2, top_n=3)
    svg = tree_svg(root, standalone=True)
    tree = ET.fromstring(svg)  # well-formed XML
    ns = "{http://www.w3.org/2000/svg}"
    assert len(tree.findall(f".//{ns}rect")) == 3  # root + 2 children
    inline = tree_svg(root, link_kernels=True)
    assert "xmlns" not in inline and inline.count('href="#kernel-') == 2
    evil = TopicNode(1, 0, 1.0, [[("<script>", 0.5)], [("a&b", 0.5)]])
    text = tree_svg(evil)
    assert "<script>" not in text and "&lt;script&gt;" in text and "a&amp;b" in text
    ET.fromstring(tree_svg(evil, standalone=True))


def test_trees_as_one_svg_file(model, tmp_path):
    roots = [model.tree(topic=k, children=2) for k in range(3)]
    path = save_tree_svg(roots, tmp_path / "trees.svg")
    tree = ET.parse(path).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    assert len(tree.findall(f"{ns}g")) == 3 and len(tree.findall(f".//{ns}rect")) == 9
    assert float(tree.get("height")) > 3 * 60
    ET.parse(save_tree_svg(roots[0], tmp_path / "one.svg"))


# ---------------------------------------------------------------------- summary
def test_summary_text(model, corpus_and_labels, assignments):
    texts, labels = corpus_and_labels
    text = summary_text(model)
    for needle in ("CPGBN 6-3 (2 layers)", "filter width F = 3", "10 Gibbs sweeps", "log-likelihood",
                   "per sweep", "most used kernels (of 6)"):
        assert needle in text
    assert "coherence  " not in text and "give the training documents" in text
    full = summary_text(model, texts, labels=labels, lda_iter=5, assignments=assignments)
    assert "80 documents" in full and "2 classes" in full and "phrase width" in full
    assert "NPMI" in full and "LDA with 6 topics" in full
    phrases = next(line for line in full.splitlines() if line.startswith("phrases "))
    assert "names of the 6 most used kernels" in phrases and "collocation baseline" in phrases
    facts = dict(summary_facts(model))
    assert facts["training data"] == f"80 documents, {model.n_train_tokens_} tokens"


# ---------------------------------------------------------------------- report
class _Collector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.classes, self.tags, self.imgs = set(), [], [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        self.classes += (attrs.get("class") or "").split()
        if tag == "img":
            self.imgs.append(attrs["src"])


def test_report_is_self_contained_and_complete(report_html, model):
    html = report_html
    # no network resource of any kind: no URL scheme, no external reference
    assert "http://" not in html and "https://" not in html
    assert "//" not in re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", html)
    assert not re.search(r"""(src|href)\s*=\s*["'](?!data:|#)""", html)
    assert "Content-Security-Policy" in html
    parsed = _Collector()
    parsed.feed(html)
    assert {"summary", "phrase-table", "phrase-search", "phrase-count", "trees", "coherence"} <= parsed.ids
    assert parsed.classes.count("kernel-row") == 6
    assert parsed.classes.count("topic-tree") == 3 and parsed.tags.count("svg") == 3
    assert len(parsed.imgs) == 3  # trace, usage, per-class usage
    for src in parsed.imgs:
        assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG)
    # user text is escaped
    assert "tiny &lt;model&gt; &amp; co" in html and "<model>" not in html
    # the corpus phrases and coherence are there
    assert "Corpus phrases" in html and "LDA (same vocabulary and documents)" in html
    assert sum(p in html for p in PLANTED) >= 4


def test_sections_follow_their_declaration_and_the_navigation_lists_them(report_html, model):
    from cpgbn.explain.report import REPORT_SECTIONS
    # an unsupervised model with coherence: every section but the classifier's, in order
    expected = [s.id for s in REPORT_SECTIONS if s.applies in (None, "coherence")]
    assert re.findall(r'<section id="([a-z]+)">', report_html) == expected
    assert re.findall(r'<a href="#([a-z]+)">', report_html.split("<main>")[0]) == expected
    # a classifier's sections are refused by name for a model fitted without labels
    with pytest.raises(CPGBNInputError, match="fitted without labels"):
        build_report(model, explain=["a text"])


def test_a_model_answers_for_its_records(model):
    assert model.recorded("loss_trace_") is None          # a Gibbs fit has no per-step loss
    assert model.recorded("globals_") is model.globals_
    with pytest.raises(CPGBNInputError, match="not a fitted attribute"):
        model.recorded("kernel_window_")                  # a typo is an error, not a None

def test_report_of_a_minibatch_model_draws_the_loss(wide_report):
    parsed = _Collector()
    parsed.feed(wide_report)
    assert parsed.classes.count("loss-plot") == 1
    assert len(parsed.imgs) == 3  # the loss, usage and per-class usage
    assert re.search(r'alt="training loss over \d+ steps: running median of \d+ steps, '
                     r'(log|linear) scale"', wide_report)
    assert "http://" not in wide_report and "https://" not in wide_report


def test_report_without_data(model):
    html = build_report(model)
    assert 'id="phrase-table"' in html and "Corpus phrases" not in html
    assert 'id="coherence"' not in html and "cpgbn report MODEL_DIR DATA" in html
    assert html.count('<figure class="topic-tree"') == 3


# ---------------------------------------------------------------------- commands
def test_report_and_summary_commands(model, corpus_and_labels, tmp_path, capsys):
    texts, labels = corpus_and_labels
    model.save(tmp_path / "m")
    data = write_tsv(tmp_path / "train.tsv", texts, labels)
    out = tmp_path / "out" / "report.html"
    assert explain_main(["report", str(tmp_path / "m"), str(data), "--out", str(out),
                         "--lda-iter", "3", "--sweeps", "4", "--trees", "2"]) == 0
    html = out.read_text(encoding="utf-8")
    assert html.count('<figure class="topic-tree"') == 2 and 'class="kernel-row"' in html
    assert "wrote" in capsys.readouterr().out
    assert explain_main(["summary", str(tmp_path / "m"), "--top", "3"]) == 0
    out_text = capsys.readouterr().out
    assert "CPGBN 6-3" in out_text and out_text.count("\n") > 10
    assert explain_main(["summary", str(tmp_path / "m"), str(data), "--no-lda", "--window", "doc",
                         "--sweeps", "2"]) == 0
    assert "whole documents" in capsys.readouterr().out
    # errors: one line, exit status 2
    assert explain_main(["summary", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cpgbn: error:") and err.count("\n") == 1
    assert explain_main(["report", str(tmp_path / "m"), "--out", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert explain_main(["report", str(tmp_path / "m"), "--out", str(out), "--layer", "3"]) == 2
    assert "layer must be between 1 and 2" in capsys.readouterr().err


# ---------------------------------------------------------------------- headless Chromium
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--enable-logging=stderr", "--v=0"]


def _chromium_dom(path, tmp_path, fragment="", window=None):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("headless Chromium not installed (Debian: apt-get install chromium); the "
                    "browser check of the report is skipped")
    result = subprocess.run(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
         *([f"--window-size={window[0]},{window[1]}"] if window else []),
         path.resolve().as_uri() + fragment], capture_output=True, text=True, timeout=90)
    assert result.returncode == 0, result.stderr[-2000:]
    console = [line for line in result.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, console  # no script error, no blocked resource, no log line at all
    return result.stdout


def _check_rendered(dom, n_kernels):
    assert 'data-js="ready"' in dom  # the page script ran to the end
    table = re.search(r'<table id="phrase-table">.*?</table>', dom, re.S)
    assert table and table.group(0).count('class="kernel-row"') == n_kernels
    assert re.search(r'id="phrase-count"[^>]*>\d+ of \d+ kernels shown<', dom)
    trees = re.findall(r'<figure class="topic-tree".*?</figure>', dom, re.S)
    assert trees and all("<svg" in t and "<rect" in t and "tree-node" in t for t in trees)


def test_report_renders_in_headless_chromium(report_html, tmp_path):
    path = write_report(report_html, tmp_path / "report.html")
    _check_rendered(_chromium_dom(path, tmp_path), 6)
    # the address fragment applies a filter and a sort on load
    dom = _chromium_dom(path, tmp_path, "#q=copper&sort=kernel&order=desc")
    rows = re.findall(r'<tr class="kernel-row" id="kernel-(\d+)"( hidden="")?', dom)
    assert [int(k) for k, _ in rows] == [5, 4, 3, 2, 1, 0]
    visible = [k for k, hidden in rows if not hidden]
    assert 0 < len(visible) < 6


#: Appended to a report: writes the rendered width of every table, of the loss plot and of
#: the page into attributes of <body>, for --dump-dom to show.
WIDTH_PROBE = """<script>
var px = function (e) { return Math.round(e.getBoundingClientRect().width); };
document.body.setAttribute("data-table-widths",
  Array.prototype.map.call(document.querySelectorAll("table"), px).join(","));
var loss = document.querySelector("figure.loss-plot img");
document.body.setAttribute("data-loss-width", loss ? px(loss) : -1);
document.body.setAttribute("data-page-width", document.documentElement.scrollWidth);
</script></body>"""


def test_report_fits_a_1280_pixel_window(wide_report, tmp_path):
    """No table of the report is wider than a 1280-pixel window (the phrase table of six
    columns of 40-letter words included), nor is the page, and the loss plot is drawn."""
    assert wide_report.count("</body>") == 1
    path = write_report(wide_report.replace("</body>", WIDTH_PROBE), tmp_path / "wide.html")
    dom = _chromium_dom(path, tmp_path, window=(1280, 900))
    _check_rendered(dom, 5)
    widths = [int(w) for w in re.search(r'data-table-widths="([^"]*)"', dom).group(1).split(",")]
    assert len(widths) >= 3 and max(widths) <= 1280, widths   # summary, coherence, phrases
    assert int(re.search(r'data-page-width="(\d+)"', dom).group(1)) <= 1280
    assert 300 < int(re.search(r'data-loss-width="(-?\d+)"', dom).group(1)) <= 1280


# ---------------------------------------------------------------------- real data (TREC)
@pytest.mark.data
def test_trec_phrases_and_report(data_dir, tmp_path):
    """A small CPGBN on TREC questions: kernels pick up question openings (Table 3) and are
    named by windows that occur in the questions as often as they say, and the report of the
    TREC model renders in Chromium when it is installed."""
    from cpgbn.datasets import load_dataset
    texts, labels = load_dataset("trec", "train", data_dir=data_dir)
    model = CPGBN(layers=(32, 8), vocab_size=2000, n_iter=20, burn_in=10, random_state=0).fit(texts)
    assignments = assign_kernels(model, texts, n_iter=4, burn_in=2)
    rows = kernel_table(model, assignments=assignments)
    openings = {"how", "what", "who", "where", "when", "which", "why"}
    found = {r.name.split()[0] for r in rows}
    assert len(found & openings) >= 4, sorted(r.name for r in rows)
    # every window a kernel is named by occurs (_: any word), at least as often as recorded
    # (the fit recorded its windows on a sample of 5,000 of the 5,452 questions)
    grams = assignments.grams
    for row in rows:
        assert row.corpus_phrases, row.kernel
        for phrase in row.corpus_phrases:
            ids = [None if w == HIDDEN else int(model.vocabulary_.encode([w])[0])
                   for w in phrase.words]
            match = np.all([grams[:, f] == v for f, v in enumerate(ids) if v is not None], axis=0)
            assert 3 <= phrase.count <= match.sum(), (phrase, match.sum())
    html = build_report(model, texts, labels, assignments=assignments, lda=False)
    path = write_report(html, tmp_path / "trec.html")
    assert "http://" not in html and "https://" not in html
    if shutil.which("chromium") or shutil.which("chromium-browser"):
        _check_rendered(_chromium_dom(path, tmp_path), 32)
