"""Phrase-level topics at every layer, and topic trees (the paper's Table 3 and appendix figures).

A topic k of layer t is a distribution over layer-1 kernels, u = Phi^(2) Phi^(3) ... Phi^(t) e_k
(each Phi column is on the simplex, so u is too).  Its phrase view is the mixture of kernels
sum_k1 u_k1 D_k1, a V x F matrix whose columns are what the topic puts at each of the F
positions of a phrase.  At layer 1 the topic is the kernel itself.

Near-empty columns.  D_k is one Dirichlet draw over all V x F entries, so a column's total
mass, sum_v D_k[v, f], is the share of the kernel's counts written at column f (plus the prior's
eta V).  Many kernels put nearly all their counts on one or two columns; their other columns are
then the prior plus a handful of rare words, and listing those words makes a phrase such as
"rick 's capital" out of a kernel that writes "'s".  Every display hides a column whose share
is below ``min_column_share`` (``MIN_COLUMN_SHARE`` by default) and prints ``HIDDEN`` in its place.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import CPGBNInputError
from ..inference.state import GlobalParameters
from ..text.vocabulary import OOV_ID, Vocabulary

MIN_COLUMN_SHARE = 0.1
"""Displays hide a phrase column that carries less than this share of the topic's mass."""
HIDDEN = "_"
"""What a display prints for a hidden (near-empty) column."""


def check_layer(layers: tuple[int, ...], layer: int) -> int:
    if not 1 <= layer <= len(layers):
        raise CPGBNInputError(f"layer must be between 1 and {len(layers)}, got {layer}")
    return layer


def kernel_weights(g: GlobalParameters, layer: int, topic: int) -> np.ndarray:
    """u: the layer-1 kernel weights of a topic (K_1,), summing to 1."""
    layers = g.layers
    check_layer(layers, layer)
    if not 0 <= topic < layers[layer - 1]:
        raise CPGBNInputError(f"topic must be between 0 and {layers[layer - 1] - 1} at layer {layer}, "
                              f"got {topic}")
    u = np.zeros(layers[layer - 1])
    u[topic] = 1.0
    for t in range(layer, 1, -1):
        u = g.phi[t - 2] @ u
    return u


def phrase_matrix(g: GlobalParameters, layer: int, topic: int) -> np.ndarray:
    """The topic's V x F phrase distribution, sum_k u_k D_k (sums to 1)."""
    u = kernel_weights(g, layer, topic)
    return np.tensordot(g.D.astype(np.float64), u, axes=([2], [0]))


def column_mass(matrix: np.ndarray) -> np.ndarray:
    """(F,): each column's share of a V x F matrix's total mass (sums to 1; zeros if empty)."""
    totals = np.asarray(matrix, dtype=np.float64).sum(axis=0)
    grand = totals.sum()
    return totals / grand if grand > 0 else np.zeros_like(totals)


def check_min_column_share(value) -> float:
    value = float(value)
    if not 0.0 <= value < 1.0:
        raise CPGBNInputError(f"min_column_share must be in [0, 1), got {value}")
    return value


def shown_columns(matrix: np.ndarray, min_column_share: float) -> np.ndarray:
    """Indices of the columns of a V x F matrix with at least ``min_column_share`` of its mass
    (never an empty column)."""
    shares = column_mass(matrix)
    return np.flatnonzero((shares >= check_min_column_share(min_column_share)) & (shares > 0))


def top_words_per_column(matrix: np.ndarray, vocabulary: Vocabulary, top_n: int,
                         hide_unknown: bool = True, min_column_share: float = 0.0
                         ) -> list[list[tuple[str, float]]]:
    """For each column f of a V x F matrix: the top_n (word, probability within the column).

    A column with less than ``min_column_share`` of the matrix's mass is returned empty (a
    near-empty column, see the module's docstring)."""
    shown = set(shown_columns(matrix, min_column_share).tolist())
    columns = []
    for f in range(matrix.shape[1]):
        if f not in shown:
            columns.append([])
            continue
        col = matrix[:, f] / matrix[:, f].sum()
        order = np.argsort(-col, kind="stable")
        if hide_unknown:
            order = order[order != OOV_ID]
        order = order[:top_n]
        columns.append(list(zip(vocabulary.decode(order), (float(col[i]) for i in order))))
    return columns


@dataclass
class TopicNode:
    """A node of a topic tree: (layer, topic), its top phrase words, its weight under its parent."""

    layer: int
    topic: int
    weight: float
    columns: list[list[tuple[str, float]]]
    children: list["TopicNode"] = field(default_factory=list)

    def phrase(self) -> str:
        return " ".join(col[0][0] if col else HIDDEN for col in self.columns)

    def to_dict(self) -> dict:
        return {"layer": self.layer, "topic": self.topic, "weight": self.weight,
                "columns": [[[w, p] for w, p in col] for col in self.columns],
                "children": [c.to_dict() for c in self.children]}


def topic_tree(g: GlobalParameters, vocabulary: Vocabulary, layer: int, topic: int,
               children: int = 3, top_n: int = 3, hide_unknown: bool = True,
               min_column_share: float = MIN_COLUMN_SHARE) -> TopicNode:
    """The tree below a topic: at each level the ``children`` heaviest topics of the layer below
    (by the Phi column of the parent), down to layer 1, each labelled by its phrase columns
    (near-empty columns hidden, see the module's docstring)."""
    if children < 1:
        raise CPGBNInputError(f"children must be >= 1, got {children}")

    def build(t: int, k: int, weight: float) -> TopicNode:
        node = TopicNode(t, k, weight,
                         top_words_per_column(phrase_matrix(g, t, k), vocabulary, top_n, hide_unknown,
                                              min_column_share))
        if t > 1:
            column = g.phi[t - 2][:, k]
            for child in np.argsort(-column, kind="stable")[:children]:
                node.children.append(build(t - 1, int(child), float(column[child])))
        return node

    kernel_weights(g, layer, topic)  # validates
    return build(layer, topic, 1.0)


def format_columns(columns: list[list[tuple[str, float]]], sep: str = "  |  ") -> str:
    """Columns as text: each column's words joined by " / ", ``HIDDEN`` for a hidden column."""
    return sep.join(" / ".join(w for w, _ in col) if col else HIDDEN for col in columns)


def format_tree(node: TopicNode, indent: str = "") -> str:
    """Plain-text rendering of a topic tree, one node per line."""
    columns = format_columns(node.columns)
    lines = [f"{indent}layer {node.layer} topic {node.topic} ({node.weight:.2f}): {node.phrase()}"
             f"    [{columns}]"]
    for child in node.children:
        lines.append(format_tree(child, indent + "    "))
    return "\n".join(lines)
