"""Full garbage collections deferred while synthesis works.

CPython's cyclic collector has three generations. Young collections (generations 0 and 1)
look at recently made containers only; a *full* collection (generation 2) traverses every
container alive in the process, and runs once ten middle-generation collections have passed
and the objects promoted since the last full one exceed a quarter of those that survived it.
A synthesizing process holds hundreds of thousands of long-lived containers (seed worlds,
gold replays, records and texts kept by identity), so each full collection costs a few
tenths of a CPU-second: in a bfcl-api synthesis run (``benchmarks/test_synthesis.py``) the
three of them took 0.7 to 1.2 of 5.1 to 5.5 CPU-seconds (issue 28; docs/synthesis.md).

:func:`no_full_collections` raises the third threshold for as long as any thread is inside
it; young collections go on, so the cycles a candidate leaves behind (a file system's
parent links) are found as before, and only those that outlive two young collections wait
for the next full collection after the pause. :func:`paused` applies it to each step of
a generator, never while its consumer runs between two items.
"""

from __future__ import annotations

import gc
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from threading import Lock
from typing import TypeVar

T = TypeVar("T")

NEVER = 1 << 30
"""The third threshold during a pause: more middle-generation collections than a run makes."""

_LOCK = Lock()
_depth = 0
_saved = 0


@contextmanager
def no_full_collections() -> Iterator[None]:
    """Defer full collections until the last thread inside leaves (see the module
    docstring). The third threshold is restored then; the first two are left as they are
    (a change to them made meanwhile stays)."""
    global _depth, _saved
    with _LOCK:
        if _depth == 0:
            first, second, _saved = gc.get_threshold()
            gc.set_threshold(first, second, NEVER)
        _depth += 1
    try:
        yield
    finally:
        with _LOCK:
            _depth -= 1
            if _depth == 0:
                first, second, _ = gc.get_threshold()
                gc.set_threshold(first, second, _saved)


def paused(items: Iterator[T]) -> Generator[T, None, None]:
    """``items``, each one made under :func:`no_full_collections` (the consumer's code
    between two items runs without the pause)."""
    try:
        while True:
            with no_full_collections():
                try:
                    item = next(items)
                except StopIteration:
                    return
            yield item
    finally:
        close = getattr(items, "close", None)
        if close is not None:
            close()
