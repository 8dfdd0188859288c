"""One process is a group of one: no layer asks whether a communicator is present, and a fit
in one process walks the estimator's rooms once each (issue 49).

* The source: a comparison of a communicator with None (``comm is None``, ``communicator is
  not None``, ``training.communicator is None``) or a fallback ``comm or ...`` appears nowhere
  in ``src/cpgbn`` but in :func:`cpgbn.inference.communicator.as_communicator`, the one place
  that turns the API's ``communicator=None`` into ``SingleProcess()``.  A planted test of that
  kind is found (so the check is not vacuous).
* The walk: the calls ``CPGBN.fit`` makes itself (one level down), grouped into stays, one
  per run of calls into one module.  Besides the estimator's own module (the hallway), no
  module is entered twice; the distributed module ``modes/sharded.py`` is not entered at any
  depth; the job is built once.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

from cpgbn import CPGBN
from helpers import random_texts

SOURCE = Path(__file__).resolve().parents[1] / "src" / "cpgbn"
COMMUNICATOR_NAMES = {"comm", "communicator"}
ALLOWED = {("inference/communicator.py", "as_communicator")}


def _names_a_communicator(node) -> bool:
    if isinstance(node, ast.Name):
        return node.id in COMMUNICATOR_NAMES
    if isinstance(node, ast.Attribute):
        return node.attr in COMMUNICATOR_NAMES
    if isinstance(node, ast.Call):   # fit_params.get("communicator")
        return any(isinstance(a, ast.Constant) and a.value in COMMUNICATOR_NAMES
                   for a in node.args)
    return False


def communicator_absence_tests(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, enclosing function) of every ``<communicator> is [not] None`` and
    ``<communicator> or ...`` in ``tree``."""
    found = []

    def visit(node, function):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Is, ast.IsNot))
                                                 for op in node.ops):
            sides = [node.left, *node.comparators]
            if (any(isinstance(s, ast.Constant) and s.value is None for s in sides)
                    and any(_names_a_communicator(s) for s in sides)):
                found.append((node.lineno, function))
        if (isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or)
                and _names_a_communicator(node.values[0])):
            found.append((node.lineno, function))
        for child in ast.iter_child_nodes(node):
            visit(child, function)
    visit(tree, None)
    return found


def test_no_layer_asks_whether_a_communicator_is_present():
    offenders = []
    for path in sorted(SOURCE.rglob("*.py")):
        rel = path.relative_to(SOURCE).as_posix()
        for line, function in communicator_absence_tests(ast.parse(path.read_text())):
            if (rel, function) not in ALLOWED:
                offenders.append(f"{rel}:{line} ({function})")
    assert offenders == [], offenders


def test_a_planted_absence_test_is_found():
    planted = ast.parse(
        "def fit(training, communicator=None, **kw):\n"
        "    if communicator is None:\n"
        "        pass\n"
        "    root = training.communicator is not None and training.communicator.is_root\n"
        "    c = comm or make()\n"
        "    if kw.get('communicator') is None:\n"
        "        pass\n"
        "    if other is None or comm.world_size > 1:\n"
        "        pass\n")
    assert communicator_absence_tests(planted) == [(2, "fit"), (4, "fit"), (5, "fit"),
                                                   (6, "fit")]


def _module_of(frame):
    if frame is None or not frame.f_code.co_filename.startswith(str(SOURCE)):
        return None
    return Path(frame.f_code.co_filename).relative_to(SOURCE).as_posix()


def _walk(fit):
    """The calls into ``src/cpgbn`` while ``fit()`` runs: (depth below CPGBN.fit, module,
    qualified name, the calling frame's module or None outside ``src/cpgbn``)."""
    calls, depth, top = [], [0], [None]

    def profile(frame, event, arg):
        if event == "call":
            depth[0] += 1
            code = frame.f_code
            if code.co_filename.startswith(str(SOURCE)):
                module = Path(code.co_filename).relative_to(SOURCE).as_posix()
                if top[0] is None and module == "model.py" and code.co_name == "fit":
                    top[0] = depth[0]
                if top[0] is not None:
                    calls.append((depth[0] - top[0], module, code.co_qualname,
                                  _module_of(frame.f_back)))
        elif event == "return":
            depth[0] -= 1
    sys.setprofile(profile)
    try:
        fit()
    finally:
        sys.setprofile(None)
    return calls


def test_a_one_process_fit_enters_each_room_once():
    texts = random_texts(40, seed=1)
    model = CPGBN(layers=(4, 2), n_iter=3, burn_in=1, random_state=0, vocab_size=30)
    calls = _walk(lambda: model.fit(texts))
    stays = []
    for depth, module, name, _ in calls:
        if depth == 1 and not name.startswith("<"):
            if not stays or stays[-1][0] != module:
                stays.append((module, []))
            stays[-1][1].append(name)
    rooms = [module for module, _ in stays if module != "model.py"]
    assert len(rooms) == len(set(rooms)), stays
    assert {"modes/jobs.py", "modes/gibbs_mode.py", "inference/communicator.py"} <= set(rooms)
    assert not [c for c in calls if c[1] == "modes/sharded.py"]
    names = [name for _, _, name, _ in calls]
    assert names.count("job_from_texts") == 1
    # the cells and the memory check: once for the job, once for the kernel-windows record
    # (inference of the training documents with the fitted globals, explain/kernel_windows)
    assert names.count("CPGBN._data") == names.count("CPGBN._check_memory") == 2
    # the post-fit records: one pass (explain/records), one kernel-windows inference
    assert names.count("PostFitPass.visit") == names.count("PostFitPass.finish") == 1
    assert names.count("windows_of_sample") == 1
    _runs_the_text_pipeline_twice(calls)


def _runs_the_text_pipeline_twice(calls):
    """X enters ``text/`` through the Documents door only (checked on the walk above, so that
    the suite profiles one fit): the text pipeline (tokens, vocabulary, the cells' words) runs
    on it twice, for the training corpus and for the post-fit kernel-windows sample
    (``Documents.corpus``, both from the estimator), and once it is read as it is
    (``Documents.read``, the job's texts and labels).  Every other call from outside ``text/``
    into it asks a built Corpus or Vocabulary what it holds (its size, lengths, tokens) or
    wraps X at a door (``Documents.of`` returns a Documents as it is)."""
    entries = [(module, caller, name) for _, module, name, caller in calls
               if module.startswith("text/") and not (caller or "").startswith("text/")]
    names = [name for _, _, name in entries]
    assert names.count("Documents.corpus") == 2 and names.count("Documents.read") == 1, entries
    assert [caller for _, caller, name in entries if name == "Documents.corpus"] == \
        ["model.py", "model.py"], entries
    accessors = {"Corpus.__len__", "Corpus.lengths", "Corpus.__post_init__",
                 "Vocabulary.__len__", "Vocabulary.tokens", "Documents.of",
                 "Documents.streamed", "labels_per_document"}
    assert set(names) - {"Documents.corpus", "Documents.read"} <= accessors, entries
