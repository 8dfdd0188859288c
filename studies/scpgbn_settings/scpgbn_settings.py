"""Which settings the supervised CPGBN (CPGBNClassifier) needs to learn: the weight xi of the
cross-entropy, where the globals' statistics come from, the observation model, epochs.

One fit per run on the authors' split of a dataset (TREC official; SUBJ/MR the authors' fixed
split), one thread, seed 0; test accuracy and the accuracy on the first 2000 training
documents; the mean training loss of the first and last 10 steps.  Each run adds one cell to
results/scpgbn_settings/runs.json with its command and commit.

    python -m studies.scpgbn_settings.scpgbn_settings --data trec --xi 100 --stats gibbs

``--xi`` is the estimator's ``xi`` at the commit of the run: up to commit 3be818e it was the
paper's xi (per document); from the next commit on it is per unit of a document's counts
(the record's ``paper_xi`` gives the paper's value in every run made since).
"""
import argparse
import json
import time

from cpgbn.classifier import CPGBNClassifier
from cpgbn.datasets import load_dataset
from cpgbn.evaluate.provenance import provenance

from studies.common.paths import RESULTS
from studies.common.reports import command_line, load_cells, save_record

OUT = RESULTS / "scpgbn_settings" / "runs.json"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="trec")
    ap.add_argument("--xi", type=float, default=100.0)
    ap.add_argument("--stats", default="gibbs", choices=("gibbs", "encoder"))
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--tc", default="800", help="token_count: an integer or bernoulli-poisson")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--layers", default="200")
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--data-dir", default=None)
    a = ap.parse_args(argv)
    train = load_dataset(a.data, "train", data_dir=a.data_dir)
    test = load_dataset(a.data, "test", data_dir=a.data_dir)
    token_count = a.tc if a.tc == "bernoulli-poisson" else int(a.tc)
    start = time.perf_counter()
    model = CPGBNClassifier(layers=tuple(int(x) for x in a.layers.split("-")), xi=a.xi,
                            n_epochs=a.epochs, random_state=0, n_threads=1,
                            global_statistics=a.stats, token_count=token_count,
                            learning_rate=a.lr, batch_size=a.batch, vocab_size=a.vocab)
    model.fit(train[0], train[1])
    fit_seconds = time.perf_counter() - start
    row = dict(vars(a), fit=round(fit_seconds), acc=model.score(test[0], test[1]),
               train=model.score(train[0][:2000], train[1][:2000]),
               loss0=float(model.loss_trace_[:10].mean()),
               loss1=float(model.loss_trace_[-10:].mean()), paper_xi=model.paper_xi_,
               command=command_line(), **provenance())
    OUT.parent.mkdir(parents=True, exist_ok=True)
    record = load_cells(OUT)
    record["cells"][str(len(record["cells"]))] = row
    save_record(OUT, record)
    print(json.dumps(row))


if __name__ == "__main__":
    main()
