"""Text spaces that accept any Unicode string up to a length bound."""

from __future__ import annotations

from typing import Any

from gymnasium import spaces

MAX_TEXT_CHARS = 200_000
"""Default bound on action and observation length (``check_env`` samples up to it)."""


class UnicodeText(spaces.Text):
    """A :class:`gymnasium.spaces.Text` whose ``contains`` accepts any ``str`` in the length range.

    Gymnasium's ``Text`` only admits its charset (62 alphanumerics by default, no space);
    agent completions and user messages are arbitrary Unicode. Sampling still draws from the
    charset, which is a subset.

    Args:
        max_length: Longest accepted string.
        min_length: Shortest accepted string.
    """

    def __init__(
        self, max_length: int = MAX_TEXT_CHARS, min_length: int = 0, **kwargs: Any
    ) -> None:
        super().__init__(max_length=max_length, min_length=min_length, **kwargs)

    def contains(self, x: Any) -> bool:
        """Whether ``x`` is a string of acceptable length."""
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"
