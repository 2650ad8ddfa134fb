"""glibc's malloc, set for a process that runs for months.

Measured with the process soak (docs/reliability.md): Python's own heap stays flat from cycle to
cycle, but with glibc's defaults the resident memory of `desched run` crept up by about 0.1 MiB a
cycle. Two defaults cause it. A cycle runs in a worker thread, and each thread may get its own
malloc arena, whose freed pages are rarely given back. And after the first large buffer (a list
page, a watch event of a big object) is freed, glibc raises its mmap threshold, so later buffers
of that size come from the heap and fragment it. Two arenas and a fixed threshold keep it flat.

A value the operator set in the environment (MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_) wins.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

# mallopt(3) parameters.
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8

ARENAS = 2
MMAP_THRESHOLD = 128 * 1024  # glibc's initial value, no longer raised on its own

_SETTINGS = (("MALLOC_ARENA_MAX", _M_ARENA_MAX, ARENAS),
             ("MALLOC_MMAP_THRESHOLD_", _M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def tune_allocator() -> dict[str, int]:
    """Apply the settings above where the environment leaves them unset; what was applied
    (empty where the C library is not glibc, e.g. musl)."""
    libc = LIBC
    if libc is None:
        return {}
    applied: dict[str, int] = {}
    for env, param, value in _SETTINGS:
        if env not in os.environ and libc.mallopt(param, value) == 1:
            applied[env] = value
    return applied


def release_free_memory() -> bool:
    """Give the pages malloc holds free back to the system (malloc_trim), after a cycle has
    dropped its snapshot; False where the C library has no malloc_trim."""
    libc = LIBC
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


def glibc() -> ctypes.CDLL | None:
    """The process's C library when it is glibc (the only one with mallopt's parameters and
    malloc_trim), else None (musl, say)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.gnu_get_libc_version  # noqa: B018  # only glibc has it
    except (OSError, AttributeError):
        return None
    return libc


LIBC = glibc()
