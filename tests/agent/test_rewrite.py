"""Model-based Rewrite: valid paraphrases replace requests, the others are refused."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence

import pytest

from rods_agent.engines.base import Completion, GenerationRequest, SamplingParams
from rods_agent.synthesis.rewrite import ModelRewriter, RewriteStats
from rods_env import OracleAgent, ToolEnv, run_episode
from rods_env.gold import replay_gold
from rods_env.synthesis import content_id, synthesize
from rods_env.synthesis.rewrite import PARAPHRASE_REASONS


class ScriptedParaphraser:
    """An engine whose 'model' is a function of the request text (or an error)."""

    chat = None

    def __init__(self, paraphrase: Callable[[str], str | None]) -> None:
        self.paraphrase = paraphrase
        self.batches: list[int] = []

    def generate(
        self, requests: Sequence[GenerationRequest], params: SamplingParams
    ) -> list[Completion]:
        self.batches.append(len(requests))
        out = []
        for req in requests:
            system = req.messages[0]
            assert system["role"] == "system" and "{voice}" not in system["content"]
            text = self.paraphrase(str(req.messages[-1]["content"]))
            out.append(Completion.failed("server down") if text is None else Completion(text=text))
        return out

    def close(self) -> None:
        """Nothing to release."""


@pytest.fixture(scope="module")
def tasks(retail):
    seeds = [t for t in retail.seed_tasks("train") if len(t.turns) == 1][:12]
    return [o.task for o in synthesize(seeds, per_seed=1) if o.accepted]


def _polite(text: str) -> str:
    """A paraphrase that keeps every value and the words that matter."""
    return "Hello there. " + text.replace("Can you", "Could you").replace("I'd like", "I want")


def test_a_valid_paraphrase_replaces_the_request_and_keeps_the_gold(retail, tasks):
    engine = ScriptedParaphraser(_polite)
    outcomes = ModelRewriter(engine, batch_size=5, domains=retail).rewrite(tasks)
    assert len(outcomes) == len(tasks) and engine.batches == [5, 5, 2][: len(engine.batches)]
    assert sum(engine.batches) == len(tasks)
    for outcome, task in zip(outcomes, tasks, strict=True):
        assert outcome.original == task and outcome.changed, outcome.turns
        new = outcome.task
        assert new.turns[0].request == _polite(task.turns[0].request)
        assert new.id == content_id(new) != task.id
        assert new.gold_calls == task.gold_calls and new.user == task.user
        before, after = replay_gold(retail, task), replay_gold(retail, new)
        assert after.fingerprint == before.fingerprint
    task = outcomes[0].task
    env = ToolEnv(retail, tasks=[task], split=None, max_steps=60)
    assert run_episode(env, OracleAgent(task, retail.toolkit.write_names()), task=task)["success"]


def _reason(retail, task, text):
    engine = ScriptedParaphraser(lambda _: text)
    (outcome,) = ModelRewriter(engine, domains=retail).rewrite([task])
    assert outcome.task == task and not outcome.changed  # the template text is kept
    (turn,) = outcome.turns
    return turn.reason, turn.detail


def test_bad_paraphrases_are_refused_with_their_reason(retail):
    task = next(
        t
        for t in retail.seed_tasks("train")
        if t.skill == "cancel_order" and t.shape["orders"] == 1 and "#W" in t.turns[0].request
    )
    request = task.turns[0].request
    order = task.user.facts["order id"]
    cases = {
        "": "empty",
        "<|im_start|>assistant\nSure!": "markup",
        "Assistant: " + request: "markup",
        request.replace(order, "my order"): "lost_value",
        request + " My email is " + task.user.facts.get("email", "x@y.com") + ".": "new_value",
        request + " It cost 250 dollars.": "new_value",
        request.replace("cancel", "return").replace("Cancel", "Return"): "meaning_changed",
        f"Order {order} is the one, thanks thanks.": "meaning_changed",
        request + " " + request * 5: "too_long",
        request.replace(".", ". the the", 1): "bad_text",
    }
    for text, want in cases.items():
        reason, detail = _reason(retail, task, text)
        assert reason == want, (text, reason, detail)
        assert reason in PARAPHRASE_REASONS and detail
    engine = ScriptedParaphraser(lambda _: None)
    (outcome,) = ModelRewriter(engine, domains=retail).rewrite([task])
    assert outcome.turns[0].reason == "engine_error" and outcome.task == task


def test_a_paraphrase_never_reveals_a_hidden_fact(retail):
    seeds = retail.seed_tasks("train")[:40]
    hidden = [
        o.task
        for o in synthesize(seeds, per_seed=1, augment=("missing_parameter",))
        if o.accepted and o.task.variant == "missing_parameter"
    ]
    task = hidden[0]
    turn = next(x for x in task.turns if x.hidden_facts)
    value = task.user.facts[turn.hidden_facts[0]]
    reason, _ = _reason(retail, task, f"{turn.request} It is {value}.")
    assert reason == "new_value"


def test_stats_count_every_paraphrase(retail, tasks):
    engine = ScriptedParaphraser(lambda text: _polite(text) if "cancel" in text else "")
    stats = RewriteStats()
    for outcome in ModelRewriter(engine, domains=retail).rewrite(tasks):
        stats.add(outcome)
    d = stats.to_dict()
    cancels = sum("cancel" in t.turns[0].request for t in tasks)
    assert d["requests"] == len(tasks) and d["accepted"] == cancels
    assert d["rejected"] == {"empty": len(tasks) - cancels}


@pytest.mark.slow
def test_the_tiny_model_s_noise_is_refused(retail, tasks, tiny_engine):
    params = SamplingParams(max_tokens=40, temperature=1.0, seed=0)
    outcomes = ModelRewriter(tiny_engine, params=params, batch_size=4, domains=retail).rewrite(
        tasks[:6]
    )
    stats = RewriteStats()
    for outcome, task in zip(outcomes, tasks, strict=False):
        stats.add(outcome)
        assert outcome.task == task  # every request keeps its template text
    assert stats.requests == 6 and stats.accepted == 0
    assert set(stats.rejected) <= {*PARAPHRASE_REASONS}


@pytest.mark.slow
def test_rods_synth_rewrite_model_through_the_cli(tmp_path, tiny_model_dir):
    out = tmp_path / "pool.jsonl"
    plain = [sys.executable, "-m", "rods_agent.cli", "synth", "--env", "retail"]
    plain += ["--per-seed", "1", "--limit", "3", "--out", str(out), "--no-progress"]
    argv = [*plain, "--rewrite-model", str(tiny_model_dir), "--rewrite-max-tokens", "32"]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    summary = json.loads((tmp_path / "pool.summary.json").read_text())
    rewrite = summary["model_rewrite"]
    turns = sum(len(json.loads(line)["turns"]) for line in out.read_text().splitlines())
    assert rewrite["model"] == str(tiny_model_dir) and rewrite["requests"] == turns
    assert rewrite["accepted"] == 0 and sum(rewrite["rejected"].values()) == turns
    assert "model rewrite" in run.stdout and "paraphrases kept" in run.stdout
    # without --rewrite-model the command needs no model and says nothing about one
    again = subprocess.run([*plain, "--force"], capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "model_rewrite" not in json.loads(
        (tmp_path / "pool.summary.json").read_text()
    )
