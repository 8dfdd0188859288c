"""Shared fixtures and session settings: where the real datasets live, a fresh numba cache for
every test session, and a watchdog that ends a test session whose test hangs in numba code.

The numba cache.  numba decides whether a cached kernel is stale from its own source file
only: after an edit of ``weights.py``, ``distributions.py``, ``gbn.py`` or ``shared_shape.py``,
a warm cache keeps the old compiled ``sweep_positions`` of ``conv.py`` (which inlines them),
and a test session would silently run the old code.  So every session compiles into its own
new directory (``NUMBA_CACHE_DIR``, set here before anything imports numba, removed at the
end); that costs one compilation per session (about 40 s of one core for the sampler's
kernels).  ``CPGBN_KEEP_NUMBA_CACHE=1`` keeps the caller's ``NUMBA_CACHE_DIR`` instead (numba's
default, ``__pycache__`` beside the sources, when unset): for quick local loops, at the risk
above (see CONTRIBUTING.md).

Hangs.  Every test has a time limit (pytest-timeout, ``timeout`` in pyproject.toml).  Its
signal method cannot stop numba's compiled code, which holds the GIL and never returns to the
interpreter, and neither can its thread method.  A watchdog process therefore takes the same
limit plus ``WATCHDOG_GRACE_S``: when a test runs past it, the watchdog prints the test's name
and aborts the session with SIGABRT, on which Python's faulthandler (on under pytest) prints
every thread's stack; the session fails.  A hang in Python code fails the test by
pytest-timeout alone, and the session goes on.
"""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# before numba is imported (by cpgbn or a test module): numba reads it once, at import
_SESSION_NUMBA_CACHE = None
if os.environ.get("CPGBN_KEEP_NUMBA_CACHE", "") not in ("1", "true", "yes"):
    _SESSION_NUMBA_CACHE = tempfile.mkdtemp(prefix="cpgbn-numba-cache-")
    os.environ["NUMBA_CACHE_DIR"] = _SESSION_NUMBA_CACHE
    if "numba" in sys.modules:  # imported by a plugin: read the environment again
        sys.modules["numba"].core.config.reload_config()

import pytest  # noqa: E402

#: Seconds the watchdog waits after pytest-timeout's limit before it aborts the session.
WATCHDOG_GRACE_S = 30.0

# The watchdog: reads "<seconds> <test id>" (arm) or "-" (disarm) lines from its stdin; past
# the deadline it names the test and sends SIGABRT to the session.  EOF: the session ended.
_WATCHDOG_CODE = r"""
import os, select, signal, sys, time
parent, deadline, name, limit, pending = int(sys.argv[1]), None, "", "", b""
while True:
    wait = None if deadline is None else max(0.0, deadline - time.monotonic())
    ready, _, _ = select.select([0], [], [], wait)
    if ready:
        chunk = os.read(0, 65536)
        if not chunk:
            break
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            text = line.decode()
            if text == "-":
                deadline = None
            else:
                limit, name = text.split(" ", 1)
                deadline = time.monotonic() + float(limit)
    elif deadline is not None:
        sys.stderr.write(f"\n\nTIMEOUT: {name} ran past {limit} s (hung in compiled code?); "
                         "aborting the test session\n")
        sys.stderr.flush()
        os.kill(parent, signal.SIGABRT)
        break
"""


class _Watchdog:
    """The watchdog process of this session (started on the first test with a time limit)."""

    def __init__(self):
        self._process = None

    def arm(self, nodeid: str, seconds: float) -> None:
        if self._process is None:
            self._process = subprocess.Popen([sys.executable, "-c", _WATCHDOG_CODE,
                                              str(os.getpid())], stdin=subprocess.PIPE)
        self._send(f"{seconds:g} {nodeid}")

    def disarm(self) -> None:
        if self._process is not None:
            self._send("-")

    def _send(self, line: str) -> None:
        self._process.stdin.write((line + "\n").encode())
        self._process.stdin.flush()

    def close(self) -> None:
        if self._process is not None:
            self._process.stdin.close()
            self._process.wait(timeout=10)
            self._process = None


_WATCHDOG = _Watchdog()


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_timeout_set_timer(item, settings):
    if settings.timeout and settings.timeout > 0:
        _WATCHDOG.arm(item.nodeid, settings.timeout + WATCHDOG_GRACE_S)
    return None  # pytest-timeout sets its own timer as well


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_timeout_cancel_timer(item):
    _WATCHDOG.disarm()
    return None


def pytest_unconfigure(config):
    _WATCHDOG.close()
    if _SESSION_NUMBA_CACHE is not None:
        shutil.rmtree(_SESSION_NUMBA_CACHE, ignore_errors=True)



def _find_data_dir():
    env = os.environ.get("CPGBN_DATA")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "shared" / "data"
        if (candidate / "TREC" / "train.tsv").is_file():
            return candidate
    return None


@pytest.fixture(scope="session")
def data_dir():
    """The real data directory (``CPGBN_DATA`` or a ``shared/data`` beside the checkout)."""
    path = _find_data_dir()
    if path is None or not (path / "TREC" / "train.tsv").is_file():
        pytest.skip("real datasets not found: set CPGBN_DATA to the data directory")
    return path


@pytest.fixture
def numba_one_thread():
    """numba on one thread for a test: results do not depend on the count (tests/test_model.py
    checks it), and the launch of numba's parallel regions dominates the tiny models' sweeps,
    at several times the cost with two threads on a busy machine."""
    import numba
    previous = numba.get_num_threads()
    numba.set_num_threads(1)
    yield
    numba.set_num_threads(previous)


@pytest.fixture(scope="module")
def torch_one_thread():
    """torch on one thread for a module's tests (the machine may be shared); skips without torch."""
    torch = pytest.importorskip("torch")
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
