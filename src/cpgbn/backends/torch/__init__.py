"""PyTorch backend (needs the ``torch`` extra): the Gibbs conditionals vectorised over cells,
positions and documents, on a GPU or the CPU (``backend.py``), and the hybrid inference's
encoder side (``hybrid.py``: the Weibull encoder, its ELBO and optimiser)."""
