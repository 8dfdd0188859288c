"""Formatting shared by the experiment scripts' markdown reports."""
import numpy as np


def mean_std(percentages) -> str:
    """"mean +- std" of accuracies in %, one decimal; the std (over seeds, ddof = 1) only when
    there are two values or more."""
    values = np.asarray(percentages, dtype=float)
    return f"{values.mean():.1f}" + (f" +- {values.std(ddof=1):.1f}" if len(values) > 1 else "")
