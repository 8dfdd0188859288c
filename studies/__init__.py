"""Studies of the cpgbn library: paper reproductions, ablations and the figures of the docs.

Each study lives in ``studies/<name>/`` (its script, any patches it applies, its tests) and
writes its records under ``results/<name>/``.  Run a study from the repository root as a
module, for example ``python -m studies.table2.table2 --seeds 0,1,2``; ``make test`` runs the
studies' tests beside the library's.  ``studies/common`` holds what several studies share,
``studies/make_docs`` regenerates the tables of ``README.md`` and ``docs/`` from the records.
Nothing in ``src/`` depends on this package.
"""
