"""The ``rods`` entry point: help, one-line errors, missing optional dependencies."""

from __future__ import annotations

import types

import pytest

from rods_agent import cli


def test_no_command_prints_help(capsys):
    assert cli.main([]) == 2
    assert "demo" in capsys.readouterr().out


def test_demo_runs_on_a_few_tasks(capsys):
    assert cli.main(["demo", "--env", "rods/Retail-v0", "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert "oracle" in out and "1.000" in out


def test_bad_config_is_a_one_line_error(capsys):
    assert cli.main(["demo", "--env", "rods/Nope-v0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unknown environment 'rods/Nope-v0'" in err


def test_missing_optional_dependency_is_a_one_line_error(monkeypatch, capsys):
    def run(args):
        raise ModuleNotFoundError("No module named 'torch'", name="torch")

    real = cli.importlib.import_module

    def fake_import(name):
        if name == "rods_agent.commands.demo":
            return types.SimpleNamespace(run=run, add_arguments=real(name).add_arguments)
        return real(name)

    monkeypatch.setattr(cli.importlib, "import_module", fake_import)
    assert cli.main(["demo"]) == 2
    err = capsys.readouterr().err
    assert "optional dependency 'torch'" in err and "Traceback" not in err


def test_a_bug_in_rods_itself_is_not_hidden(monkeypatch):
    def run(args):
        raise ModuleNotFoundError("No module named 'rods_env.nope'", name="rods_env.nope")

    real = cli.importlib.import_module
    monkeypatch.setattr(
        cli.importlib,
        "import_module",
        lambda n: (
            types.SimpleNamespace(run=run, add_arguments=real(n).add_arguments)
            if n == "rods_agent.commands.demo"
            else real(n)
        ),
    )
    with pytest.raises(ModuleNotFoundError):
        cli.main(["demo"])
