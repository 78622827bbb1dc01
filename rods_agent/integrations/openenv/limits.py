"""The limits of a served rods environment: one source for ``rods serve`` and the hub app.

:class:`ServeLimits` holds every bound the server applies (sessions, idle time, body and
frame size, JSON nesting); ``rods serve`` takes its defaults for its flags and the hub app
(``hubs/openenv/server/app.py``) reads the same fields from ``RODS_*`` environment variables
(:meth:`ServeLimits.from_env`), so both serve with the same limits unless told otherwise.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from rods_env.errors import ConfigError

MAX_ID_CHARS = 256
"""The longest task id, episode id, tool name or session id a request may carry."""


@dataclasses.dataclass(frozen=True)
class ServeLimits:
    """What one server allows (docs/hubs.md, "Limits").

    Attributes:
        max_sessions: Sessions at once (WebSocket or HTTP), each its own episode.
        idle_timeout_s: A session with no message for this long is closed and its slot
            freed (a WebSocket is closed with code 1001 and the reason).
        reclaim_idle_s: When every slot is taken, a new client takes the slot of the
            session idle the longest, if it has been idle at least this long; so a client
            that holds slots without using them cannot keep others out.
        max_body_bytes: The largest HTTP request body (bigger: 413).
        max_frame_bytes: The largest WebSocket message (bigger: the connection closes with
            1009, as the WebSocket protocol says).
        max_depth: The deepest JSON nesting of a request or message (deeper: an error reply).
    """

    max_sessions: int = 64
    idle_timeout_s: float = 300.0
    reclaim_idle_s: float = 30.0
    max_body_bytes: int = 4 * 1024 * 1024
    max_frame_bytes: int = 4 * 1024 * 1024
    max_depth: int = 64

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigError(f"{field.name} must be a positive number, got {value!r}")
        if self.max_sessions != int(self.max_sessions):
            raise ConfigError(f"max_sessions must be a whole number, got {self.max_sessions}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ServeLimits:
        """The limits named by ``RODS_MAX_SESSIONS``, ``RODS_IDLE_TIMEOUT_S``,
        ``RODS_RECLAIM_IDLE_S``, ``RODS_MAX_BODY_BYTES``, ``RODS_MAX_FRAME_BYTES`` and
        ``RODS_MAX_DEPTH`` (the hub app's settings); the defaults for those unset.

        Raises:
            ConfigError: a value that is not a positive number.
        """
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            raw = environ.get(f"RODS_{field.name.upper()}")
            if raw is None or not raw.strip():
                continue
            kind = float if field.type in ("float", float) else int
            try:
                values[field.name] = kind(raw)
            except ValueError:
                raise ConfigError(
                    f"RODS_{field.name.upper()} must be a number, got {raw[:40]!r}"
                ) from None
        return cls(**values)


def uvicorn_options(limits: ServeLimits) -> dict[str, Any]:
    """uvicorn's own settings for ``limits`` (the transport refuses a bigger message before
    it is buffered)."""
    return {"ws_max_size": limits.max_frame_bytes}
