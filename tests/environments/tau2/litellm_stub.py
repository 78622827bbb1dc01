"""A stand-in ``litellm`` so that τ²-bench's evaluator module imports without it.

``tau2.evaluator.evaluator`` imports its NL-assertion judge, which imports litellm at module
level; ``evaluate_simulation(..., EvaluationType.ALL)`` never calls it (no task of the three
domains has NL_ASSERTION in its reward basis). Every function here raises, so a verdict
that reached an LLM could not come back.
"""

from __future__ import annotations

import sys
import types
from typing import Any, NoReturn


def _refuse(*args: Any, **kwargs: Any) -> NoReturn:
    raise RuntimeError("litellm is stubbed out in rods' tests: no LLM may be called")


class _Refusing:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _refuse()


def install() -> None:
    """Put the stand-in in ``sys.modules`` (a real litellm, if imported, is kept)."""
    if "litellm" in sys.modules:
        return
    litellm = types.ModuleType("litellm")
    litellm.completion = _refuse  # type: ignore[attr-defined]
    litellm.completion_cost = _refuse  # type: ignore[attr-defined]
    litellm.disable_cache = lambda: None  # type: ignore[attr-defined]
    litellm.enable_cache = _refuse  # type: ignore[attr-defined]
    caching = types.ModuleType("litellm.caching")
    caching_caching = types.ModuleType("litellm.caching.caching")
    caching_caching.Cache = _Refusing  # type: ignore[attr-defined]
    main = types.ModuleType("litellm.main")
    main.ModelResponse = _Refusing  # type: ignore[attr-defined]
    main.Usage = _Refusing  # type: ignore[attr-defined]
    litellm.caching = caching  # type: ignore[attr-defined]
    caching.caching = caching_caching  # type: ignore[attr-defined]
    litellm.main = main  # type: ignore[attr-defined]
    sys.modules.update(
        {
            "litellm": litellm,
            "litellm.caching": caching,
            "litellm.caching.caching": caching_caching,
            "litellm.main": main,
        }
    )
