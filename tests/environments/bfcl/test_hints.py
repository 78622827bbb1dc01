"""BFCL's own actionable hints (environments/bfcl/hints.py), per kind, on the errors BFCL's
classes give, and in the environment (``BFCLEnv(actionable_hints=True)``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rods_env.hints import HINT_HEAD

FS = frozenset(
    {"cat", "cd", "cp", "echo", "find", "ls", "mkdir", "mv", "pwd", "rm", "rmdir", "touch", "wc"}
)


@pytest.fixture(scope="module")
def bfcl_hints(bfcl):
    from environments.bfcl.hints import bfcl_hints

    return bfcl_hints


def _one(found: list[Any]) -> tuple[str, str]:
    assert len(found) == 1, found
    return found[0].kind, found[0].text


@pytest.mark.parametrize(
    ("name", "arguments", "text", "kind", "needle"),
    [
        ("cd", {"folder": "a/b"}, '{"error": "cd: a/b: Unsupported path."}', "bfcl_path",
         "cd(folder='a'), cd(folder='b')"),
        ("cat", {"file_name": "a/b.txt"}, "{\"error\": \"cat: 'a/b.txt': Invalid character\"}",
         "bfcl_path", "cd(folder='a') first, then call cat with file_name='b.txt'"),
        ("mv", {"source": "x", "destination": "d/e"}, '{"error": "mv: path not allowed"}',
         "bfcl_path", "one name in the current directory"),
        ("cat", {"file_name": "r.txt"}, "{\"error\": \"cat: 'r.txt': No such file or directory\"}",
         "bfcl_not_here", "ls() lists the current directory"),
        ("echo", {"content": "hi", "file_name": "n.txt"},
         "{\"error\": \"echo: cannot write to 'n.txt': No such file\"}", "bfcl_create_first",
         "touch(file_name=...) first"),
        ("cat", {"file_name": "docs"}, "{\"error\": \"cat: 'docs': Is a directory\"}",
         "bfcl_is_directory", "cd(folder='docs')"),
        ("mkdir", {"dir_name": "t"}, "{\"error\": \"mkdir: cannot create directory 't': File exists\"}",
         "bfcl_exists", "already exists"),
        ("rmdir", {"dir_name": "t"}, "{\"error\": \"rmdir: cannot remove 't': Directory not empty\"}",
         "bfcl_not_empty", "remove what is inside"),
        ("touch", {"file_name": "a?b"}, "{\"error\": \"touch: cannot touch 'a?b': Invalid character\"}",
         "bfcl_name", "cannot contain"),
        ("cd", {"folder": ".."}, '{"error": "Current directory is already the root. Cannot go back."}',
         "bfcl_root", "at the root"),
    ],
)  # fmt: skip
def test_file_system_hints(bfcl_hints, name, arguments, text, kind, needle) -> None:
    got_kind, got = _one(bfcl_hints(name, arguments, text, FS, "GorillaFileSystem"))
    assert got_kind == kind and needle in got, got


def test_login_first_names_the_class_login(bfcl_hints) -> None:
    text = '{"error": "User not authenticated. Please authenticate before posting."}'
    shown = {"post_tweet", "authenticate_twitter", "ticket_login"}
    kind, got = _one(bfcl_hints("post_tweet", {"content": "x"}, text, shown, "TwitterAPI"))
    assert kind == "login_first" and "authenticate_twitter" in got and "ticket_login" not in got
    kind, got = _one(
        bfcl_hints(
            "book_flight", {}, '{"error": "Token expired"}', {"authenticate_travel"}, "TravelAPI"
        )
    )
    assert kind == "login_first" and "access_token" in got


@pytest.mark.parametrize(
    ("name", "text", "shown", "needle"),
    [
        ("estimate_distance", '{"error": "distance not found in database."}',
         {"get_zipcode_based_on_city"}, "get_zipcode_based_on_city()"),
        ("get_outside_temperature_from_weather_com", '{"error": 404}',
         {"get_outside_temperature_from_google"}, "get_outside_temperature_from_google()"),
        ("get_flight_cost", "Error during execution: No available route for the given airports.",
         {"list_all_airports", "get_nearest_airport_by_city"}, "list_all_airports()"),
        ("startEngine", '{"error": "Brake pedal needs to be pressed when starting the engine."}',
         {"pressBrakePedal"}, "pressBrakePedal()"),
        ("setCruiseControl", '{"error": "Start the engine before activating the cruise control."}',
         {"startEngine"}, "startEngine()"),
    ],
)  # fmt: skip
def test_environment_tuning_advice(bfcl_hints, name, text, shown, needle) -> None:
    kind, got = _one(bfcl_hints(name, {}, text, shown, None))
    assert kind == "bfcl_advice" and needle in got
    assert bfcl_hints(name, {}, text, set(), None) == []  # only shown functions are named


def _call(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def test_in_the_environment_failed_calls_get_hints_and_good_calls_none(bfcl) -> None:
    from environments.bfcl.env import BFCLEnv

    env = BFCLEnv("base", actionable_hints=True)
    env.reset(options={"task": "multi_turn_base_0"})
    obs, *_, info = env.step(_call("ls", {}))
    assert HINT_HEAD not in obs and info["tool_calls"][0]["hints"] == []
    obs, *_, info = env.step(_call("cd", {"folder": "document/temp"}))
    assert info["tool_calls"][0]["hints"] == ["bfcl_path"]
    assert env.results[-1] == obs.split("\n" + HINT_HEAD)[0]  # the checker's result is BFCL's
    obs, *_, info = env.step(_call("cat", {}))
    assert info["tool_calls"][0]["hints"] == ["missing_argument"] and "file_name" in obs


@pytest.mark.parametrize("holdout", ["bfcl", "strict"])
def test_a_held_out_function_is_said_unavailable(bfcl, holdout) -> None:
    from environments.bfcl.env import BFCLEnv

    env = BFCLEnv("miss_func", holdout=holdout, actionable_hints=True)
    env.reset(options={"task": "multi_turn_miss_func_1"})  # mv is revealed at turn 2
    obs, *_, info = env.step(_call("mv", {"source": "a", "destination": "b"}))
    assert info["tool_calls"][0]["hints"] == ["withheld_function"]
    assert "'mv' is not available in this turn" in obs
