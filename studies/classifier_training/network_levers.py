"""Two levers of issue 47 on the classifier's network alone: a word embedding under the
first layer, and several filter widths side by side.

The network is ``CPGBNClassifier(generative=False)``'s, the library's `discriminative` cell of
:mod:`studies.classifier_training.grid`: a one-hot convolution of width F = 3 with K = 200
maps over the word ids (a V x F x K table, N(0, 1/F), bias 0; a document shorter than F
padded with empty columns to F, so it has one position; no padding at the edges otherwise,
S_j = L_j - F + 1 positions), ReLU, the mean over the positions, log1p, a softmax; the loss
xi = 1000 times the batch's mean cross-entropy (the classifier's loss per unit with its
default xi), the gradient's norm clipped at 10, Adam at 1e-3 (dense, over the whole table),
minibatches of 50 in a fresh order every epoch, at most 30 epochs; the library's own 10%
validation split of the fitted documents (stratified, the same seed stream as
``CPGBNClassifier``'s) scored after every epoch, the best epoch's weights kept (the first of
equal scores), the fit stopped after 3 epochs without a better one.  Vocabulary: the
library's tokenizer and ``Vocabulary.build`` over the fitted texts, 8,000 rows counting
``<unk>`` (id 0), as ``CPGBNClassifier(vocab_size=8000)``; the scored texts encoded with it.

Cells (:data:`CELLS`), each a change of that network:

* ``net-reference``: the network itself, written again here: it must score what the library's
  scores (within a seed's spread, about 1 point) before the levers mean anything.
* ``net-embedding-128``: the first layer factorised through a 128-dimensional word embedding,
  table = E (V x 128) @ W (128 x F K), i.e. a convolution of width 3 over embedded words.
  E is N(0, 1) and W N(0, 1 / (128 F)), so that every entry of E @ W, and the first layer's
  input, has the variance of the reference's table at the start.
* ``net-widths-2-3-4``: three convolutions, of widths 2, 3 and 4, 200 maps each, each pooled
  as the reference's (its own S_j = max(L_j, F) - F + 1 positions) and log-compressed, their
  600 units concatenated into the softmax.
* ``net-widths-2-3-4-embedding-128``: both, the three convolutions over one embedding.

Why a network of its own instead of the library's: the library's first layer has one filter
width and an untied table (:class:`cpgbn.backends.torch.encoder.WeibullConvEncoder`'s
``conv1``), and the generative half reads that layer; measuring whether these levers pay does
not need the library changed.  ``net-reference`` is the check that the copy is faithful, and
studies/classifier_training/test_network_levers.py checks that, given the library encoder's
weights, it computes the library's softmax input.

Splits: :func:`studies.classifier_training.grid.validation_split` (SUBJ and MR: fold 0's
training documents, TREC: its training questions; 80% given to the fit, 20% scored and never
seen by the fit).  ``--seed`` seeds the weights, the minibatch order and the validation split
(torch and numpy; the 80/20 split stays seed 0's).  One thread.  Every cell writes
results/classifier_training/cells/<cell>_<dataset>_seed<seed>.json with the field layout of
the grid's cells (so that ``grid --report`` lists them beside its own) and is skipped when
that file exists; ``--report`` writes results/classifier_training_network_levers.md, these
cells beside the library's `discriminative` and NBSVM-bigram on the same splits.

    python -m studies.classifier_training.network_levers --cells net-reference --datasets subj
    python -m studies.classifier_training.network_levers --datasets subj,mr,trec --seed 0
    python -m studies.classifier_training.network_levers --report
"""
import argparse
import copy
import json
import math
import time

import numpy as np
from threadpoolctl import threadpool_limits

from cpgbn.evaluate.provenance import provenance
from cpgbn.files import write_file_atomically

from studies.classifier_training.grid import CELLS_DIR, gradient_summary, validation_split
from studies.common.paths import RESULTS
from studies.common.reports import command_line, mean_std

TABLE = RESULTS / "classifier_training_network_levers.md"
DATASETS = ("subj", "mr", "trec")
#: The library network's training, as ``CPGBNClassifier(generative=False)`` runs it with its
#: defaults (xi per unit 1000: the cross-entropy's gradient is taken times xi, which the clip
#: at 10 reads; 97% of the library's SUBJ steps are clipped, so it is part of the optimiser)
TRAINING = dict(vocab_size=8000, maps=200, learning_rate=1e-3, batch_size=50, n_epochs=30,
                validation_fraction=0.1, patience=3, xi=1000.0, max_grad_norm=10.0)
#: name -> the network's shape: filter widths, and the embedding's dimension (None: the
#: untied one-hot table)
CELLS = {
    "net-reference": dict(widths=(3,), embedding=None),
    "net-embedding-128": dict(widths=(3,), embedding=128),
    "net-widths-2-3-4": dict(widths=(2, 3, 4), embedding=None),
    "net-widths-2-3-4-embedding-128": dict(widths=(2, 3, 4), embedding=128),
}
#: The grid's cells this study is read beside: the library's network and the n-gram baseline
LIBRARY, BASELINE = "discriminative", "nbsvm-bigram"


def cell_path(name: str, dataset: str, seed: int):
    return CELLS_DIR / f"{name}_{dataset}_seed{seed}.json"


def grid_path(name: str, dataset: str, seed: int = 0):
    """Where :mod:`studies.classifier_training.grid` records a cell (its file names)."""
    prefix = "" if dataset == "subj" else f"{dataset}-"
    suffix = "" if seed == 0 else f"-seed{seed}"
    return CELLS_DIR / f"{prefix}{name}{suffix}.json"


# ---------------------------------------------------------------------- documents
def encode(fit_texts, scored_texts, vocab_size: int):
    """(fitted documents, scored documents, V): each a (padded ids (N, L_max), lengths (N,))
    pair over the library's vocabulary built from the fitted texts; the pad id is V (an
    empty column: a zero row of every table)."""
    from cpgbn.text.corpus import Corpus
    fit = Corpus.from_texts(list(fit_texts), vocab_size=vocab_size)
    scored = Corpus.from_texts(list(scored_texts), vocabulary=fit.vocabulary)
    V = len(fit.vocabulary)

    def padded(corpus):
        offsets = np.asarray(corpus.offsets, dtype=np.int64)
        lengths = np.diff(offsets)
        ids = np.full((len(lengths), max(int(lengths.max(initial=0)), 1)), V, dtype=np.int64)
        for j, (lo, hi) in enumerate(zip(offsets[:-1], offsets[1:])):
            ids[j, :hi - lo] = corpus.tokens[lo:hi]
        return ids, lengths

    return padded(fit), padded(scored), V


def subset(documents, rows):
    ids, lengths = documents
    return ids[rows], lengths[rows]


def batch_tensors(documents, rows, min_width: int, pad: int):
    """The documents ``rows`` as (ids (B, L), lengths (B,)) tensors, L the longest of them or
    ``min_width`` (so that every width has a position in every document), ``pad`` filling
    the columns after a document's end."""
    import torch
    ids, lengths = documents
    lengths = lengths[rows]
    width = max(int(lengths.max(initial=0)), min_width)
    block = ids[rows, :width]
    if block.shape[1] < width:   # every document shorter than the widest filter
        block = np.pad(block, ((0, 0), (0, width - block.shape[1])), constant_values=pad)
    return torch.as_tensor(np.ascontiguousarray(block)), torch.as_tensor(lengths)


# ---------------------------------------------------------------------- the network
def build_network(vocab_size: int, n_classes: int, widths, maps: int, embedding=None,
                  pooling="mean"):
    """The study's network (module docstring) as a torch module: ``forward(ids, lengths)``
    gives the logits, ``softmax_input(ids, lengths)`` what the softmax reads.  ``pooling``
    over a document's positions: "mean" (the library's default), "max" (its
    ``classifier_pooling="max"``), or an int k: the mean of each map's k largest values
    (of all of them in a document with fewer positions; k = 1 is the max)."""
    if not (pooling in ("mean", "max") or (isinstance(pooling, int) and pooling >= 1)):
        raise ValueError(f"pooling must be 'mean', 'max' or a positive int, got {pooling!r}")
    import torch
    from torch import nn

    class Network(nn.Module):
        def __init__(self):
            super().__init__()
            self.widths, self.maps, self.pad = tuple(int(f) for f in widths), int(maps), vocab_size
            if embedding is None:
                # the library's table per width: row v = (filter row f of word v, f = 0..F-1);
                # a text column holds one word, so a position sums F rows: N(0, 1/F)
                self.tables = nn.ModuleList(nn.Embedding(vocab_size + 1, f * self.maps,
                                                         padding_idx=vocab_size)
                                            for f in self.widths)
                for f, table in zip(self.widths, self.tables):
                    nn.init.normal_(table.weight, std=1.0 / math.sqrt(f))
                self.embed, self.filters = None, None
            else:
                self.tables = None
                self.embed = nn.Embedding(vocab_size + 1, int(embedding), padding_idx=vocab_size)
                nn.init.normal_(self.embed.weight)
                # E @ W's entries N(0, 1/F) at the start, as the reference's table
                self.filters = nn.ParameterList(
                    nn.Parameter(torch.randn(int(embedding), f * self.maps)
                                 / math.sqrt(int(embedding) * f)) for f in self.widths)
            for weight in ([t.weight for t in self.tables] if self.tables is not None
                           else [self.embed.weight]):
                with torch.no_grad():   # the empty column's row, re-zeroed after the init
                    weight[vocab_size].zero_()
            self.biases = nn.ParameterList(nn.Parameter(torch.zeros(self.maps))
                                           for _ in self.widths)
            self.softmax = nn.Linear(len(self.widths) * self.maps, n_classes)

        def softmax_input(self, ids, lengths):
            """ln(1 + the mean of relu(C * X + b) over each document's positions) per width,
            concatenated: (B, len(widths) K)."""
            B, L = ids.shape
            words = None if self.embed is None else self.embed(ids)          # (B, L, D)
            parts = []
            for i, f in enumerate(self.widths):
                rows = (self.tables[i](ids) if words is None else words @ self.filters[i])
                rows = rows.view(B, L, f, self.maps)
                P = L - f + 1
                # position s sums filter row o of the word in column s + o (an empty column,
                # the pad id, adds its zero row)
                H = rows[:, 0:P, 0]
                for o in range(1, f):
                    H = H + rows[:, o:o + P, o]
                H = torch.relu(H + self.biases[i])
                # a document shorter than f is padded to f columns: one position
                n_positions = torch.clamp(lengths, min=f) - f + 1
                inside = torch.arange(P)[None, :] < n_positions[:, None]
                parts.append(torch.log1p(pool(H * inside[..., None], n_positions)))
            return torch.cat(parts, dim=1)

        def forward(self, ids, lengths):
            return self.softmax(self.softmax_input(ids, lengths))

    def pool(H, n_positions):
        """(B, P, K) relu'd values, zero past each document's n_positions -> (B, K); a zero
        is never above a position's relu, so a max or top k over the padded positions is
        the document's own."""
        if pooling == "mean":
            return H.sum(dim=1) / n_positions[:, None]
        if pooling == "max":
            return H.amax(dim=1)
        k = min(pooling, H.shape[1])
        top = torch.topk(H, k, dim=1).values.sum(dim=1)
        return top / torch.clamp(n_positions, max=pooling)[:, None]

    return Network()


def accuracy(network, documents, codes, batch: int = 512) -> float:
    import torch
    network.eval()
    correct = 0
    with torch.no_grad():
        for lo in range(0, len(codes), batch):
            rows = np.arange(lo, min(lo + batch, len(codes)))
            ids, lengths = batch_tensors(documents, rows, max(network.widths), network.pad)
            correct += int((network(ids, lengths).argmax(dim=1).numpy() == codes[rows]).sum())
    return correct / max(len(codes), 1)


def held_out(codes, seed: int, fraction: float):
    """(fitted rows, held-out rows): the library's validation split of a supervised fit with
    ``random_state=seed`` (:meth:`cpgbn.modes.supervised.SupervisedMode._validation_split`),
    so that the reference differs from the library's network in its draws of weights and
    minibatches only."""
    from sklearn.model_selection import train_test_split

    from cpgbn.inference.streams import derived_seed
    from cpgbn.modes.supervised import VALIDATION_SPLIT_STREAM
    known = np.arange(len(codes))
    fitted, held = train_test_split(known, test_size=int(round(fraction * len(known))),
                                    stratify=codes, random_state=derived_seed(
                                        seed, VALIDATION_SPLIT_STREAM) % (2 ** 32))
    return np.sort(fitted), np.sort(held)


def fit(network, documents, codes, seed: int, *, learning_rate, batch_size, n_epochs,
        validation_fraction, patience, xi, max_grad_norm, **_):
    """Train ``network`` as the library trains its own (module docstring) and load the best
    epoch's weights; returns (best epoch, validation curve, steps, gradient norms)."""
    import torch
    rng = np.random.default_rng(seed)
    fitted, held = held_out(codes, seed, validation_fraction)
    optimizer = torch.optim.Adam(network.parameters(), lr=learning_rate, fused=True)
    parameters = list(network.parameters())
    widest = max(network.widths)
    curve, norms, best = [], [], None
    for epoch in range(1, n_epochs + 1):
        network.train()
        order = fitted[rng.permutation(len(fitted))]
        for lo in range(0, len(order), batch_size):
            rows = np.sort(order[lo:lo + batch_size])
            ids, lengths = batch_tensors(documents, rows, widest, network.pad)
            optimizer.zero_grad(set_to_none=True)
            logits = network(ids, lengths)
            loss = xi * torch.nn.functional.cross_entropy(
                logits.double(), torch.as_tensor(codes[rows]), reduction="mean")
            loss.backward()
            norms.append(float(torch.nn.utils.clip_grad_norm_(parameters, max_grad_norm)))
            optimizer.step()
        curve.append(accuracy(network, subset(documents, held), codes[held]))
        if best is None or curve[-1] > max(curve[:-1]):
            best = (epoch, copy.deepcopy(network.state_dict()))
        elif patience is not None and epoch - best[0] >= patience:
            break
    network.load_state_dict(best[1])
    return best[0], curve, len(norms), norms


# ---------------------------------------------------------------------- cells
def run_cell(name: str, dataset: str, seed: int = 0, data_dir=None, limit=None) -> dict:
    import torch

    (fit_x, fit_y), (scored_x, scored_y) = validation_split(dataset, data_dir)
    if limit is not None:   # a smoke test: the first documents of each part
        fit_x, fit_y, scored_x, scored_y = fit_x[:limit], fit_y[:limit], scored_x[:limit], \
            scored_y[:limit]
    shape, training = CELLS[name], dict(TRAINING)
    classes = np.unique(np.asarray(fit_y))
    fit_codes = np.searchsorted(classes, np.asarray(fit_y))
    scored_codes = np.searchsorted(classes, np.asarray(scored_y))
    torch.manual_seed(seed)
    np.random.seed(seed)
    start = time.perf_counter()
    fitted, scored, V = encode(fit_x, scored_x, training["vocab_size"])
    network = build_network(V, len(classes), shape["widths"], training["maps"],
                            shape["embedding"])
    best_epoch, curve, n_steps, norms = fit(network, fitted, fit_codes, seed, **training)
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    score = accuracy(network, scored, scored_codes)
    predict_seconds = time.perf_counter() - start
    settings = dict(training, widths=list(shape["widths"]), embedding=shape["embedding"],
                    n_threads=1)
    return dict(name=name, dataset=dataset, seed=seed, settings=settings, n_fit=len(fit_x),
                n_parameters=sum(p.numel() for p in network.parameters()), accuracy=score,
                fit_seconds=round(seconds, 1), predict_seconds=round(predict_seconds, 2),
                n_steps=n_steps, best_epoch=best_epoch,
                validation_curve=[round(float(a), 4) for a in curve],
                **gradient_summary(norms, TRAINING["max_grad_norm"]),
                command=command_line(), **provenance())


def _read(path):
    return json.loads(path.read_text()) if path.exists() else None


def write_table() -> str:
    ours = [json.loads(p.read_text()) for p in sorted(CELLS_DIR.glob("net-*_*_seed*.json"))]
    ours = [c for c in ours if c.get("name") in CELLS]
    library = []
    for dataset in DATASETS:
        for seed in range(10):
            cell = _read(grid_path(LIBRARY, dataset, seed))
            if cell is not None:
                library.append(dict(cell, dataset=dataset, seed=seed,
                                    name="library discriminative"))
    baselines = {d: _read(grid_path(BASELINE, d)) for d in DATASETS}
    columns = ["library discriminative"] + list(CELLS)
    rows = library + ours
    lines = [
        "# The classifier's network: a word embedding and several filter widths",
        "",
        "Made by `python -m studies.classifier_training.network_levers --report` from "
        "results/classifier_training/cells/ (the study's docstring has the protocol).  The "
        "library's `discriminative` cell (`CPGBNClassifier(generative=False)`: one-hot "
        "convolution of width 3, 200 maps, mean pooling, log1p, softmax) and the study's own "
        "copy of that network with the levers, on the grid's validation splits: SUBJ and MR "
        "fold 0's training documents, TREC its training questions, 80% fitted (10% of it the "
        "fit's own validation split for early stopping) and 20% scored.  Accuracy in % on the "
        "scored 20%; several seeds: mean +- std.  NBSVM-bigram: the grid's cell, same split.",
        "",
        "| dataset | NBSVM-bigram | " + " | ".join(columns) + " |",
        "|---|---|" + "---|" * len(columns),
    ]
    for dataset in DATASETS:
        entries = []
        for column in columns:
            values = [100 * c["accuracy"] for c in rows
                      if c["dataset"] == dataset and c["name"] == column]
            seeds = sorted(c["seed"] for c in rows if c["dataset"] == dataset
                           and c["name"] == column)
            entries.append("-" if not values else mean_std(values) + (
                f" ({len(values)} seeds)" if len(values) > 1 else f" (seed {seeds[0]})"))
        nbsvm = baselines[dataset]
        nbsvm = "-" if nbsvm is None else f"{100 * nbsvm['accuracy']:.1f}"
        lines.append(f"| {dataset} | {nbsvm} | " + " | ".join(entries) + " |")
    lines += ["", "Every fit:", "",
              "| dataset | network | seed | accuracy % | parameters | fit s | steps | "
              "best epoch | validation curve % | clipped |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    order = {n: i for i, n in enumerate(columns)}
    for c in sorted(rows, key=lambda c: (DATASETS.index(c["dataset"]), order[c["name"]],
                                         c["seed"])):
        curve = " ".join(f"{100 * a:.1f}" for a in c.get("validation_curve") or [])
        clipped = "-" if "clipped_share" not in c else f"{100 * c['clipped_share']:.0f}%"
        parameters = f"{c['n_parameters']:,}" if "n_parameters" in c else "-"
        lines.append(f"| {c['dataset']} | {c['name']} | {c['seed']} | {100 * c['accuracy']:.1f} "
                     f"| {parameters} | {c['fit_seconds']:.0f} | {c.get('n_steps', '-')} | "
                     f"{c.get('best_epoch') or '-'} | {curve or '-'} | {clipped} |")
    lines += ["", "Seconds are wall time of one thread on the machine of the cell's record, "
              "sharing its cores with other jobs: a rough cost (the library's include its "
              "explanations' corpus pass after the fit).  Commits:", ""]
    lines += sorted({f"    {c['dataset']} {c['name']} seed {c['seed']}: {c['commit']}  "
                     f"({c['command']})" for c in rows})
    text = "\n".join(lines) + "\n"
    write_file_atomically(TABLE, lambda fh: fh.write(text))
    return text


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cells", default=",".join(CELLS),
                   help="comma-separated: " + ", ".join(CELLS) + " (default all)")
    p.add_argument("--datasets", default=",".join(DATASETS),
                   help="comma-separated, of " + ", ".join(DATASETS) + " (default all)")
    p.add_argument("--seed", type=int, default=0,
                   help="the network's seed (weights, minibatches, validation split; the "
                        "80/20 split stays seed 0's; default 0)")
    p.add_argument("--data-dir", default=None,
                   help="the datasets' folder (default $CPGBN_DATA)")
    p.add_argument("--report", action="store_true", help="write the table only")
    # a smoke test: the first LIMIT fitted and scored documents, printed and not recorded
    p.add_argument("--limit", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    names, datasets = args.cells.split(","), args.datasets.split(",")
    for name in names:
        if name not in CELLS:
            p.error(f"unknown cell {name!r}: one of {', '.join(CELLS)}")
    for dataset in datasets:
        if dataset not in DATASETS:
            p.error(f"unknown dataset {dataset!r}: one of {', '.join(DATASETS)}")
    # the commit of the code this process loads (cached): not of a later commit made while
    # its cells run
    from cpgbn.evaluate.provenance import source_commit
    source_commit()
    if not args.report:
        import torch
        torch.set_num_threads(1)
        for dataset in datasets:
            for name in names:
                path = cell_path(name, dataset, args.seed)
                if args.limit is None and path.exists():
                    continue
                with threadpool_limits(limits=1):
                    cell = run_cell(name, dataset, args.seed, args.data_dir, args.limit)
                if args.limit is not None:
                    print(json.dumps(cell, indent=1), flush=True)
                    continue
                write_file_atomically(path, lambda fh: fh.write(json.dumps(cell, indent=1) + "\n"))
                print(name, dataset, f"seed {args.seed}", f"accuracy {100 * cell['accuracy']:.1f}",
                      f"{cell['fit_seconds']} s", f"best epoch {cell['best_epoch']}", flush=True)
        if args.limit is not None:
            return
    print(write_table())


if __name__ == "__main__":
    main()
