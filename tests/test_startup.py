"""Start-up: ``import cpgbn`` and the commands that neither train nor encode do not import torch.

torch's import takes a second or more (``cpgbn --version`` took 3 s while ``import cpgbn``
imported it).  cpgbn imports torch only just before numba's thread pool can start, which must
not come first (:mod:`cpgbn.backends.numba.openmp` says why), so a fit or an inference pays for it
and nothing else does.  Both halves are checked: what must not import torch, and that each
piece of cpgbn that can start numba's pool imports torch before it does.

Every check runs in a fresh interpreter (``python -c``): this one has imported torch long
ago.  Without torch installed there is nothing to keep out, and the tests skip.
"""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="torch is not installed: no import of it to keep out")


def run_python(script: str) -> dict:
    """Run ``script`` in a fresh interpreter; the JSON object it prints last."""
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_import_cpgbn_does_not_import_torch():
    got = run_python("""
        import json, sys
        import cpgbn
        print(json.dumps({"torch": "torch" in sys.modules}))
    """)
    assert got == {"torch": False}


def test_commands_that_neither_train_nor_encode_do_not_import_torch(tmp_path):
    missing = tmp_path / "missing"
    commands = {  # each ends in sys.exit (argparse) or returns an exit status
        "--version": ["--version"],
        "fit --help": ["fit", "--help"],
        "fit, missing file": ["fit", str(missing / "docs.tsv"), "--out", str(tmp_path / "m")],
        "topics, missing model": ["topics", str(missing)],
        "evaluate, missing file": ["evaluate", str(missing / "docs.tsv")],
    }
    got = run_python(f"""
        import contextlib, io, json, sys
        from cpgbn.cli import main
        seen = {{}}
        for name, argv in {commands!r}.items():
            err = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                try:
                    code = main(argv)
                except SystemExit as exc:
                    code = exc.code
            seen[name] = {{"code": code, "stderr": err.getvalue(),
                           "torch": "torch" in sys.modules}}
        print(json.dumps(seen))
    """)
    for name in commands:
        assert got[name]["torch"] is False, f"`cpgbn {name}` imported torch"
    assert got["--version"]["code"] == got["fit --help"]["code"] == 0
    for name in ("fit, missing file", "topics, missing model", "evaluate, missing file"):
        lines = got[name]["stderr"].splitlines()
        assert got[name]["code"] == 2 and len(lines) == 1, (name, lines)
        assert lines[0].startswith("cpgbn: error:") and str(missing) in lines[0], (name, lines)


# The order is observed where numba starts its pool: numba.np.ufunc.parallel._launch_threads,
# which parallel kernels (compiled or loaded from the cache) and get/set_num_threads call
# first.  A private name of numba's, wrapped here only to record what was imported by then.
_RECORD_LAUNCH = """
    import json, sys
    import numba.np.ufunc.parallel as parallel
    launches = []
    launch = parallel._launch_threads
    def recorded_launch():
        launches.append("torch" in sys.modules)
        return launch()
    parallel._launch_threads = recorded_launch
"""


@pytest.mark.parametrize("start", [
    pytest.param("""
        from cpgbn.modes.runtime import numba_threads
        with numba_threads(1):
            pass
    """, id="numba_threads"),
    pytest.param("""
        import numpy as np
        from cpgbn.backends.numba.numba_backend import NumbaBackend
        from cpgbn.layers.cells import from_token_sequences
        backend = NumbaBackend(from_token_sequences(np.array([1, 2]), np.array([0, 2]), 1, 1), 0)
        backend.count_slabs((3, 1, 2))
    """, id="NumbaBackend"),
])
def test_torch_is_imported_before_numba_starts_its_threads(start):
    got = run_python("".join(textwrap.dedent(part) for part in (_RECORD_LAUNCH, """
        import cpgbn
        before = "torch" in sys.modules
    """, start, """
        print(json.dumps({"torch_at_import": before, "torch_at_launches": launches}))
    """)))
    assert got["torch_at_import"] is False
    assert got["torch_at_launches"], "numba's pool never started: the check saw nothing"
    assert all(got["torch_at_launches"]), "numba's pool started before torch was imported"
