"""The version of cpgbn (read by setuptools at build time and recorded in saved models)."""

__version__ = "0.1.0"
VERSION = __version__
