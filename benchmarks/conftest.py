"""Speed suites: run with ``pytest benchmarks --benchmark-only`` (pytest-benchmark).

Torch threads are pinned to one: with the other core busy, two threads run 5-10x slower.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
