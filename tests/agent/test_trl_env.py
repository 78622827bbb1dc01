"""rods environments as TRL environments: generated tools, schemas, rewards and parity."""

from __future__ import annotations

import dataclasses
import inspect
import json

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rods_env
from rods_env import OracleAgent, load_domain
from rods_env.errors import ConfigError, RodsError
from rods_env.parsing import parse_action
from rods_env.tools import Toolkit, tool

pytest.importorskip("transformers")
from transformers.utils import get_json_schema

from rods_agent.integrations.trl import environment_factory
from rods_agent.integrations.trl.env import (
    AGENT_STOPPED,
    ENDED,
    SEND_MESSAGE,
)

ENV_IDS = ["rods/Retail-v0", "rods/Airline-v0"]
MAX_STEPS = 200


def trl_tools(env_class: type) -> dict[str, object]:
    """The methods TRL exposes as tools: public functions of the class but reset/get_reward."""
    return {
        name: fn
        for name, fn in inspect.getmembers(env_class, predicate=inspect.isfunction)
        if not name.startswith("_") and name not in ("reset", "get_reward")
    }


def oracle_transcript(env_id: str, task) -> tuple[list, list[str], dict]:
    """The oracle's actions on ``task`` through ``gymnasium.make``, the observations, final info."""
    env = gym.make(env_id, split=None, max_steps=MAX_STEPS).unwrapped
    agent = OracleAgent(task, env.domain.toolkit.write_names())
    obs, info = env.reset(options={"task": task})
    actions, observations = [], [obs]
    done = False
    while not done:
        action = agent.act(obs, info)
        obs, _, terminated, truncated, info = env.step(action)
        actions.append(action)
        observations.append(obs)
        done = terminated or truncated
    return actions, observations, info


def replay(env, actions) -> list[str]:
    """Feed gym actions to a TRL environment the way TRL's loop would: one call per tool."""
    observations = []
    for action in actions:
        parsed = parse_action(action)
        assert parsed.error is None
        if parsed.calls:
            for call in parsed.calls:
                observations.append(getattr(env, call.name)(**call.arguments))
        else:
            observations.append(env.send_message_to_user(parsed.content))
    return observations


# -- the generated class ------------------------------------------------------------------
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_trl_sees_one_tool_per_domain_tool_plus_the_user_channel(env_id):
    domain = load_domain(env_id)
    tools = trl_tools(environment_factory(env_id))
    assert set(tools) == set(domain.toolkit.names()) | {SEND_MESSAGE}


def _transformers_form(prop: dict, defs: dict) -> dict:
    """A JSON-schema property as ``get_json_schema`` can state it (see docs/scale-out.md)."""
    if "$ref" in prop:
        return {"type": "object"}
    out = {k: v for k, v in prop.items() if k not in ("default", "anyOf", "items")}
    if "items" in prop:
        out["items"] = _transformers_form(prop["items"], defs)
    if "anyOf" in prop:
        kinds = [s for s in prop["anyOf"] if s != {"type": "null"}]
        assert len(kinds) == 1, prop
        out.update(_transformers_form(kinds[0], defs))
        if len(kinds) < len(prop["anyOf"]):
            out["nullable"] = True
    return out


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_the_schema_trl_derives_is_the_one_the_env_shows(env_id):
    env = gym.make(env_id)
    _, info = env.reset(seed=0)
    shown = {s["function"]["name"]: s for s in info["tools"]}
    instance = environment_factory(env_id)()
    exact = 0
    for name, schema in shown.items():
        derived = get_json_schema(getattr(instance, name))
        fn, params = schema["function"], schema["function"]["parameters"]
        defs = params.get("$defs", {})
        # what get_json_schema cannot say: closed objects, an empty required list, nested models
        expected = {
            "type": "function",
            "function": {
                "name": fn["name"],
                "description": fn["description"],
                "parameters": {
                    "type": "object",
                    "properties": {
                        p: _transformers_form(v, defs) for p, v in params["properties"].items()
                    },
                    **({"required": params["required"]} if params["required"] else {}),
                },
            },
        }
        assert derived == expected, name
        assert params["additionalProperties"] is False
        if not defs and all("anyOf" not in v for v in params["properties"].values()):
            exact += 1
    # every retail tool is stated exactly; airline loses only nested models and null defaults
    if env_id == "rods/Retail-v0":
        assert exact == len(shown)
    else:
        assert exact >= len(shown) - 5


def test_generated_methods_keep_the_toolkit_signature():
    domain = load_domain("airline")
    env_class = environment_factory("rods/Airline-v0")
    for name, spec in domain.toolkit.specs().items():
        ours = inspect.signature(getattr(env_class, name))
        theirs = inspect.signature(spec.method)
        assert list(ours.parameters) == list(theirs.parameters), name
        for p in theirs.parameters.values():
            assert ours.parameters[p.name].default == p.default


def test_a_domain_tool_named_like_a_trl_hook_is_refused():
    class Clash(Toolkit):
        @tool
        def reset(self) -> str:
            """Reset everything."""
            return ""

    domain = dataclasses.replace(load_domain("retail"), toolkit=Clash)
    with pytest.raises(ConfigError, match="reset"):
        environment_factory(domain)


def test_bad_arguments_of_the_factory_are_one_line_errors():
    with pytest.raises(ConfigError, match="reward"):
        environment_factory("rods/Retail-v0", reward="accuracy")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_steps"):
        environment_factory("rods/Retail-v0", max_steps=0)


def test_reset_names_a_missing_or_unknown_task():
    env = environment_factory("rods/Retail-v0")()
    with pytest.raises(ConfigError, match="task_id"):
        env.reset(prompt=[])
    with pytest.raises(ConfigError, match="unknown task id 'nope'"):
        env.reset(task_id="nope")
    with pytest.raises(RodsError, match="reset"):
        env.get_reward()


# -- rewards ---------------------------------------------------------------------------------
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_oracle_reward_through_trl_equals_gymnasium_on_every_seed_task(env_id):
    tasks = load_domain(env_id).seed_tasks()
    assert len(tasks) == 200
    progress_env = environment_factory(env_id, max_steps=MAX_STEPS)()
    success_env = environment_factory(env_id, max_steps=MAX_STEPS, reward="success")()
    for task in tasks:
        actions, observations, info = oracle_transcript(env_id, task)
        for env, expected in ((progress_env, info["progress"]), (success_env, info["success"])):
            first = env.reset(task_id=task.id, prompt=[])
            assert [first, *replay(env, actions)] == observations, task.id
            assert env.get_reward() == float(expected), task.id
            assert env.info["turn_results"] == info["turn_results"]
        assert info["progress"] == 1.0 and info["success"], task.id


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_doing_nothing_earns_nothing(env_id):
    env = environment_factory(env_id)()
    for task in load_domain(env_id).seed_tasks()[:50]:
        env.reset(task_id=task.id)
        assert env.get_reward() == 0.0, task.id
        assert env.info["termination"] == AGENT_STOPPED


def test_a_final_answer_without_the_user_tool_is_not_delivered():
    """TRL's loop ends on a completion without a tool call: the customer never reads it."""
    domain = load_domain("retail")
    task = next(t for t in domain.seed_tasks() if t.turns[-1].outputs and len(t.turns) == 1)
    actions, _, info = oracle_transcript("rods/Retail-v0", task)
    assert info["progress"] == 1.0
    env = environment_factory("rods/Retail-v0")()
    env.reset(task_id=task.id)
    replay(env, actions[:-1])  # the closing message that states the outputs is left out
    assert env.get_reward() == 0.0


def test_after_the_end_tools_change_nothing_and_the_reward_is_stable():
    domain = load_domain("retail")
    task = domain.seed_tasks("train")[0]
    actions, _, info = oracle_transcript("rods/Retail-v0", task)
    env = environment_factory("rods/Retail-v0")()
    env.reset(task_id=task.id)
    replay(env, actions)
    reward = env.get_reward()
    write = next(c for t in task.turns for c in t.calls if c.name in domain.toolkit.write_names())
    assert getattr(env, write.name)(**write.arguments) == ENDED
    assert env.send_message_to_user("one more thing") == ENDED
    assert env.get_reward() == reward == info["progress"]


def test_the_user_tool_answers_a_non_string_with_an_error():
    env = environment_factory("rods/Retail-v0")()
    env.reset(task_id=load_domain("retail").seed_tasks()[0].id)
    assert env.send_message_to_user(42).startswith("Error:")  # type: ignore[arg-type]


# -- parity for any agent, not only the oracle ---------------------------------------------------
_ACTIONS = st.lists(
    st.one_of(
        st.tuples(
            st.just("say"),
            st.sampled_from(["Hello?", "Could you tell me your email?", "yes", "All done."]),
        ),
        st.tuples(
            st.sampled_from(
                [
                    "find_user_id_by_email",
                    "get_user_details",
                    "get_order_details",
                    "cancel_pending_order",
                    "calculate",
                    "nope",
                ]
            ),
            st.dictionaries(
                st.sampled_from(["email", "user_id", "order_id", "reason", "expression", "x"]),
                st.one_of(
                    st.sampled_from(["#W0000001", "no longer needed", "1+2", ""]),
                    st.integers(-2, 2),
                ),
                max_size=3,
            ),
        ),
    ),
    max_size=12,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=_ACTIONS, index=st.integers(0, 199))
def test_any_action_sequence_gets_the_same_observations_and_reward(actions, index):
    task = load_domain("retail").seed_tasks()[index]
    gym_env = gym.make("rods/Retail-v0", split=None, max_steps=8).unwrapped
    trl_env = environment_factory("rods/Retail-v0", max_steps=8)()
    obs, info = gym_env.reset(options={"task": task})
    assert trl_env.reset(task_id=task.id) == obs
    for kind, payload in actions:
        if kind == "say":
            gym_action = payload
            trl_obs = trl_env.send_message_to_user(payload)
        else:
            gym_action = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"function": {"name": kind, "arguments": payload}}],
            }
            trl_obs = (
                getattr(trl_env, kind)(**payload)
                if kind != "nope"
                else trl_env._call_tool(kind, payload)
            )
        if info["termination"] is not None:
            assert trl_obs == ENDED
            continue
        obs, _, _, _, info = gym_env.step(gym_action)
        assert trl_obs == obs
    if info["termination"] is None:
        info = gym_env.truncate(AGENT_STOPPED)
    assert trl_env.get_reward() == info["progress"]
    assert json.dumps(trl_env.info["turn_results"]) == json.dumps(info["turn_results"])


def test_rods_env_ids_cover_the_tested_ones():
    assert set(ENV_IDS) <= set(rods_env.ENV_IDS)


# -- every kind of id: an own domain, BFCL, τ²-bench -------------------------------------------
ANY_KINDS = [
    "rods/Retail-v0",
    "rods/BFCL-API-v0",
    "rods/BFCL-MultiTurn-Base-v0",
    "rods/BFCL-Paper-v0",
    "rods/Tau2-Retail-v0",
]


def _installed(env_id: str):
    from rods_env.benchmark import BenchmarkDomain
    from rods_env.registry import load_any_domain
    from tests.requires import require

    domain = load_any_domain(env_id)
    if isinstance(domain, BenchmarkDomain):
        reason = domain.missing()
        require(reason is None, f"{env_id}: {reason}", "bash scripts/setup.sh tests")
    return domain


def _all_tools(domain) -> dict[str, dict]:
    from rods_env.benchmark import BenchmarkDomain

    schemas = (
        domain.tool_schemas() if isinstance(domain, BenchmarkDomain) else domain.toolkit.schemas()
    )
    return {s["function"]["name"]: s for s in schemas}


@pytest.mark.parametrize("env_id", ANY_KINDS)
def test_every_kind_of_id_gets_a_class_with_every_tool_it_may_show(env_id):
    domain = _installed(env_id)
    env_class = environment_factory(env_id)
    tools = _all_tools(domain)
    assert set(trl_tools(env_class)) == set(tools) | {SEND_MESSAGE}
    instance = env_class()
    for name, schema in tools.items():
        derived = get_json_schema(getattr(instance, name))["function"]
        shown = schema["function"]
        assert derived["name"] == name
        assert " ".join(derived["description"].split()) == " ".join(shown["description"].split())
        params = shown.get("parameters") or {}
        assert set(derived["parameters"]["properties"]) == set(params.get("properties") or {})
        assert set(derived["parameters"].get("required", ())) == set(params.get("required") or ())


def test_trl_states_the_user_channel_as_the_surface_does():
    from rods_env.tool_session import SEND_MESSAGE_SCHEMA

    for env_id in ("rods/Retail-v0", "rods/Airline-v0"):
        derived = get_json_schema(environment_factory(env_id)().send_message_to_user)
        derived["function"].pop("return")  # TRL's own note of the reply's type
        assert derived == SEND_MESSAGE_SCHEMA


@pytest.mark.parametrize("env_id", ANY_KINDS)
def test_every_kind_of_id_plays_the_oracle_through_trl_as_through_gymnasium(env_id):
    from tests.core.test_tool_session import oracle_episode

    domain = _installed(env_id)
    split = "train" if env_id == "rods/BFCL-Paper-v0" else "test"
    progress_env = environment_factory(env_id, max_steps=MAX_STEPS)()
    success_env = environment_factory(env_id, max_steps=MAX_STEPS, reward="success")()
    for task in domain.seed_tasks(split)[:3]:
        calls, observations, info = oracle_episode(env_id, task)
        for env, expected in ((progress_env, info["progress"]), (success_env, info["success"])):
            seen = [env.reset(task_id=task.id, prompt=[])]
            seen += [
                env.send_message_to_user(**c.arguments)
                if c.name == SEND_MESSAGE
                else getattr(env, c.name)(**c.arguments)
                for c in calls
            ]
            assert seen == observations, task.id
            assert env.get_reward() == float(expected) == 1.0, task.id
            assert env.info["termination"] == info["termination"]


@pytest.mark.parametrize("env_id", ANY_KINDS)
def test_every_kind_of_id_pays_nothing_for_doing_nothing(env_id):
    domain = _installed(env_id)
    env = environment_factory(env_id)()
    for task in domain.seed_tasks("train")[:5]:
        env.reset(task_id=task.id)
        assert env.get_reward() < 1.0, task.id
        assert env.info["termination"] == AGENT_STOPPED
        assert env.send_message_to_user("done?") == ENDED


def test_a_bfcl_tool_outside_the_tasks_classes_gets_bfcls_own_reply():
    """TRL lists every BFCL tool; a task shows only its classes' tools, and a call to
    another one is answered as through gymnasium.make."""
    from rods_env.tool_session import tool_call_action

    env_id = "rods/BFCL-MultiTurn-Base-v0"
    domain = _installed(env_id)
    every = set(_all_tools(domain))
    gym_env = gym.make(env_id, split=None)
    for task in domain.seed_tasks("test")[:20]:
        _, info = gym_env.reset(options={"task": task})
        shown = {s["function"]["name"] for s in info["tools"]}
        absent = sorted(every - shown)
        if absent:
            break
    else:
        pytest.fail("no task hides a tool")
    spec = _all_tools(domain)[absent[0]]["function"]
    arguments = {p: "x" for p in spec["parameters"].get("required", [])}
    expected = gym_env.step(tool_call_action(absent[0], arguments))[0]
    trl_env = environment_factory(env_id)()
    trl_env.reset(task_id=task.id)
    assert getattr(trl_env, absent[0])(**arguments) == expected


def test_datasets_of_benchmark_ids_carry_their_policy_or_none():
    from rods_agent.integrations.trl import task_dataset

    paper = _installed("rods/BFCL-Paper-v0")
    rows = task_dataset("rods/BFCL-Paper-v0")
    assert len(rows) == len(paper.seed_tasks("train"))
    assert rows[0]["prompt"] == [{"role": "user", "content": ""}]  # BFCL has no policy
    tau = _installed("rods/Tau2-Retail-v0")
    row = task_dataset("rods/Tau2-Retail-v0", split="test")[0]
    assert row["prompt"][0] == {"role": "system", "content": tau.policy}
    first, _ = gym.make("rods/Tau2-Retail-v0", split=None).reset(options={"task": row["task_id"]})
    assert environment_factory("rods/Tau2-Retail-v0")().reset(**row) == first


def test_actionable_hints_reach_every_episode_of_a_table_that_asks_for_them():
    task = load_domain("retail").seed_tasks("train")[0]
    bad = {"user_id": 12}
    hinted = gym.make("rods/Retail-v0", split=None, actionable_hints=True)
    hinted.reset(options={"task": task})
    plain = gym.make("rods/Retail-v0", split=None)
    plain.reset(options={"task": task})
    call = {
        "role": "assistant",
        "tool_calls": [{"function": {"name": "get_user_details", "arguments": bad}}],
    }
    with_hints, without = hinted.step(call)[0], plain.step(call)[0]
    assert with_hints != without
    for flag, expected in ((True, with_hints), (False, without)):
        env = environment_factory("rods/Retail-v0", actionable_hints=flag)()
        env.reset(task_id=task.id)
        assert env.get_user_details(**bad) == expected
        assert env.env.actionable_hints is flag
