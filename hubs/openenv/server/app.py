"""The OpenEnv app of a rods environment (the Space's entry point).

``RODS_ENV_ID`` picks the environment (default ``rods/Retail-v0``); ``RODS_TASKS`` a task
pool file, ``RODS_MAX_SESSIONS`` the concurrent sessions. The same server as ``rods serve``.

    uvicorn server.app:app --host 0.0.0.0 --port 8000
    python -m server.app --port 8000
"""

from __future__ import annotations

import argparse
import os

import rods_env  # noqa: F401  (registers the environment ids)
from rods_agent.integrations.openenv.server import create_rods_app

ENV_ID = os.environ.get("RODS_ENV_ID", "rods/Retail-v0")
MAKE_KWARGS = {
    "split": None,
    **({"tasks": os.environ["RODS_TASKS"]} if os.environ.get("RODS_TASKS") else {}),
}

app = create_rods_app(
    ENV_ID, MAKE_KWARGS, max_sessions=int(os.environ.get("RODS_MAX_SESSIONS", "64"))
)


def main() -> None:
    """Serve the app with uvicorn (``uv run --project . server``)."""
    import uvicorn

    parser = argparse.ArgumentParser(description=f"serve {ENV_ID} (OpenEnv)")
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
