"""Pictures of a fitted model: PNG plots (matplotlib, Agg) and topic trees as SVG.

Every plot function returns PNG bytes; :func:`save_png` writes them.  matplotlib is imported
only here and only when a plot is drawn (importing cpgbn stays fast); no pyplot state is
touched, so plotting is safe in scripts, servers and tests.

:func:`tree_svg` draws a :class:`~cpgbn.explain.TopicNode` tree without any dependency: root
on the left, one column per layer, each node a box labelled by its layer, topic and top
phrases; an edge's width grows with the child's weight under its parent.
"""

from __future__ import annotations

import io
import warnings
from html import escape
from pathlib import Path

import numpy as np

from ..errors import CPGBNInputError
from .hierarchy import format_columns

_BLUE = "#3367a6"


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def save_png(png: bytes, path) -> Path:
    """Write PNG bytes to ``path`` (parents created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png)
    return path


def loglik_png(loglik_trace, n_tokens: int | None = None, burn_in: int | None = None) -> bytes:
    """Training log-likelihood after each sweep (per token when ``n_tokens`` is given), with the
    burn-in shaded."""
    trace = np.asarray(loglik_trace, dtype=np.float64)
    if trace.ndim != 1 or len(trace) == 0:
        raise CPGBNInputError("the log-likelihood trace is empty")
    y = trace / n_tokens if n_tokens else trace
    fig = _figure(6.4, 3.2)
    ax = fig.add_subplot()
    sweeps = np.arange(1, len(y) + 1)
    ax.plot(sweeps, y, color=_BLUE, lw=1.5)
    if burn_in:
        ax.axvspan(0.5, min(burn_in, len(y)) + 0.5, color="0.9", zorder=0, label="burn-in")
        ax.legend(loc="lower right", frameon=False)
    ax.set_xlabel("sweep")
    ax.set_ylabel("log-likelihood per token" if n_tokens else "log-likelihood")
    ax.set_title("Training log-likelihood")
    ax.grid(alpha=0.3)
    return _png(fig)


def median_window(n: int) -> int:
    """The running median's window for a series of ``n`` points: the largest odd number not
    above sqrt(n) + 1 (1 up to 3 points, 11 for 100, 31 for 1,000, 101 for 10,000).  It grows
    with the series, so a long one is smoothed more, yet stays short enough to follow a
    trend that changes over a few dozen windows; a median ignores isolated spikes as long as
    they fill less than half of it."""
    return 2 * int(np.sqrt(max(int(n), 1)) / 2) + 1


def running_median(values, window: int, at=None, block: int = 4096) -> np.ndarray:
    """The median of ``values`` over a centred window of ``window`` points (made odd), at the
    indices ``at`` (default: every index).  Near the ends the window holds only the points
    that exist; non-finite values are left out, and a window with none gives NaN.  Computed
    ``block`` windows at a time, so a long series needs no n x window array."""
    y = np.asarray(values, dtype=np.float64)
    half = max(int(window), 1) // 2
    padded = np.full(len(y) + 2 * half, np.nan)
    padded[half:half + len(y)] = np.where(np.isfinite(y), y, np.nan)
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1)
    at = np.arange(len(y)) if at is None else np.asarray(at, dtype=np.int64)
    out = np.full(len(at), np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN window is NaN, as documented
        for lo in range(0, len(at), block):
            out[lo:lo + block] = np.nanmedian(windows[at[lo:lo + block]], axis=1)
    return out


LOG_DECADES = 2.0
""":func:`loss_png` draws a log-scale y axis when every finite value is positive and the
largest is more than 10**LOG_DECADES times the smallest."""


def loss_scale(loss) -> str:
    """"log" or "linear": the y axis :func:`loss_png` draws for ``loss`` (``LOG_DECADES``)."""
    y = np.asarray(loss, dtype=np.float64)
    finite = y[np.isfinite(y)]
    wide = (len(finite) and finite.min() > 0
            and np.log10(finite.max() / finite.min()) > LOG_DECADES)
    return "log" if wide else "linear"


def loss_png(loss, name: str = "loss") -> bytes:
    """A minibatch mode's training loss after each step; ``name`` says what it is.

    A handful of spikes can be hundreds of times the typical loss, and a plain line of the raw
    values then shows only the spikes.  So the main line is the running median over
    :func:`median_window` steps, the raw values faint behind it, on the y axis
    :func:`loss_scale` chooses (log for a range of more than ``LOG_DECADES`` decades)."""
    y = np.asarray(loss, dtype=np.float64)
    if y.ndim != 1 or len(y) == 0:
        raise CPGBNInputError("the loss trace is empty")
    window = median_window(len(y))
    steps = np.arange(1, len(y) + 1)
    fig = _figure(6.4, 3.2)
    ax = fig.add_subplot()
    ax.plot(steps, y, color=_BLUE, lw=0.8, alpha=0.3, label="each step")
    ax.plot(steps, running_median(y, window), color=_BLUE, lw=2.0,
            label=f"running median of {window}")
    ax.set_yscale(loss_scale(y))
    ax.set_xlabel("step")
    ax.set_ylabel("loss" + (" (log scale)" if loss_scale(y) == "log" else ""))
    ax.set_title("Training loss")
    ax.legend(loc="upper right", frameon=False, fontsize=8)
    ax.grid(alpha=0.3)
    return _png(fig)


def usage_png(usage, top: int = 30, labels=None) -> bytes:
    """Bar chart of the ``top`` most used kernels (share of theta^(1), in %), most used first.
    ``labels[k]`` (e.g. a kernel's best phrase) is added to its tick, cut to 40 characters
    (long labels would leave no room for the bars)."""
    usage = np.asarray(usage, dtype=np.float64)
    order = np.argsort(-usage, kind="stable")[:top]
    ticks = [f"{k}" if labels is None else _clip(f"{k}: {labels[k]}", 40) for k in order]
    fig = _figure(6.4, 0.9 + 0.22 * len(order))
    ax = fig.add_subplot()
    ax.barh(np.arange(len(order)), 100 * usage[order], color=_BLUE)
    ax.set_yticks(np.arange(len(order)), ticks, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("share of theta^(1) (%)")
    ax.set_title(f"Kernel usage (top {len(order)} of {len(usage)})")
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def class_usage(doc_kernel, labels) -> tuple[list[str], np.ndarray]:
    """(class names, share matrix): row c is the kernel usage within class c (sums to 1)."""
    doc_kernel = np.asarray(doc_kernel, dtype=np.float64)
    labels = np.asarray(labels, dtype=object)
    if len(labels) != len(doc_kernel):
        raise CPGBNInputError(f"{len(labels)} labels for {len(doc_kernel)} documents")
    names = sorted({str(x) for x in labels})
    shares = np.zeros((len(names), doc_kernel.shape[1]))
    text = np.array([str(x) for x in labels], dtype=object)
    for c, name in enumerate(names):
        row = doc_kernel[text == name].sum(axis=0)
        shares[c] = row / max(row.sum(), 1e-300)
    return names, shares


def class_usage_png(doc_kernel, labels, top: int = 30) -> bytes:
    """Heatmap of kernel usage per class: the ``top`` kernels whose share varies most across
    classes (largest max/min ratio of their within-class shares, among kernels with at least
    1/(2 K) of the overall usage), colour = share within the class (%)."""
    names, shares = class_usage(doc_kernel, labels)
    overall = np.asarray(doc_kernel, dtype=np.float64).sum(axis=0)
    overall = overall / max(overall.sum(), 1e-300)
    K = shares.shape[1]
    spread = shares.max(axis=0) / np.maximum(shares.min(axis=0), 1e-12)
    spread[overall < 0.5 / K] = 0.0
    order = np.argsort(-spread, kind="stable")[:top]
    order = np.sort(order)
    fig = _figure(min(1.5 + 0.3 * len(order), 14), 1.2 + 0.35 * len(names))
    ax = fig.add_subplot()
    image = ax.imshow(100 * shares[:, order], aspect="auto", cmap="Blues")
    ax.set_xticks(np.arange(len(order)), [str(k) for k in order], fontsize=7, rotation=90)
    ax.set_yticks(np.arange(len(names)), names, fontsize=8)
    ax.set_xlabel("kernel")
    ax.set_title("Kernel usage per class (%)")
    fig.colorbar(image, ax=ax, fraction=0.03)
    return _png(fig)


# ---------------------------------------------------------------------- trees as SVG
_BOX_W, _COL_GAP, _LINE_H, _PAD, _ROW_GAP = 220, 60, 15, 6, 10


def _node_lines(node, phrases: int) -> list[str]:
    from .phrases import phrases_from_columns
    found = [p.text for p in phrases_from_columns(node.columns, phrases)]
    return found or ["(no words)"]


def _clip(text: str, width: int = 32) -> str:
    return text if len(text) <= width else text[:width - 1] + "\u2026"


def tree_svg(node, *, phrases: int = 2, standalone: bool = False, css_class: str = "topic-tree-svg",
             link_kernels: bool = False) -> str:
    """The tree below ``node`` as SVG: one column per layer (root left), each node a box with
    ``layer.topic`` and its top ``phrases`` phrases, the full columns in a tooltip.

    ``standalone=True`` adds the XML namespace needed by an ``.svg`` file; without it the
    markup is meant to be inlined in HTML (which needs no namespace).  ``link_kernels`` makes
    each layer-1 box a link to ``#kernel-K`` (the report's phrase table rows).  All text is
    escaped.
    """
    body, width, height = _tree_body(node, phrases, link_kernels)
    ns = ' xmlns="http://www.w3.org/2000/svg"' if standalone else ""
    title = f"topic tree of layer {node.layer} topic {node.topic}"
    return (f'<svg{ns} class="{escape(css_class)}" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" font-family="sans-serif" font-size="12">\n'
            f"<title>{escape(title)}</title>\n{body}\n</svg>")


def _tree_body(node, phrases: int, link_kernels: bool) -> tuple[str, int, int]:
    """The SVG elements of a tree drawn from (0, 0), and the drawing's width and height."""
    placed = []  # (node, depth, y_top, height)
    lines = {}  # id(node) -> its phrase lines

    def box_height(n) -> int:
        lines[id(n)] = _node_lines(n, phrases)
        return 2 * _PAD + _LINE_H * (1 + len(lines[id(n)]))

    def place(n, depth: int, y: float) -> tuple[float, float]:
        """Lay out the subtree at vertical offset y; returns (its height, the node's centre)."""
        h = box_height(n)
        if not n.children:
            placed.append((n, depth, y, h))
            return h, y + h / 2
        cursor, centres = y, []
        for child in n.children:
            used, centre = place(child, depth + 1, cursor)
            centres.append(centre)
            cursor += used + _ROW_GAP
        span = cursor - _ROW_GAP - y
        centre = (centres[0] + centres[-1]) / 2
        top = max(y, centre - h / 2)
        placed.append((n, depth, top, h))
        return max(span, top - y + h), top + h / 2

    total, _ = place(node, 0, _ROW_GAP)
    depth = max(d for _, d, _, _ in placed) + 1
    width = depth * _BOX_W + (depth - 1) * _COL_GAP + 2 * _ROW_GAP
    height = int(total + 2 * _ROW_GAP)
    where = {id(n): (d, y, h) for n, d, y, h in placed}
    parts = []

    def x_of(d: int) -> int:
        return _ROW_GAP + d * (_BOX_W + _COL_GAP)

    for n, d, y, h in placed:  # edges first, under the boxes
        for child in n.children:
            cd, cy, ch = where[id(child)]
            x0, y0 = x_of(d) + _BOX_W, y + h / 2
            x1, y1 = x_of(cd), cy + ch / 2
            mid = (x0 + x1) / 2
            stroke = 1 + 6 * max(0.0, min(1.0, float(child.weight)))
            parts.append(f'<path class="tree-edge" d="M{x0:.1f},{y0:.1f} C{mid:.1f},{y0:.1f} '
                         f'{mid:.1f},{y1:.1f} {x1:.1f},{y1:.1f}" fill="none" stroke="#9db3cf" '
                         f'stroke-width="{stroke:.1f}"><title>weight {child.weight:.3f}</title></path>')
    for n, d, y, h in placed:
        x = x_of(d)
        columns = format_columns(n.columns)
        label = f"layer {n.layer} topic {n.topic} (weight {n.weight:.2f})"
        link = link_kernels and n.layer == 1
        if link:
            parts.append(f'<a href="#kernel-{n.topic}">')
        parts.append(f'<g class="tree-node" data-layer="{n.layer}" data-topic="{n.topic}">'
                     f"<title>{escape(label)}: {escape(columns)}</title>")
        fill = "#e8eef7" if n.layer > 1 else "#f7f7f2"
        parts.append(f'<rect x="{x}" y="{y:.1f}" width="{_BOX_W}" height="{h}" rx="5" '
                     f'fill="{fill}" stroke="#5b7db1"/>')
        ty = y + _PAD + _LINE_H - 3
        parts.append(f'<text x="{x + _PAD}" y="{ty:.1f}" font-weight="bold" fill="#223">'
                     f"L{n.layer} · {'kernel' if n.layer == 1 else 'topic'} {n.topic}"
                     f'<tspan fill="#667" font-weight="normal"> {n.weight:.2f}</tspan></text>')
        for line in lines[id(n)]:
            ty += _LINE_H
            parts.append(f'<text x="{x + _PAD}" y="{ty:.1f}" fill="#111">{escape(_clip(line))}</text>')
        parts.append("</g></a>" if link else "</g>")
    return "\n".join(parts), width, height


def save_tree_svg(nodes, path, *, phrases: int = 2) -> Path:
    """Write the tree of a node, or the trees of several nodes stacked top to bottom, as one
    standalone ``.svg`` file (drawn as by :func:`tree_svg`)."""
    nodes = [nodes] if not isinstance(nodes, (list, tuple)) else list(nodes)
    if not nodes:
        raise CPGBNInputError("no tree to draw")
    parts, y, width = [], 0, 0
    for node in nodes:
        body, w, h = _tree_body(node, phrases, link_kernels=False)
        parts.append(f'<g class="topic-tree" transform="translate(0,{y})">{body}</g>')
        y, width = y + h, max(width, w)
    text = (f'<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" '
            f'width="{width}" height="{y}" viewBox="0 0 {width} {y}" font-family="sans-serif" '
            f'font-size="12">\n' + "\n".join(parts) + "\n</svg>\n")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
