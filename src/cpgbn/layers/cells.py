"""The observed data of the convolutional layer, as sparse cells of the documents' V x L matrices.

Document j is the binary (or count) matrix X_j in {0,1}^{V x L_j} of the paper.  Only its
non-zero cells carry information, so the sampler sees a flat list of cells, each with a
vocabulary id ``word`` (v), a column ``col`` (l, the word position) and, in count mode, an
observed count.  Text has exactly one cell per column; the representation also covers

* bag-of-words data (one column per document, many cells: PFA / PGBN as F = 1), and
* arbitrary count matrices generated from the model (the Geweke test).

Documents shorter than the filter width F are padded: their length is raised to F and the
padded columns have no cell, i.e. they are observed all-zero columns.  Every document then
has S_j = L_j - F + 1 >= 1 positions, every placement of a kernel stays inside it (which keeps
sum_{v,l} (D_k * w_jk) = sum_s w_jks, the "1" in the gamma rate), and an empty document keeps
its row in the feature matrix with features drawn from the prior.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import CPGBNInputError

#: Largest latent count a sampler stores: m and A are int32 (the numba kernels' arrays and a
#: GibbsState's), and a document's units bound both (m_jks <= A_jk <= the document's units).
COUNT_LIMIT = int(np.iinfo(np.int32).max)


def counts_dtype(largest: int):
    """int32 while counts up to ``largest`` fit in it (:data:`COUNT_LIMIT`), else int64: the
    kernel counts' dtype, which a word's units summed over a corpus may widen."""
    return np.int64 if largest > COUNT_LIMIT else np.int32

#: Observation models for a cell (see :class:`ConvData`); the numba kernels compare with these.
BERNOULLI_POISSON = 0
FIXED_COUNT = 1
OBSERVED_COUNT = 2


@dataclass(frozen=True)
class ObservationModel:
    """How a cell of the data is observed: the one resolved form of ``token_count``.

    mode : ``BERNOULLI_POISSON`` (x = 1(m > 0), the paper's link), ``FIXED_COUNT`` (every token
        carries ``scale`` pseudo-counts: the authors' tempered likelihood) or ``OBSERVED_COUNT``
        (cells carry observed Poisson counts, multiplied by ``scale``: bag-of-words data).
    scale : the pseudo-count, or the multiplier of observed counts (1: the plain model).
    """

    mode: int
    scale: int = 1

    @classmethod
    def of(cls, token_count) -> "ObservationModel":
        """The observation model of text for a ``token_count`` parameter
        ("bernoulli-poisson" or a positive integer); CPGBNInputError otherwise."""
        if isinstance(token_count, ObservationModel):
            return token_count
        if isinstance(token_count, str):
            if token_count == "bernoulli-poisson":
                return cls(BERNOULLI_POISSON, 1)
            raise CPGBNInputError(
                f"token_count must be 'bernoulli-poisson' or a positive integer, got {token_count!r}")
        if isinstance(token_count, (bool, np.bool_)) or not isinstance(token_count,
                                                                        (int, np.integer)):
            raise CPGBNInputError(
                f"token_count must be 'bernoulli-poisson' or a positive integer, got {token_count!r}")
        if token_count < 1:
            raise CPGBNInputError(f"token_count must be >= 1, got {token_count}")
        return cls(FIXED_COUNT, int(token_count))

    @classmethod
    def counts(cls, scale=1) -> "ObservationModel":
        """Observed counts multiplied by ``scale`` (bag-of-words data, ``PGBN(token_count=...)``)."""
        return cls(OBSERVED_COUNT, cls.of(scale).scale)

    def check_document(self, n_tokens: int, units: int | None = None) -> None:
        """CPGBNInputError when a document of ``n_tokens`` tokens carries more ``units`` than
        a count holds (:data:`COUNT_LIMIT`; by default ``scale`` a token; under the link a
        token's count is drawn, mostly 1, and nothing is checked)."""
        units = n_tokens * self.scale if units is None else units
        if self.mode == BERNOULLI_POISSON or units <= COUNT_LIMIT:
            return
        raise CPGBNInputError(
            f"a document of {n_tokens:,} tokens carries {units:,} latent counts "
            f"({self.describe()}), more than the {COUNT_LIMIT:,} a count can hold (int32); "
            "split it into shorter documents or lower token_count")

    def describe(self) -> str:
        """The observation model in words (with c pseudo-counts a token adds c ln lambda - ln c!
        to the log-likelihood)."""
        if self.mode == BERNOULLI_POISSON:
            return "Bernoulli-Poisson link, the paper's"
        if self.mode == FIXED_COUNT:
            return f"{self.scale} pseudo-counts per token"
        return "word counts" + (f" times {self.scale}" if self.scale != 1 else "")


@dataclass(frozen=True)
class ConvData:
    """Sparse cells of all documents, in the layout the numba kernels read.

    Attributes
    ----------
    cell_word : int32 (n_cells,)
        Vocabulary id v of each non-zero cell.
    cell_col : int32 (n_cells,)
        Column l (0-based word position) of each cell inside its document.
    cell_count : int32 (n_cells,)
        Observed count of each cell in ``OBSERVED_COUNT`` mode; empty otherwise.
    doc_cells : int64 (n_docs + 1,)
        Cells of document j are ``doc_cells[j]:doc_cells[j + 1]``.
    doc_length : int64 (n_docs,)
        L_j after padding to at least F.
    doc_positions : int64 (n_docs + 1,)
        Offsets of each document's S_j = L_j - F + 1 positions in the ragged w and m arrays.
    filter_width : int
        F.
    mode : int
        ``BERNOULLI_POISSON`` (x = 1(m > 0), latent m zero-truncated Poisson: the paper's link),
        ``FIXED_COUNT`` (every cell carries ``fixed_count`` pseudo-counts: the authors' code), or
        ``OBSERVED_COUNT`` (cells carry observed Poisson counts: bag-of-words, simulations).
    fixed_count : int
        The pseudo-count in ``FIXED_COUNT`` mode.
    true_length : int64 (n_docs,)
        L_j before padding (the number of tokens for text), used to normalise features.
    padding : int
        Empty columns added before and after every text document (``CPGBN(padding=...)``).
    """

    cell_word: np.ndarray
    cell_col: np.ndarray
    cell_count: np.ndarray
    doc_cells: np.ndarray
    doc_length: np.ndarray
    doc_positions: np.ndarray
    filter_width: int
    mode: int
    fixed_count: int
    true_length: np.ndarray
    padding: int = 0

    @property
    def observation(self) -> ObservationModel:
        return ObservationModel(self.mode, self.fixed_count)

    @property
    def n_docs(self) -> int:
        return len(self.doc_length)

    @property
    def n_positions(self) -> int:
        return int(self.doc_positions[-1])

    @property
    def n_cells(self) -> int:
        return len(self.cell_word)

    def n_padded(self) -> int:
        """Number of documents raised to F columns: shorter than F even with the edge padding."""
        return int(np.count_nonzero(self.true_length + 2 * self.padding < self.filter_width))

    def largest_word_units(self) -> int:
        """The most units one vocabulary row receives over all documents: the bound of a
        kernel count n_vfk, which may pass 2^31 under the tempered likelihood (a frequent word
        in a large corpus times ``token_count``)."""
        if self.n_cells == 0:
            return 0
        if self.mode == OBSERVED_COUNT:   # float64 sums: exact below 2^53
            return int(np.bincount(self.cell_word, weights=self.cell_count).max())
        scale = self.fixed_count if self.mode == FIXED_COUNT else 1
        return int(np.bincount(self.cell_word).max()) * scale


def check_document_units(data: ConvData) -> ConvData:
    """``data``, or CPGBNInputError when a document's units pass :data:`COUNT_LIMIT` (its
    latent counts m and A could not be stored).  Under the Bernoulli-Poisson link a cell's
    count is drawn, mostly 1: a document would need about 2^31 tokens."""
    if data.mode == BERNOULLI_POISSON or data.n_cells == 0:
        return data
    if data.mode == FIXED_COUNT:   # one cell per token
        data.observation.check_document(int(np.diff(data.doc_cells).max()))
        return data
    running = np.zeros(data.n_cells + 1, dtype=np.int64)
    np.cumsum(data.cell_count, out=running[1:])
    units = running[data.doc_cells[1:]] - running[data.doc_cells[:-1]]
    j = int(np.argmax(units))
    data.observation.check_document(int(data.true_length[j]), int(units[j]))
    return data


def _positions(doc_length: np.ndarray, filter_width: int) -> np.ndarray:
    positions = np.zeros(len(doc_length) + 1, dtype=np.int64)
    np.cumsum(doc_length - filter_width + 1, out=positions[1:])
    return positions


def from_token_sequences(tokens: np.ndarray, offsets: np.ndarray, filter_width: int,
                         token_count="bernoulli-poisson", padding: int = 0) -> ConvData:
    """Cells of text documents: one cell per token, column = position in the document.

    ``token_count``: an :class:`ObservationModel` or a value for :meth:`ObservationModel.of`.

    ``padding`` empty columns are added before and after every document, so a kernel may
    overhang either edge by up to ``padding`` columns (0: the paper's S_j = L_j - F + 1
    positions; F - 1: every placement that covers at least one token).  The padded columns are
    observed all-zero columns, like the padding of short documents.
    """
    tokens = np.ascontiguousarray(tokens, dtype=np.int32)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    observation = ObservationModel.of(token_count)
    mode, fixed = observation.mode, observation.scale
    doc_of_token = np.repeat(np.arange(len(lengths)), lengths)
    cols = (np.arange(len(tokens), dtype=np.int64) - offsets[doc_of_token] + padding).astype(np.int32)
    padded = np.maximum(lengths + 2 * padding, filter_width)
    return check_document_units(ConvData(
        cell_word=tokens,
        cell_col=cols,
        cell_count=np.zeros(0, dtype=np.int32),
        doc_cells=offsets,
        doc_length=padded,
        doc_positions=_positions(padded, filter_width),
        filter_width=int(filter_width),
        mode=mode,
        fixed_count=fixed,
        true_length=lengths.astype(np.int64),
        padding=int(padding),
    ))


def from_cells(doc_cells, cell_word, cell_col, doc_length, filter_width,
               cell_count=None, true_length=None) -> ConvData:
    """Cells of arbitrary matrices: observed counts if ``cell_count`` is given, else binary cells.

    Used for bag-of-words data (``doc_length`` = 1, F = 1) and for data simulated from the model.
    ``true_length`` (default ``doc_length``) is what features are normalised by.
    """
    doc_length = np.ascontiguousarray(doc_length, dtype=np.int64)
    padded = np.maximum(doc_length, filter_width)
    if cell_count is None:
        mode, counts = BERNOULLI_POISSON, np.zeros(0, dtype=np.int32)
    else:
        wide = np.asarray(cell_count)
        if wide.size and int(wide.max()) > COUNT_LIMIT:
            raise CPGBNInputError(f"a cell count of {int(wide.max()):,} is more than the "
                                  f"{COUNT_LIMIT:,} a count can hold (int32)")
        mode, counts = OBSERVED_COUNT, np.ascontiguousarray(cell_count, dtype=np.int32)
    return check_document_units(ConvData(
        cell_word=np.ascontiguousarray(cell_word, dtype=np.int32),
        cell_col=np.ascontiguousarray(cell_col, dtype=np.int32),
        cell_count=counts,
        doc_cells=np.ascontiguousarray(doc_cells, dtype=np.int64),
        doc_length=padded,
        doc_positions=_positions(padded, filter_width),
        filter_width=int(filter_width),
        mode=mode,
        fixed_count=1,
        true_length=(doc_length if true_length is None
                     else np.ascontiguousarray(true_length, dtype=np.int64)),
    ))


def from_bag_of_words(tokens: np.ndarray, offsets: np.ndarray, scale: int = 1) -> ConvData:
    """Cells of bag-of-words documents: one column per document, one cell per distinct word
    with its count times ``scale`` (observed Poisson counts).  With F = 1 the convolutional layer is then
    exactly PFA, and the whole stack the PGBN of Zhou, Cong & Chen (2016)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    n_docs = len(offsets) - 1
    doc_of_token = np.repeat(np.arange(n_docs), np.diff(offsets))
    n_words = int(tokens.max()) + 1 if len(tokens) else 1
    keys, counts = np.unique(doc_of_token * n_words + tokens, return_counts=True)
    docs, words = np.divmod(keys, n_words)
    doc_cells = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(np.bincount(docs, minlength=n_docs), out=doc_cells[1:])
    # features are normalised by the number of tokens, not by the single column
    return from_cells(doc_cells, words.astype(np.int32), np.zeros(len(words), dtype=np.int32),
                      np.ones(n_docs, dtype=np.int64), 1,
                      cell_count=counts.astype(np.int64) * int(scale),
                      true_length=np.diff(offsets))
