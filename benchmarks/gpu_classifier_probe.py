"""Where a classifier fit spends its time with the encoder on a GPU: CPGBNClassifier (three
layers 200-100-50, the defaults, 2 epochs, seed 0, 4 threads) on 3,000 IMDB training reviews
drawn at random (seed 0), fitted once per device named, printing fit seconds, steps and the
median step seconds (``step_seconds_``: the encoder's gradient step).

    PYTHONPATH=src python benchmarks/gpu_classifier_probe.py --data-dir .gpu_data cuda cpu
"""
import argparse
import os
import time

import numpy as np


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("devices", nargs="+")
    p.add_argument("--data-dir", default=None)
    args = p.parse_args(argv)
    import torch

    from cpgbn.classifier import CPGBNClassifier
    from cpgbn.datasets import load_dataset
    print("torch threads", torch.get_num_threads(), "cpus", os.cpu_count(), flush=True)
    texts, labels = load_dataset("imdb", "train", data_dir=args.data_dir)
    keep = np.random.default_rng(0).choice(len(texts), 3000, replace=False)
    texts, labels = [texts[i] for i in keep], [labels[i] for i in keep]
    for device in args.devices:
        model = CPGBNClassifier(layers=(200, 100, 50), n_epochs=2, random_state=0, n_threads=4,
                                device=device)
        start = time.perf_counter()
        model.fit(texts, labels)
        print(device, "fit", round(time.perf_counter() - start, 1), "steps",
              len(model.loss_trace_), "step s median", float(np.median(model.step_seconds_)),
              flush=True)


if __name__ == "__main__":
    main()
