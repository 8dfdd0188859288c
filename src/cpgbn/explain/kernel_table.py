"""The phrase table: one row per kernel with everything shown about it, sorted and rendered.

A row (:class:`KernelSummary`) holds the kernel's usage and sharpness, its columns' top words
and best phrases (the paper's Table 3, :mod:`cpgbn.explain.phrases`), and the windows of the
corpus it explains with their counts (:mod:`cpgbn.explain.kernel_windows`), the first of
which names the kernel in every view: ``cpgbn topics`` and its ``--json``, ``summary`` and the
report.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..errors import CPGBNInputError
from .hierarchy import (HIDDEN, MIN_COLUMN_SHARE, check_min_column_share, column_mass,
                        top_words_per_column)
from .phrases import KernelAssignments, Phrase, best_phrases, sharpness

__all__ = ["KernelSummary", "kernel_table", "recorded_phrases", "sort_kernels",
           "format_kernel_table", "SORT_KEYS", "FOLD_BELOW", "shown_kernels"]
@dataclass
class KernelSummary:
    """One row of the phrase table: everything shown about kernel ``kernel``."""

    kernel: int
    usage: float
    sharpness: float
    columns: list[list[tuple[str, float]]]
    phrases: list[Phrase]
    corpus_phrases: list[Phrase] = field(default_factory=list)
    npmi: float | None = None
    column_share: list[float] | None = None
    """Share of the kernel's explained corpus tokens at each column (with data)."""
    width: float | None = None
    """Effective number of columns used in the corpus, 1..F (with data)."""
    column_mass: list[float] | None = None
    """Share of the kernel's mass (its training counts plus the prior) at each column."""

    @property
    def n_shown(self) -> int:
        """Columns shown (not near-empty)."""
        return sum(1 for col in self.columns if col)

    @property
    def name(self) -> str:
        """What every view calls the kernel: the first window it explains in the corpus when
        known, else its best phrase."""
        first = (self.corpus_phrases or self.phrases or [None])[0]
        return "" if first is None else first.text

    @property
    def n_named_columns(self) -> int:
        """Words of the kernel's name that are not an open slot: how many columns the kernel
        fixes in the corpus (with corpus phrases), else its shown columns."""
        if self.corpus_phrases:
            return sum(1 for w in self.corpus_phrases[0].words if w != HIDDEN)
        return self.n_shown

    def to_dict(self) -> dict:
        """The row as JSON values (``cpgbn topics --json``), read from the same fields as
        :func:`format_kernel_table`, so both views show the same words and phrases.

        A phrase is its token list, ``HIDDEN`` at an open slot (a near-empty column); a
        column is its (word, probability) pairs, or ``hidden: true`` and no words.  Corpus
        phrases (``share`` of the kernel's counts), NPMI, the column shares and the width are
        there only when known; a non-finite number is null (JSON has no NaN)."""
        record = {"kernel": self.kernel, "usage": self.usage, "sharpness": self.sharpness,
                  "n_shown": self.n_shown, "column_mass": self.column_mass,
                  "columns": [{"hidden": not col, "words": [{"word": w, "p": p} for w, p in col]}
                              for col in self.columns],
                  "phrases": [{"tokens": list(p.words), "weight": p.weight} for p in self.phrases]}
        record["name"] = self.name
        if self.corpus_phrases:
            record["corpus_phrases"] = [{"tokens": list(p.words), "share": p.weight,
                                         "count": p.count} for p in self.corpus_phrases]
        for name in ("npmi", "width", "column_share"):
            value = getattr(self, name)
            if value is not None:
                record[name] = ([_finite(x) for x in value] if isinstance(value, list)
                                else _finite(value))
        return record


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


SORT_KEYS = ("usage", "sharpness", "width", "npmi", "kernel")


def kernel_table(model, *, top_words: int = 4, top_phrases: int = 3, beam: int = 10,
                 hide_unknown: bool = True, assignments: KernelAssignments | None = None,
                 corpus_top: int = 3, npmi=None, min_column_share: float = MIN_COLUMN_SHARE
                 ) -> list[KernelSummary]:
    """One :class:`KernelSummary` per kernel, in kernel order.  The corpus phrases are the
    windows the model recorded at the end of its fit (``kernel_windows_``,
    :mod:`cpgbn.explain.kernel_windows`); for a model without that record, those of
    ``assignments`` (from :func:`assign_kernels`), ranked the same way, when given.  ``npmi``
    (one value per kernel) adds the coherence.  Columns with less than ``min_column_share`` of
    a kernel's mass are hidden from its words, best phrases and sharpness (0 shows every
    column)."""
    check_is_fitted(model)
    min_column_share = check_min_column_share(min_column_share)
    D = model.globals_.D
    vocabulary = model.vocabulary_
    usage = np.asarray(model.kernel_usage(), dtype=np.float64)
    found = recorded_phrases(model, assignments, corpus_top)
    shares = assignments.column_share if assignments is not None else None
    widths = assignments.width if assignments is not None else None
    rows = []
    for k in range(D.shape[2]):
        matrix = D[:, :, k]
        rows.append(KernelSummary(
            kernel=k, usage=float(usage[k]),
            sharpness=sharpness(matrix, hide_unknown, min_column_share),
            columns=top_words_per_column(matrix.astype(np.float64), vocabulary, top_words,
                                         hide_unknown, min_column_share),
            phrases=best_phrases(matrix, vocabulary, top_phrases, beam, hide_unknown,
                                 min_column_share),
            column_mass=[float(x) for x in column_mass(matrix)],
            corpus_phrases=found[k] if found is not None else [],
            npmi=None if npmi is None else float(npmi[k]),
            column_share=None if shares is None else [float(x) for x in shares[k]],
            width=None if widths is None else float(widths[k])))
    return rows


def recorded_phrases(model, assignments: KernelAssignments | None = None, top_n: int = 5
                     ) -> list[list[Phrase]] | None:
    """Per kernel its corpus phrases with counts: the model's ``kernel_windows_`` record, or,
    for a model without it, the windows of ``assignments`` ranked the same way; None when
    neither is there."""
    from .kernel_windows import kernel_windows, window_tokens
    windows = model.recorded("kernel_windows_")
    if windows is not None:
        counts, shares = model.kernel_window_counts_, model.kernel_window_shares_
    elif assignments is not None:
        found = kernel_windows(assignments.grams, assignments.counts, top=top_n)
        windows, counts, shares = found.windows, found.counts, found.shares
    else:
        return None
    vocabulary = model.vocabulary_
    return [[Phrase(tuple(window_tokens(w, vocabulary)), float(share), int(count))
             for i, (w, count, share) in enumerate(zip(windows[k], counts[k], shares[k]))
             if count > 0 and (i == 0 or share >= SHOWN_SHARE)][:top_n]
            for k in range(len(windows))]


#: Past its name, a window a kernel holds less of than this is not shown ("to _ _ (555x, 0%)"
#: under "of _ _" says nothing about the kernel)
SHOWN_SHARE = 0.01


def sort_kernels(rows: list[KernelSummary], by: str = "usage") -> list[KernelSummary]:
    """Rows sorted by ``usage``, ``sharpness``, ``width`` or ``npmi`` (largest first; missing
    values last), or by ``kernel`` index."""
    if by not in SORT_KEYS:
        raise CPGBNInputError(f"sort key must be one of {', '.join(SORT_KEYS)}, got {by!r}")
    if by == "kernel":
        return sorted(rows, key=lambda r: r.kernel)

    def key(row):
        value = getattr(row, by)
        return (value is None or not np.isfinite(value), -(value or 0.0), row.kernel)
    return sorted(rows, key=key)


#: The views fold away kernels below this share of the corpus's theta^(1) (``cpgbn topics``
#: unless asked for them; issue 48: they explain almost nothing, and listed they read as topics)
FOLD_BELOW = 0.001


def shown_kernels(rows: list[KernelSummary], top: int | None = None) -> list[KernelSummary]:
    """The ``top`` most used of ``rows`` that are not folded away (``FOLD_BELOW``), most used
    first: the kernels ``cpgbn topics --kernels top`` shows."""
    return [r for r in sort_kernels(rows, "usage") if r.usage >= FOLD_BELOW][:top]


def format_kernel_table(rows: list[KernelSummary], top_words: int | None = None,
                        width: int = 16, columns: bool | None = None) -> str:
    """Terminal rendering: per kernel a header line with its name (:attr:`KernelSummary.name`)
    and the windows it explains in the corpus with how often each occurs.  ``columns``: the
    paper's Table 3 view too (the top words of each column, one row per rank, each column's
    share of the tokens the kernel explains, and the best phrases); None shows it only for a
    kernel without corpus phrases."""
    lines = []
    for row in rows:
        header = f"kernel {row.kernel}"
        if row.corpus_phrases:
            header += f'  "{row.name}"'
        header += f"  usage {100 * row.usage:.2f}%  sharpness {row.sharpness:.2f}"
        if row.width is not None:
            header += f"  width {row.width:.1f}"
        if row.npmi is not None and np.isfinite(row.npmi):
            header += f"  NPMI {row.npmi:+.3f}"
        lines.append(header)
        if row.corpus_phrases:
            lines.append("   in corpus: " + " | ".join(
                f"{p.text} ({_times(p)})" for p in row.corpus_phrases))
        if not (columns or (columns is None and not row.corpus_phrases)):
            continue
        if row.column_share is not None:
            cells = [f"[{100 * x:.0f}% of tokens]" for x in row.column_share]
            lines.append("   " + "  ".join(f"{c:<{width}}" for c in cells).rstrip())
        depth = max((len(c) for c in row.columns), default=0)
        if top_words is not None:
            depth = min(depth, top_words)
        for rank in range(depth):
            cells = [col[rank][0] if rank < len(col) else (HIDDEN if rank == 0 else "")
                     for col in row.columns]
            lines.append("   " + "  ".join(f"{c:<{width}}" for c in cells).rstrip())
        if row.phrases:
            lines.append("   best phrase: " + " | ".join(p.text for p in row.phrases))
    return "\n".join(lines)


def _times(phrase: Phrase) -> str:
    """How a corpus phrase's evidence reads: its count when known, else its share."""
    if phrase.count is not None:
        return f"{phrase.count}x, {100 * phrase.weight:.0f}%"
    return f"{100 * phrase.weight:.0f}%"
