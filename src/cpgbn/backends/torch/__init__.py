"""PyTorch backend (needs the ``torch`` extra): the Gibbs conditionals vectorised over cells,
positions and documents, on a GPU or the CPU."""
