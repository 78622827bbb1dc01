"""``rods eval`` on BFCL multi-turn: every engine, BFCL's leaderboard numbers beside pass^k."""

from __future__ import annotations

import json

import pytest

from rods_agent.engines.scripted import ScriptedEngine
from rods_agent.evaluation.evaluate import evaluate, load_pool
from rods_agent.rollouts.batch import RolloutConfig
from rods_env.errors import ConfigError
from tests.agent.conftest import FAMILY_CASES, case_id
from tests.agent.test_cli import rods
from tests.requires import require


@pytest.fixture(scope="module")
def bfcl():
    from environments.bfcl.apis import bfcl_missing

    require(bfcl_missing() is None, "bfcl-eval is not installed", "bash scripts/setup.sh bfcl")


@pytest.fixture(scope="module")
def all_tasks(bfcl):
    return load_pool("bfcl", "seeds", "all")


def _mixed_engine(tasks, passing):
    """The oracle on the tasks in ``passing``, silence elsewhere."""
    from environments.bfcl.agents import OracleAgent, PlanAgent, silent_plan
    from environments.bfcl.tasks import get_task

    def make_agent(info):
        task = get_task(info["task_id"])
        return OracleAgent(task) if task.id in passing else PlanAgent(silent_plan(task))

    return ScriptedEngine(make_agent)


def test_load_pool_takes_a_benchmark_its_ids_and_refuses_what_it_lacks(all_tasks):
    assert len(all_tasks) == 800
    assert {t.domain for t in all_tasks} == {"bfcl"}
    base = load_pool("rods/BFCL-MultiTurn-Base-v0", "seeds", "all")
    assert len(base) == 200 and {t.skill for t in base} == {"base"}
    assert {t.domain for t in base} == {"bfcl-multiturn-base"}
    train, test = load_pool("bfcl", "seeds", "train"), load_pool("bfcl", "seeds", "test")
    assert len(train) == len(test) == 400  # the paper's split: 100 of each category each
    assert {t.split for t in train} == {"train"} and {t.split for t in test} == {"test"}
    assert {t.id for t in train} | {t.id for t in test} == {t.id for t in all_tasks}
    with pytest.raises(ConfigError, match="come from its own package; use --pool seeds"):
        load_pool("bfcl", "pool.jsonl", "test")


def test_bfcl_tasks_are_rods_task_views(all_tasks):
    from environments.bfcl.tasks import get_task, reveal_message

    view = next(t for t in all_tasks if t.id == "multi_turn_miss_func_0")
    task = get_task(view.id)
    assert (view.skill, view.variant, view.split) == ("miss_func", "missing_function", "train")
    assert [t.request for t in view.turns][3] == reveal_message(["sort"])
    assert [t.calls for t in view.turns] == list(task.gold)
    assert [t.withheld_tools for t in view.turns] == [("sort",)] * 3 + [(), ()]
    from environments.bfcl import BFCL

    assert {t.id for t in BFCL.training_tasks()} == {
        t.id for t in all_tasks if t.split == "train"
    }  # the paper's train half


def test_bfcls_leaderboard_numbers_on_all_800(all_tasks):
    """Half of each category solved: 50% per category and overall, as BFCL computes them
    (the overall is the unweighted mean of the four categories)."""
    passing = {t.id for i, t in enumerate(all_tasks) if i % 2 == 0}
    summary = evaluate(
        _mixed_engine(all_tasks, passing), all_tasks, rollout=RolloutConfig(batch_size=64)
    )
    scores = summary.headline["BFCL"]
    assert scores == {
        "overall": 0.5, "base": 0.5, "miss_func": 0.5, "miss_param": 0.5, "long_context": 0.5,
    }  # fmt: skip
    assert summary.pass_k[1] == 0.5
    assert summary.by_skill["miss_func"].pass_1 == 0.5
    assert summary.by_variant["missing_parameter"].tasks == 200
    assert "BFCL (its own numbers, %): overall 50.00, base 50.00" in summary.line()
    assert "| 50.00 | 50.00 | 50.00 | 50.00 | 50.00 |" in summary.markdown()


def test_a_partial_run_has_no_overall_as_in_bfcl(all_tasks):
    tasks = all_tasks[:10]
    summary = evaluate(_mixed_engine(tasks, {tasks[0].id}), tasks)
    scores = summary.headline["BFCL"]
    assert scores["overall"] is None and scores["miss_param"] is None
    assert scores["base"] == pytest.approx(0.1)
    assert "overall N/A" in summary.line()


def test_rods_eval_oracle_on_one_category_writes_the_leaderboard(tmp_path, bfcl):
    out = tmp_path / "eval"
    proc = rods("eval", "--env", "rods/BFCL-MultiTurn-MissFunc-v0", "--engine", "oracle",
                "--limit", "6", "--out", str(out), "--no-progress")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "pass^1=1.000" in proc.stdout
    assert (
        "BFCL-MultiTurn-MissFunc (its own numbers, %): overall N/A, base N/A, miss_func 100.00"
        in proc.stdout
    )
    config = json.loads((out / "config.json").read_text())
    assert config["env"] == "rods/BFCL-MultiTurn-MissFunc-v0"
    assert config["max_turns"] == 168  # BFCL's own bound: 8 turns of 21 steps
    summary = json.loads((out / "summary.json").read_text())
    assert summary["headline"]["BFCL-MultiTurn-MissFunc"]["miss_func"] == 1.0
    rerun = rods("eval", "--env", "rods/BFCL-MultiTurn-MissFunc-v0", "--engine", "oracle",
                 "--limit", "6", "--out", str(out), "--no-progress")  # fmt: skip
    assert rerun.returncode == 0 and "miss_func 100.00" in rerun.stdout


def test_a_user_simulator_is_refused_before_any_model_loads(all_tasks):
    def never():
        raise AssertionError("the engine must not be built")

    with pytest.raises(ConfigError, match="bfcl takes the users scripted, not 'llm'"):
        evaluate(never, all_tasks[:2], user="llm")


def test_the_transformers_engine_plays_bfcl_through_the_chat_template(all_tasks, tiny_engine):
    """A tiny random model: tools rendered by the chat template, no system prompt, the
    conversation kept as one token sequence that matches a re-rendering."""
    from rods_agent.engines import SamplingParams

    tasks = [t for t in all_tasks if t.skill == "miss_func"][:1]
    rollout = RolloutConfig(
        sampling=SamplingParams(max_tokens=8, seed=0), max_turns=2, max_tokens=16000
    )
    summary = evaluate(tiny_engine, tasks, rollout=rollout)
    assert summary.errored_trials == 0
    assert summary.headline["BFCL"]["miss_func"] == 0.0


def test_the_openai_engine_against_a_server_that_answers_with_the_gold(all_tasks):
    """Structured tool calls over HTTP (a mock server playing the gold): BFCL's tool
    schemas go out as they are, with no system message, and the calls come back as actions."""
    import httpx2

    from environments.bfcl.tasks import get_task
    from rods_agent.engines.openai_api import OpenAIEngine

    tasks = [t for t in all_tasks if t.skill == "base"][:4]
    by_question = {t.turns[0].request: get_task(t.id) for t in tasks}
    assert len(by_question) == len(tasks)
    seen = []

    def handler(request):
        body = json.loads(request.content)
        seen.append(body)
        messages = body["messages"]
        task = by_question[messages[0]["content"]]
        turn = sum(1 for m in messages if m["role"] == "user") - 1
        if messages[-1]["role"] == "user" and task.gold[turn]:
            calls = [
                {"id": f"c{i}", "type": "function",
                 "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                for i, c in enumerate(task.gold[turn])
            ]  # fmt: skip
            message = {"role": "assistant", "content": None, "tool_calls": calls}
        else:
            message = {"role": "assistant", "content": "Done."}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        return httpx2.Response(
            200, json={"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                       "choices": [choice], "usage": usage},
        )  # fmt: skip

    engine = OpenAIEngine("http://mock/v1", "m", transport=httpx2.MockTransport(handler))
    try:
        summary = evaluate(engine, tasks, rollout=RolloutConfig(tool_format="openai"))
    finally:
        engine.close()
    assert summary.pass_k[1] == 1.0 and summary.headline["BFCL"]["base"] == 1.0
    first = seen[0]
    assert first["messages"][0]["role"] == "user"
    assert not any(m["role"] == "system" for body in seen for m in body["messages"])
    from environments.bfcl.apis import functions

    sent = {t["function"]["name"]: t for t in first["tools"]}
    assert sent["cd"] == json.loads(json.dumps(functions()["cd"].schema))


# -- the real families' chat templates ------------------------------------------------------
FAMILY_TASKS = ("multi_turn_base_1", "multi_turn_miss_func_0", "multi_turn_miss_param_3")
"""Turns of several calls; functions revealed mid-conversation; a turn with no gold."""


@pytest.mark.parametrize("case", FAMILY_CASES, ids=case_id)
def test_bfcl_conversations_on_each_familys_own_template(bfcl, family_models, case):
    """The gold of BFCL tasks, tokenized as a model of each family would write it:
    full progress, and the token sequence is the tokenizer's own rendering of the
    conversation with the task's tools (no system prompt; BFCL's schemas as they are)."""
    from environments.bfcl import BFCL
    from environments.bfcl.agents import PlanAgent
    from environments.bfcl.env import BFCLEnv
    from environments.bfcl.tasks import get_task
    from rods_agent.rollouts.batch import EpisodeSpec, run_rollouts
    from tests.agent.test_chat_families import (
        EXPECTED_CHECK,
        chat_of,
        conversation,
        gemma_messages,
    )

    family, thinking = case
    chat = chat_of(family_models, family, thinking)
    views = [t for t in BFCL.seed_tasks() if t.id in FAMILY_TASKS]

    def make_agent(info):  # one call per message: Llama 3.1's and gpt-oss's formats take one
        task = get_task(info["task_id"])
        return PlanAgent(tuple(tuple((c,) for c in calls) for calls in task.gold))

    engine = ScriptedEngine(make_agent, chat=chat)
    config = RolloutConfig(max_turns=60, max_tokens=60_000)
    records = run_rollouts(
        engine, lambda: BFCLEnv(tasks=()), [EpisodeSpec(t) for t in views], config
    )
    for record in records:
        assert record.errors == [] and record.success and record.progress == 1.0, record.task_id
        assert record.token_check == EXPECTED_CHECK[family], record.task_id
        tools = [
            json.loads(json.dumps(s))
            for s in BFCLEnv().reset(options={"task": record.task_id})[1]["tools"]
        ]
        messages = conversation(record, chat)
        kwargs = {} if thinking is None else {"enable_thinking": thinking}
        if family == "qwen3":
            from trl.chat_template_utils import qwen3_training_chat_template

            kwargs["chat_template"] = qwen3_training_chat_template
        if family == "gemma3":
            from rods_agent.engines.chat import with_tools_in_system

            messages, tools = gemma_messages(with_tools_in_system(messages, tools)), None
        reference = chat.tokenizer.apply_chat_template(
            messages, tools=tools, tokenize=False, **kwargs
        )
        ours = chat.decode(record.token_ids)
        if family == "gptoss":  # <|return|> closes a final answer where history has <|end|>
            ours, reference = (
                ours.replace("<|return|>", "<|end|>"),
                reference.replace("<|return|>", "<|end|>"),
            )
        assert ours == reference, record.task_id


def _quirk_engine():
    """The gold, plus on multi_turn_base_170 an unrequested mention of the tweet of turn 4
    at the start of turn 5 (BFCL's checker passes it: its default mentions list is shared
    by the model's and the gold's tweets)."""
    from environments.bfcl.agents import PlanAgent, gold_plan
    from environments.bfcl.tasks import get_task
    from rods_env.task import ToolCall

    def make_agent(info):
        task = get_task(info["task_id"])
        plan = list(gold_plan(task))
        if task.id == "multi_turn_base_170":
            mention = ToolCall(
                name="mention", arguments={"tweet_id": 0, "mentioned_usernames": ["@eve"]}
            )
            plan[5] = ((mention, *plan[5][0]),)
        return PlanAgent(tuple(plan))

    return ScriptedEngine(make_agent)


@pytest.mark.parametrize("verdicts", [None, "official", "strict"])
def test_rods_eval_reports_both_verdicts_and_where_they_differ(all_tasks, tmp_path, verdicts):
    tasks = [t for t in all_tasks if t.id in ("multi_turn_base_170", "multi_turn_base_58")]
    summary = evaluate(_quirk_engine(), tasks, out=tmp_path / "run", verdicts=verdicts)
    assert summary.meta["verdicts"] == (verdicts or "official")
    scored = 1.0 if verdicts != "strict" else 0.5
    assert summary.pass_k[1] == scored  # the chosen verdicts score the run
    assert summary.headline["BFCL"]["base"] == 1.0  # the headline: always BFCL's own
    assert summary.verdicts["BFCL"]["official"]["base"] == 1.0
    assert summary.verdicts["BFCL"]["strict"]["base"] == 0.5
    assert summary.verdicts["BFCL"]["strict"]["pass^1"] == 0.5
    (difference,) = summary.verdict_differences
    assert difference["task_id"] == "multi_turn_base_170" and difference["turn"] == 5
    assert difference["quirks"] == ["shared_defaults"] and "mentions" in difference["why"]
    line = summary.line()
    assert "BFCL with strict verdicts (%): pass^1 50.00, overall N/A, base 50.00" in line
    assert "the verdicts differ on 1 task (summary.md says where and why)" in line
    md = (tmp_path / "run" / "summary.md").read_text()
    assert "| multi_turn_base_170 | 0 | 5 | pass | fail |" in md
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["verdict_differences"][0]["quirks"] == ["shared_defaults"]
    results = [json.loads(x) for x in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    by_id = {r["task_id"]: r for r in results}
    assert by_id["multi_turn_base_170"]["verdicts"] == {"official": [True], "strict": [False]}
    again = evaluate(_quirk_engine(), tasks, out=tmp_path / "run", verdicts=verdicts)
    assert again.verdicts == summary.verdicts  # a resumed run reads them back


def test_verdicts_are_refused_where_a_benchmark_gives_only_its_own(tmp_path):
    from rods_env.registry import load_any_domain

    retail = load_any_domain("retail").seed_tasks("test")[:1]
    with pytest.raises(ConfigError, match="give only their own verdicts"):
        evaluate(ScriptedEngine(lambda info: None), retail, verdicts="strict")


def test_a_folder_from_before_the_verdicts_resumes_as_official(all_tasks, tmp_path):
    tasks = [t for t in all_tasks if t.id == "multi_turn_base_58"]
    out = tmp_path / "run"
    evaluate(_quirk_engine(), tasks, out=out)
    config = json.loads((out / "config.json").read_text())
    del config["verdicts"]  # as written before the option existed
    (out / "config.json").write_text(json.dumps(config))
    assert evaluate(_quirk_engine(), tasks, out=out).pass_k[1] == 1.0
    with pytest.raises(ConfigError, match=r"verdicts='official' \(now 'strict'\)"):
        evaluate(_quirk_engine(), tasks, out=out, verdicts="strict")
