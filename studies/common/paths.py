"""Where the studies write: ``results/<study>/`` under the repository root."""
from pathlib import Path

#: The repository root (the folder holding ``src/``, ``studies/`` and ``results/``).
ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
