"""What the benchmarks record about where they ran: the CPU, the memory, this process's memory from /proc, and the
git state of the repository (which commit of the solver gave the numbers).

Imported as ``bench.machine`` (the scripts keep bench/ off sys.path, where bench/solver.py would shadow the
``solver`` package, and the repository on it) or as ``machine`` by the service benchmarks, which run with bench/
on sys.path.
"""

import os
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def cpu_model(fallback: str = "?") -> str:
    """The CPU's model name from /proc/cpuinfo; ``fallback`` where it names none."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return fallback


def memory_bytes() -> int:
    """The machine's memory (MemTotal of /proc/meminfo; 0 where unknown)."""
    try:
        with open("/proc/meminfo") as fh:
            return int(fh.readline().split()[1]) * 1024
    except OSError:
        return 0


def status_bytes(field: str) -> int:
    """A memory figure of this process (``VmRSS``, ``VmHWM``, ... of /proc/self/status) in bytes; 0 where unknown."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.2f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.0f} MiB"


def git(*args: str) -> str | None:
    """The output of ``git *args`` in the repository, stripped; None where git cannot run."""
    try:
        return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def solver_commit() -> str | None:
    """The last commit touching solver/ plus '+dirty' where solver/ has uncommitted changes (None without git);
    $BENCH_SOLVER_VERSION where set (a run from an exported tree, which has no git)."""
    if os.environ.get("BENCH_SOLVER_VERSION"):
        return os.environ["BENCH_SOLVER_VERSION"]
    commit = git("log", "-1", "--format=%h", "--", "solver")
    dirty = git("status", "--porcelain", "--", "solver")
    if commit is None or dirty is None:
        return None
    return (commit + ("+dirty" if dirty else "")) or None
