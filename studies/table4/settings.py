"""Where the Table 4 study keeps its record and report, and what it compares with: read by
both ``table4.py`` (which runs cells) and ``report.py`` (which writes the table), so that
neither imports the other."""

from studies.common.paths import RESULTS, ROOT

OUT = RESULTS / "table4" / "table4.json"
TABLE = RESULTS / "table4.md"
#: Each test cell's fit checkpoints here (outside the repository's records; removed when the
#: fit completes), so a killed run resumes its fit
CHECKPOINTS = ROOT / "runs" / "table4"
BASELINE_RECORD = RESULTS / "text_baselines" / "text_baselines.json"
#: The classifier table's cells (studies.classifier_table): one file per split, seed and model
CLASSIFIER_CELLS = RESULTS / "classifier_table" / "cells"
DATASETS = ("subj", "imdb", "mr", "trec")
#: The paper's Table 4 (sCPGBN, accuracy %): layers -> dataset -> accuracy.
PAPER = {1: {"subj": 93.4, "elec": 91.6, "imdb": 91.8},
         2: {"subj": 93.7, "elec": 92.0, "imdb": 92.4},
         3: {"subj": 93.8, "elec": 92.2, "imdb": 92.6}}
BASELINES = ("nbsvm-bigram", "mnb-bigram", "svm-bigram", "lr-bigram", "svm-trigram")
#: The paper's form of the classifier, as the library trained it before issue 47 (its defaults
#: then): a softmax on theta^(1..T), the ELBO and the globals every minibatch of 100, 10
#: epochs, the last one kept, 8,000 vocabulary rows, filter width 3; xi (per unit) 100 unless
#: a cell is told or tuned otherwise.  Spelled out, since today's defaults are another
#: classifier (docs/classifier.md).
PAPER_FORM = dict(classifier_input="theta", xi=100.0, generative_every=1, batch_size=100,
                  n_epochs=10, validation_fraction=0.0, vocab_size=8000, filter_width=3)
