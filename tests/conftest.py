"""Shared fixtures and session settings: where the real datasets live, a fresh numba cache for
every test session, and a watchdog that ends a test session whose test hangs in numba code.

The numba cache.  numba decides whether a cached kernel is stale from its own source file
only: after an edit of ``weights.py``, ``distributions.py``, ``gbn.py`` or ``shared_shape.py``,
a warm cache keeps the old compiled ``sweep_positions`` of ``conv.py`` (which inlines them),
and a test session would silently run the old code.  So every session compiles into its own
new directory (``NUMBA_CACHE_DIR``, set here before anything imports numba, removed at the
end); that costs one compilation per session (about 40 s of one core for the sampler's
kernels, 80-90 s for everything the suite compiles).  ``CPGBN_KEEP_NUMBA_CACHE=1`` keeps the
caller's ``NUMBA_CACHE_DIR`` instead (numba's default, ``__pycache__`` beside the sources, when
unset): for quick local loops, at the risk above (see CONTRIBUTING.md).

Under pytest-xdist (``make test`` runs two workers) the main process makes the session's
directory and tells its workers through ``CPGBN_SESSION_NUMBA_CACHE`` ("<pid> <directory>",
honoured only by a worker whose parent has that pid); each worker compiles into a
subdirectory of its own (``xdist-gw0``, ...), and the main process removes the whole directory
at the end.  One directory for all workers would compile each kernel once, but numba's cache
is not safe for two processes that write one function's cache at once: a save reads the
function's index, picks the first free data-file number and writes the index back, with no
lock, so two processes that save two signatures of one function together can both take
number N, and the index can then name for one signature the code compiled for the other
(the files themselves are replaced atomically, which does not help).  A warm-up in the main
process before the workers start would cost as much wall time as the workers' compilation,
which runs on both cores at once.  The child processes of a worker (the CLI tests) share its
directory, as they share the session's without xdist (the worker waits for them).  With
``CPGBN_KEEP_NUMBA_CACHE=1`` and ``NUMBA_CACHE_DIR`` set, the workers use
``$NUMBA_CACHE_DIR/xdist-gw0``, ... for the same reason.

Hangs.  Every test has a time limit (pytest-timeout, ``timeout`` in pyproject.toml).  Its
signal method cannot stop numba's compiled code, which holds the GIL and never returns to the
interpreter, and neither can its thread method.  A watchdog process therefore takes the same
limit plus ``WATCHDOG_GRACE_S``: when a test runs past it, the watchdog prints the test's name
and aborts the session with SIGABRT, on which Python's faulthandler (on under pytest) prints
every thread's stack; the session fails.  Under pytest-xdist every worker has its own
watchdog, which aborts that worker: pytest-xdist reports its test as failed ("worker 'gw0'
crashed while running ..."), starts a new worker and goes on, and the session fails.  A hang
in Python code fails the test by pytest-timeout alone, and the session goes on.
"""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# before numba is imported (by cpgbn or a test module): numba reads it once, at import
_KEEP_CACHE = os.environ.get("CPGBN_KEEP_NUMBA_CACHE", "") in ("1", "true", "yes")
#: Set by a session's main process for its pytest-xdist workers: "<pid> <cache directory>".
SESSION_CACHE_VARIABLE = "CPGBN_SESSION_NUMBA_CACHE"
#: pytest-xdist's name of this worker process ("gw0", ...); None in the main process.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER") or None


def _main_process_cache():
    """The cache directory that this worker's main process made for the session, or None when
    this process is no pytest-xdist worker of the process that set SESSION_CACHE_VARIABLE (a
    pytest started by a test, say, inherits the variable but has another parent)."""
    owner, _, path = os.environ.get(SESSION_CACHE_VARIABLE, "").partition(" ")
    if _WORKER is None or owner != str(os.getppid()) or not os.path.isdir(path):
        return None
    return path


def _worker_subdirectory(path: str) -> str:
    """This worker's own numba cache, inside the session's: numba's cache is not safe for two
    processes that compile one function at once (see the module docstring)."""
    path = os.path.join(path, f"xdist-{_WORKER}")
    os.makedirs(path, exist_ok=True)
    return path


_SESSION_NUMBA_CACHE = None  # the directory this process made, and removes at the end
_cache_dir = None  # the NUMBA_CACHE_DIR this process sets (None: the caller's)
if _KEEP_CACHE:
    if _WORKER is not None and os.environ.get("NUMBA_CACHE_DIR"):
        _cache_dir = _worker_subdirectory(os.environ["NUMBA_CACHE_DIR"])
    elif _WORKER is not None:  # numba's default (__pycache__ beside the sources), one for all
        sys.stderr.write("CPGBN_KEEP_NUMBA_CACHE without NUMBA_CACHE_DIR under pytest-xdist: "
                         "each worker compiles into a new cache of its own instead\n")
        _SESSION_NUMBA_CACHE = _cache_dir = tempfile.mkdtemp(prefix="cpgbn-numba-cache-")
elif _main_process_cache() is not None:
    _cache_dir = _worker_subdirectory(_main_process_cache())
else:
    _SESSION_NUMBA_CACHE = _cache_dir = tempfile.mkdtemp(prefix="cpgbn-numba-cache-")
    os.environ[SESSION_CACHE_VARIABLE] = f"{os.getpid()} {_SESSION_NUMBA_CACHE}"
if _cache_dir is not None:
    os.environ["NUMBA_CACHE_DIR"] = _cache_dir
    if "numba" in sys.modules:  # imported by a plugin: read the environment again
        sys.modules["numba"].core.config.reload_config()

# Under pytest-xdist the workers fill the cores, so a thread of numba's or torch's OpenMP team
# that spins while it waits for work takes the core from the other worker: let it sleep instead
# (the threads' count and the results stay as they are; the caller's setting wins)
if _WORKER is not None and int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest  # noqa: E402

# torch (when installed) before anything can start numba's thread pool, as the library
# arranges for its own calls (cpgbn/backends/numba/openmp.py): tests call numba's parallel kernels
# directly, and a pool started first would slow every torch test after it in that worker
from cpgbn.backends.numba.openmp import import_torch_first  # noqa: E402

import_torch_first()

#: Seconds the watchdog waits after pytest-timeout's limit before it aborts the session.
WATCHDOG_GRACE_S = 30.0

# The watchdog: reads "<seconds> <test id>" (arm) or "-" (disarm) lines from its stdin; past
# the deadline it names the test and sends SIGABRT to the session.  EOF: the session ended.
_WATCHDOG_CODE = r"""
import os, select, signal, sys, time
parent, victim, deadline, name, limit, pending = int(sys.argv[1]), sys.argv[2], None, "", "", b""
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
                         f"aborting {victim}\n")
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
            victim = ("the test session" if _WORKER is None else
                      f"pytest-xdist worker {_WORKER} (its test fails; the session goes on)")
            self._process = subprocess.Popen([sys.executable, "-c", _WATCHDOG_CODE,
                                              str(os.getpid()), victim], stdin=subprocess.PIPE)
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


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist, the statistical tests (marker ``slow``, half of the suite's time) run
    first, the longest first (``@pytest.mark.slow(seconds=...)``, the time a test states it
    takes on the 2-core machine), so that no worker is left with a long test at the end while
    the other idles."""
    if _WORKER is not None:   # a stable sort: the rest keep their order
        items.sort(key=lambda item: (item.get_closest_marker("slow") is None,
                                     -_stated_seconds(item)))


def _stated_seconds(item) -> float:
    """The largest ``seconds`` that a ``slow`` marker of the test states (0: none does)."""
    return max((float(m.kwargs.get("seconds", 0)) for m in item.iter_markers("slow")),
               default=0.0)


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

    from cpgbn.backends.numba.openmp import import_torch_first
    import_torch_first()   # before numba's pool starts, as the library does
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
