"""Looking at a fitted model: phrase tables per kernel and per topic, topic trees."""
from .hierarchy import (TopicNode, check_layer, format_tree, kernel_weights, phrase_matrix, top_words_per_column,
                        topic_tree)

__all__ = ["TopicNode", "check_layer", "format_tree", "kernel_weights", "phrase_matrix", "top_words_per_column",
           "topic_tree"]
