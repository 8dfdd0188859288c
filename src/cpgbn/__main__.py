"""``python -m cpgbn``: the command-line interface (same as the ``cpgbn`` command)."""
import sys

from .cli import main

sys.exit(main())
