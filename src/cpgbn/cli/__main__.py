"""``python -m cpgbn.cli``: the command line (same as ``cpgbn`` and ``python -m cpgbn``)."""
import sys

from . import main

sys.exit(main())
