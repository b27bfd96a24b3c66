"""Child processes that end with their parent, also when the parent is SIGKILLed (Linux's parent-death signal)."""

import ctypes
import ctypes.util
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent exits. Elsewhere than Linux it does
    nothing: there, `fire-rules serve` stopped by SIGKILL leaves its children to be stopped by hand."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
