"""No state between episodes: many interleaved episodes of polluting and victim tasks, each
verdict and each observation equal to the same episode's alone in a fresh process.

The polluters do what leaked in the past: a tweet posted without ``mentions`` and then
mentioned (BFCL's ``post_tweet`` keeps its one default list, which ``mention`` extends),
an unrequested mention, insurance bought on a long-context card (TravelAPI's module-level
card dicts). The victims are tasks that post tweets without mentions or book on
long-context cards, their gold or their quirk-triggering variants (whose official verdict
depends on sharing within the episode, and must not depend on anything else).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from environments.bfcl.env import BFCLEnv
from environments.bfcl.tasks import get_task
from tests.environments.bfcl.fidelity import Call, Case, action

pytestmark = pytest.mark.usefixtures("bfcl")

ROOT = Path(__file__).resolve().parents[3]


def _mention(tweet_id: int) -> Call:
    return Call("mention", {"tweet_id": tweet_id, "mentioned_usernames": ["@eve", "@mallory"]})


def _insurance(token: str, card: str) -> Call:
    return Call(
        "purchase_insurance",
        {
            "access_token": token,
            "insurance_type": "comprehensive",
            "booking_id": "booking_901",
            "insurance_cost": 400.0,
            "card_id": card,
        },
    )


def _edited(turns: list[list[Call]], spec: str) -> None:
    if spec == "multi_turn_base_170/mention":  # the tweet of turn 4, mentioned in turn 5
        turns[5].insert(0, _mention(0))
    elif spec == "multi_turn_base_58/post_and_mention":  # its own tweet, then a mention
        turns[3].append(_mention(0))
        turns[3].append(Call("post_tweet", {"content": "And another one"}))
    elif spec == "multi_turn_base_0/post_and_mention":
        login = {"username": "analyst_pro", "password": "Kj8#mP9$vL2"}
        turns[0].insert(0, Call("authenticate_twitter", login))
        turns[0].append(Call("post_tweet", {"content": "first"}))  # its id is 3
        turns[0].append(_mention(3))
    elif spec.endswith("/insurance"):
        token = "abc123xyz" if "151" in spec else "abc123token"
        turns[-1].append(_insurance(token, "1000000790000000"))
        turns[-1].append(_insurance(token, "1234567812345678"))


SPECS = (
    "multi_turn_base_58/gold",
    "multi_turn_base_170/gold",
    "multi_turn_long_context_150/gold",
    "multi_turn_long_context_151/gold",
    "multi_turn_base_170/mention",
    "multi_turn_base_58/post_and_mention",
    "multi_turn_base_0/post_and_mention",
    "multi_turn_long_context_150/insurance",
    "multi_turn_long_context_151/insurance",
)
"""Episodes: ``task id/what the agent does``."""


def case(spec: str) -> Case:
    """The trajectory of ``spec``: the gold, edited (a turn's calls in one step)."""
    task = get_task(spec.split("/")[0])
    turns = [[Call(c.name, dict(c.arguments)) for c in calls] for calls in task.gold]
    _edited(turns, spec)
    return Case(task, [[calls] if calls else [] for calls in turns], "message", [spec])


def summary(info: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on other episodes: both verdicts, their differences, and a
    digest of everything the agent saw."""
    seen = json.dumps([m.get("content") for m in info["messages"]], sort_keys=True)
    return {
        "verdicts": info["verdicts"],
        "success": info["success"],
        "progress": info["progress"],
        "observations": hashlib.sha256(seen.encode()).hexdigest(),
    }


class _Runner:
    """One episode played one step at a time (so several can interleave)."""

    def __init__(self, env: BFCLEnv, spec: str) -> None:
        self.env, self.spec, self.case = env, spec, case(spec)
        _, self.info = env.reset(options={"task": self.case.task})
        self.step_in_turn = 0
        self.done = False

    def advance(self) -> None:
        steps = self.case.turns[int(self.info["turn"])]
        if self.step_in_turn < len(steps):
            act = action(steps[self.step_in_turn], self.case.form)
            self.step_in_turn += 1
        else:
            act, self.step_in_turn = "Done.", 0
        _, _, terminated, truncated, self.info = self.env.step(act)
        self.done = terminated or truncated


def alone(spec: str) -> dict[str, Any]:
    """The summary of ``spec`` played alone (in this process, on a fresh environment)."""
    runner = _Runner(BFCLEnv(), spec)
    while not runner.done:
        runner.advance()
    return summary(runner.info)


def _alone_in_fresh_processes(specs: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    code = (
        "import json, sys\n"
        "from tests.environments.bfcl.test_isolation import alone\n"
        "print(json.dumps(alone(sys.argv[1])))\n"
    )
    procs = {
        spec: subprocess.Popen(
            [sys.executable, "-c", code, spec],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for spec in specs
    }
    out = {}
    for spec, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, stderr[-2000:]
        out[spec] = json.loads(stdout)
    return out


@pytest.mark.slow
def test_interleaved_episodes_get_the_verdicts_they_get_alone_in_a_fresh_process():
    from tests.environments.bfcl.official import _pristine_long_context

    expected = _alone_in_fresh_processes(SPECS)
    # each spec's verdicts differ where a quirk is in play (else the test would be weak)
    assert any(e["verdicts"]["differences"] for e in expected.values())
    assert all(e["success"] for s, e in expected.items() if s.endswith("/gold"))

    envs = [BFCLEnv() for _ in range(4)]
    queue = [SPECS[(7 * i) % len(SPECS)] for i in range(4 * len(SPECS))]  # each 4 times
    live: list[_Runner] = []
    seen: list[tuple[str, dict[str, Any]]] = []
    while queue or live:
        for env in envs:
            if queue and not any(r.env is env for r in live):
                live.append(_Runner(env, queue.pop(0)))
        for runner in list(live):  # one step each, round robin: as batched rollouts run
            runner.advance()
            if runner.done:
                seen.append((runner.spec, summary(runner.info)))
                live.remove(runner)
    assert len(seen) == 4 * len(SPECS)
    for spec, got in seen:
        assert got == json.loads(json.dumps(expected[spec])), spec

    # nothing of BFCL's own module state was changed by any episode
    from bfcl_eval.eval_checker.multi_turn_eval.func_source_code import long_context
    from bfcl_eval.eval_checker.multi_turn_eval.func_source_code.posting_api import TwitterAPI

    assert TwitterAPI.post_tweet.__defaults__ == ([], [])
    for name, pristine in _pristine_long_context().items():
        assert getattr(long_context, name) == pristine, name


def test_the_gold_cache_is_immutable_and_unchanged_by_episodes():
    """Gold states are frozen (a write raises) and equal a fresh replay after polluting
    episodes ran beside them."""
    from environments.bfcl.apis import GoldCache, replay

    cache = GoldCache()
    task = get_task("multi_turn_base_170")
    env = BFCLEnv(gold_cache=cache)
    alone_before = alone("multi_turn_base_170/gold")
    for spec in ("multi_turn_base_170/mention", "multi_turn_base_0/post_and_mention") * 3:
        runner = _Runner(env, spec)
        while not runner.done:
            runner.advance()
    runner = _Runner(env, "multi_turn_base_170/gold")
    while not runner.done:
        runner.advance()
    assert summary(runner.info) == alone_before
    cached = env.gold
    assert pickle.dumps(cached) == pickle.dumps(replay(task.scenario, task.gold))
    state = cached.turns[4].state
    assert state is not None
    tweets = state["TwitterAPI"]["tweets"]
    with pytest.raises(TypeError):
        tweets[max(tweets)]["mentions"].append("@eve")  # type: ignore[union-attr]


def test_the_weather_call_leaves_bfcls_module_dict_as_its_source_writes_it():
    """Long-context VehicleControlAPI writes ``outsideTemperature`` into the module-level
    weather dict it returns; a rods world puts the dict back after the call, and the result
    text still carries the temperature (BFCL's text)."""
    from bfcl_eval.eval_checker.multi_turn_eval.func_source_code import long_context

    from environments.bfcl.apis import new_world
    from tests.environments.bfcl.official import _pristine_long_context, restore_bfcl_module_state

    restore_bfcl_module_state()  # whatever BFCL's own executor left in earlier tests
    pristine = _pristine_long_context()["LONG_WEATHER_EXTENSION"]
    task = get_task("multi_turn_long_context_91")
    world = new_world(task.scenario)
    name = "get_outside_temperature_from_google"
    texts = [world.call(name, {}, {name}).text for _ in range(2)]
    assert all('"outsideTemperature"' in text for text in texts)
    weather = long_context.LONG_WEATHER_EXTENSION
    assert weather == pristine
    assert "outsideTemperature" not in weather
