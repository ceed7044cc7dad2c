"""Freed memory handed back to the system after a burst of short-lived objects.

glibc's malloc keeps what a process frees for its next allocations: after a column
snapshot's build (a million strings, lists and dicts read, coded and dropped; decision
0014) a query process kept ~120 MB of freed heap beside the snapshot itself, most of it
in the build thread's own arena. `malloc_trim(0)` returns the free pages of every arena
to the system. Elsewhere (musl, macOS) this does nothing.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, looked up among the symbols the process has loaded (no
    `ctypes.util.find_library`: it runs ldconfig in a subprocess)."""
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    return trim


def return_freed_memory() -> bool:
    """Hands the free pages of the C heap back to the system; False where the C library
    cannot (not glibc)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
