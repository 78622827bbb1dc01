"""The OpenEnv app of a rods environment (the Space's entry point).

``RODS_ENV_ID`` picks the environment (default ``rods/Retail-v0``), ``RODS_TASKS`` a task
pool file. The limits are ``rods serve``'s, with the same defaults (``ServeLimits``), set by
``RODS_MAX_SESSIONS``, ``RODS_IDLE_TIMEOUT_S``, ``RODS_RECLAIM_IDLE_S``,
``RODS_MAX_BODY_BYTES``, ``RODS_MAX_FRAME_BYTES`` and ``RODS_MAX_DEPTH``. The same server as
``rods serve``; ``python -m server.app`` also gives uvicorn the frame limit (a bare
``uvicorn server.app:app`` buffers up to uvicorn's 16 MiB before the app closes the
connection at the limit).

    python -m server.app --host 0.0.0.0 --port 8000
    uvicorn server.app:app --host 0.0.0.0 --port 8000 --ws-max-size 4194304
"""

from __future__ import annotations

import argparse
import os

import rods_env  # noqa: F401  (registers the environment ids)
from rods_agent.integrations.openenv.limits import ServeLimits, uvicorn_options
from rods_agent.integrations.openenv.server import create_rods_app

ENV_ID = os.environ.get("RODS_ENV_ID", "rods/Retail-v0")
MAKE_KWARGS = {
    "split": None,
    **({"tasks": os.environ["RODS_TASKS"]} if os.environ.get("RODS_TASKS") else {}),
}
LIMITS = ServeLimits.from_env()

app = create_rods_app(ENV_ID, MAKE_KWARGS, limits=LIMITS)


def main() -> None:
    """Serve the app with uvicorn (``uv run --project . server``)."""
    import uvicorn

    parser = argparse.ArgumentParser(description=f"serve {ENV_ID} (OpenEnv)")
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port, **uvicorn_options(LIMITS))


if __name__ == "__main__":
    main()
