"""The training configuration: YAML plus dotted overrides, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from rods_agent.experiment.config import ExperimentConfig, load_experiment
from rods_agent.training.config import (
    EXPERIMENT_KEYS,
    TrainConfig,
    config_yaml,
    describe_config,
    load_config,
)
from rods_env.errors import ConfigError

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_defaults_without_a_file():
    config = load_config()
    assert config == TrainConfig()
    assert config.grpo.clip_low == 0.2 and config.grpo.clip_high == 0.28


def test_file_then_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("mode: static\nsteps: 5\ngrpo:\n  lr: 0.001\nenv: retail\n")
    config = load_config(path, ["grpo.lr=1e-6", "steps=300", "env=[retail,airline]"])
    assert config.mode == "static"
    assert config.steps == 300
    assert config.grpo.lr == pytest.approx(1e-6)
    assert config.env == ["retail", "airline"]


def test_a_single_env_string_becomes_a_list():
    assert load_config(None, ["env=airline"]).env == ["airline"]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("grpo.lrr=1", "grpo.lrr: unknown key (did you mean 'grpo.lr'?)"),
        ("mode=fast", "mode: "),
        ("steps=-1", "steps: "),
        ("rollout.group_size=zero", "rollout.group_size: "),
        ("nonsense", "override 'nonsense' is not of the form key=value"),
    ],
)
def test_bad_keys_and_values_are_one_line_naming_them(override, message):
    with pytest.raises(ConfigError) as info:
        load_config(None, [override])
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith(message)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("mode: [unclosed\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: not a valid YAML config"):
        load_config(bad)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("42\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_config(scalar)


def test_resolved_yaml_round_trips(tmp_path):
    config = load_config(None, ["mode=filter", "grpo.kl_coef=0.1", "env=[retail,airline]"])
    path = tmp_path / "config.yaml"
    path.write_text(config_yaml(config))
    assert load_config(path) == config


def test_every_field_is_described():
    lines = describe_config()
    assert any(line.startswith("  lr: ") for line in lines)
    undocumented = [line for line in lines if line.rstrip().endswith("#")]
    assert not undocumented


def test_simulated_learner_section_is_typed():
    config = load_config(None, ["policy=simulated", "simulated.lr=0.25"])
    assert config.simulated.lr == 0.25
    with pytest.raises(ConfigError, match=r"^simulated\.lr: "):
        load_config(None, ["simulated.lr=fast"])
    with pytest.raises(ConfigError, match=r"^simulated\.lrr: unknown key"):
        load_config(None, ["simulated.lrr=1"])


def test_zone_thresholds_must_be_ordered():
    with pytest.raises(ConfigError) as info:
        load_config(None, ["data.hard=0.95"])
    assert str(info.value) == "data.hard (0.95) must be below data.mastered (0.85)"


@pytest.mark.parametrize("path", sorted((CONFIGS / "train").glob("*.yaml")), ids=lambda p: p.name)
def test_a_train_config_loads_and_rods_experiment_names_its_command(path):
    """configs/train/ holds ``rods train`` configs; ``rods experiment`` given one says so."""
    load_config(path)
    with pytest.raises(ConfigError) as info:
        load_experiment(path)
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith(f"{path} is a `rods train` config (it has ")
    assert text.endswith(f"run `rods train --config {path}`")


@pytest.mark.parametrize(
    "path", sorted((CONFIGS / "experiment").glob("*.yaml")), ids=lambda p: p.name
)
def test_an_experiment_config_loads_and_rods_train_names_its_command(path):
    """configs/experiment/ holds ``rods experiment`` configs; ``rods train`` given one says so,
    overrides or not."""
    load_experiment(path)
    for overrides in ([], ["steps=3"]):
        with pytest.raises(ConfigError) as info:
            load_config(path, overrides)
        text = str(info.value)
        assert "\n" not in text
        assert text.startswith(f"{path} is a `rods experiment` config (it has ")
        assert text.endswith(f"run `rods experiment {path}`")


def test_configs_hold_only_the_two_kinds_and_the_experiment_keys_are_the_experiments_own():
    assert sorted(p.name for p in CONFIGS.iterdir()) == ["experiment", "train"]
    assert set(ExperimentConfig.model_fields) - set(TrainConfig.model_fields) == EXPERIMENT_KEYS


def test_a_bad_key_in_a_train_config_is_still_named(tmp_path):
    """Only the other kind's own keys turn the error into the kind's line."""
    path = tmp_path / "c.yaml"
    path.write_text("steps: 3\nwarm_start:\n  max_epochs: 2\n")
    with pytest.raises(ConfigError, match=r"warm_start\.max_epochs: unknown key"):
        load_config(path)
    with pytest.raises(ConfigError, match="is a `rods train` config"):
        load_experiment(path)
