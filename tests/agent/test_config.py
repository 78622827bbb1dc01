"""The training configuration: YAML plus dotted overrides, one-line errors."""

from __future__ import annotations

import pytest

from rods_agent.config import TrainConfig, config_yaml, describe_config, load_config
from rods_env.errors import ConfigError


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
