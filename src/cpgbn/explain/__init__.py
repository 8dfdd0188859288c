"""Looking at a fitted model: phrase tables per kernel and per topic, topic trees."""
from .coherence import (CoherenceResult, assigned_topic_words, cooccurrence, kernel_topic_words, lda_topic_words,
                        model_coherence, npmi, phrase_topic_words)
from .hierarchy import (HIDDEN, MIN_COLUMN_SHARE, TopicNode, check_layer, column_mass, format_columns, format_tree,
                        kernel_weights, phrase_matrix, top_words_per_column, topic_tree)
from .kernel_table import KernelSummary, format_kernel_table, kernel_table, sort_kernels
from .phrases import (KernelAssignments, Phrase, assign_kernels, best_phrases, corpus_phrases,
                      phrases_from_columns, sharpness, top_corpus_phrases)
from .plots import class_usage_png, loglik_png, save_png, save_tree_svg, tree_svg, usage_png
from .report import build_report, write_report
from .summary import summary_facts, summary_text

__all__ = ["TopicNode", "check_layer", "format_tree", "kernel_weights", "phrase_matrix", "top_words_per_column",
           "topic_tree", "HIDDEN", "MIN_COLUMN_SHARE", "column_mass", "format_columns",
           "Phrase", "best_phrases", "phrases_from_columns", "sharpness", "KernelAssignments", "assign_kernels",
           "corpus_phrases", "top_corpus_phrases", "KernelSummary", "kernel_table", "sort_kernels",
           "format_kernel_table",
           "CoherenceResult", "npmi", "cooccurrence", "model_coherence", "phrase_topic_words", "kernel_topic_words",
           "assigned_topic_words", "lda_topic_words",
           "loglik_png", "usage_png", "class_usage_png", "save_png", "tree_svg", "save_tree_svg",
           "build_report", "write_report", "summary_facts", "summary_text"]
