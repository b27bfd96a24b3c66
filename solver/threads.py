"""Threads for the solver's parallel kernels: a threading layer safe under fork and threads, and how many.

The kernels that touch every row (``solver._tree_kernels``, the full gradients of ``solver.gbcd`` and
``solver.losses.multinomial_gbcd``) run numba ``prange`` loops on a *threading layer*. On Linux without TBB numba takes
GNU OpenMP, which can hang in a child forked after its parent ran a parallel loop (the RQ worker warms the solver, then
forks a work horse per job), and its fork-safe alternative, ``workqueue``, aborts when two Python threads start parallel
loops at once (the API scores on threads). TBB is safe under both (numba's ``"safe"`` layer). pip's ``tbb`` wheel, a
dependency, puts ``libtbb.so.12`` in ``<prefix>/lib``, where the dynamic loader does not look: it is loaded here by its
path, so that numba finds it by name. Where it cannot be loaded, numba's own choice stands, with a warning.
``NUMBA_THREADING_LAYER``, where set, is left to rule.

How many threads: ``FIRE_NUM_THREADS`` (the service's setting; default: every core numba sees) sizes numba's pool
for the whole process when it is read before the first parallel loop, as it is on importing ``solver``;
``n_jobs`` (``fit_path``, the estimators) limits one call, in the calling thread (:func:`limit`). The kernels'
results do not depend on the thread count (``solver._tree_kernels``).
"""

import ctypes
import os
import sys
import warnings
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

import numba
from numba.np.ufunc import parallel

THREADS_VARIABLE = "FIRE_NUM_THREADS"
TBB_LIBRARY = "libtbb.so.12"


def count(n_jobs: int | None) -> int:
    """The threads that ``n_jobs`` asks for, as scikit-learn reads it: a positive count (at most the pool's), -1 for
    every thread of the pool, -2 for all but one, and so on; None: the pool's (``FIRE_NUM_THREADS``)."""
    pool = numba.config.NUMBA_NUM_THREADS
    if n_jobs is None:
        return pool
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0:
        raise ValueError(f"n_jobs must be a positive number of threads, or -1 for every core; got {n_jobs!r}")
    return min(n_jobs, pool) if n_jobs > 0 else max(1, pool + 1 + n_jobs)


def current() -> int:
    """The threads this thread's parallel loops use now."""
    return numba.get_num_threads()


@contextmanager
def limit(n_jobs: int | None):
    """Run the block with at most ``count(n_jobs)`` threads in this thread's parallel loops (None: unchanged)."""
    if n_jobs is None:
        yield
        return
    threads = count(n_jobs)
    previous = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        yield
    finally:
        numba.set_num_threads(previous)


def _threads_from_environment() -> int | None:
    value = os.environ.get(THREADS_VARIABLE, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{THREADS_VARIABLE} must be a positive number of threads, got {value!r}")
    return int(value)


def _tbb_path() -> Path | None:
    try:
        files = metadata.files("tbb") or []
    except metadata.PackageNotFoundError:
        return None
    found = [file.locate() for file in files if file.name == TBB_LIBRARY]
    return Path(found[0]) if found else None


def _load_tbb() -> bool:
    """Load pip's TBB by its path; True where numba can now use it."""
    path = _tbb_path()
    if path is None or not path.exists():
        return False
    try:
        ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return False
    return True


def _configure() -> None:
    threads = _threads_from_environment()
    if parallel._is_initialized:  # a parallel loop ran before solver was imported: the layer and pool are set
        if threads is not None:
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        return
    if "NUMBA_THREADING_LAYER" not in os.environ:
        if _load_tbb():
            numba.config.THREADING_LAYER = "safe"
        elif sys.platform.startswith("linux"):
            warnings.warn(
                "TBB could not be loaded (pip install tbb): numba's threading layer may not be safe in forked or "
                "threaded processes",
                RuntimeWarning,
                stacklevel=2,
            )
    if threads is not None:  # what NUMBA_NUM_THREADS does, read by numba on import: the pool is launched later
        numba.config.NUMBA_NUM_THREADS = parallel.NUM_THREADS = threads


_configure()
