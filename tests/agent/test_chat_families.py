"""The token accounting on the real tokenizers and chat templates of six model setups.

Qwen3 (thinking on and off), Qwen2.5, Llama 3.1, Gemma 3 and gpt-oss, each with its real
tokenizer and official chat template (``bash scripts/setup.sh tokenizers``). Random models
never call tools, so the oracle drives the episodes, writing every message in the family's
own format (:meth:`ChatTemplate.write`): tool calls, tool results, later user turns, and
error observations (an agent that first sends an unreadable action and a call to a tool that
does not exist).

The sequence a trainer learns from must equal what the template renders for the same
conversation, token for token, except for these documented differences:

* Qwen3 re-renders earlier assistant turns without their ``<think>`` block (the empty one the
  generation prompt or the model wrote, or real reasoning before the last user message). The
  sequence keeps them, since the generator saw them: it equals the rendering by the
  prefix-preserving variant of the template (TRL's ``qwen3_training.jinja``).
* gpt-oss ends a final answer with the sampled ``<|return|>`` where the template's history
  has ``<|end|>`` (and keeps earlier turns' reasoning, which the template drops).

And the documented adaptations: Gemma 3 has no ``tool`` role and wants alternating roles, so
tool results are a user message of ``<tool_response>`` blocks, consecutive user messages are
one, and the tool schemas go into the system message (Hermes style, as the model is told to
call them); Gemma 3 and gpt-oss get the environment's error message (a ``system`` message after
the first, which Gemma 3 refuses and gpt-oss's template silently drops) as a user message.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from rods_agent.engines.chat import ChatTemplate, with_tools_in_system
from rods_agent.engines.scripted import ScriptedEngine
from rods_agent.rollouts.batch import EpisodeRecord, EpisodeSpec, RolloutConfig, run_rollouts
from rods_env.oracle import OracleAgent
from rods_env.registry import load_domain
from rods_env.task import Task
from tests.agent.conftest import FAMILY_CASES, FamilyModels, case_id

EXPECTED_CHECK = {
    "qwen3": "history",
    "qwen2_5": "exact",
    "llama3_1": "exact",
    "gemma3": "exact",
    "gptoss": "history",
}


def one_per_skill(domain: str, limit: int) -> list[Task]:
    seen: set[str] = set()
    tasks = []
    for task in load_domain(domain).seed_tasks():
        if task.skill not in seen and task.variant == "base":
            seen.add(task.skill)
            tasks.append(task)
    multi = [t for t in load_domain(domain).seed_tasks() if len(t.turns) > 1]
    return [*tasks[: limit - 1], multi[0]]


TASKS = [*one_per_skill("retail", 4), *one_per_skill("airline", 3)]


class Stumbling:
    """The oracle, after an unreadable action and a call to a tool that does not exist."""

    def __init__(self, task: Task) -> None:
        self.oracle = OracleAgent(task, load_domain(task.domain).toolkit.write_names())
        self.n = 0

    def act(self, observation: str, info: dict[str, Any]) -> str:
        self.n += 1
        if self.n == 1:
            return '{"name": "get_user_details", "arguments": '  # a whole-action error
        if self.n == 2:
            return '<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>'
        return self.oracle.act(observation, info)


def chat_of(family_models: FamilyModels, family: str, thinking: bool | None) -> ChatTemplate:
    return ChatTemplate(family_models.tokenizer(family), thinking=thinking)


def oracle_records(chat: ChatTemplate, tasks: list[Task], stumble: bool) -> list[EpisodeRecord]:
    by_id = {t.id: t for t in tasks}

    def make_agent(info: Any) -> Any:
        task = by_id[info["task_id"]]
        if stumble:
            return Stumbling(task)
        return OracleAgent(task, load_domain(task.domain).toolkit.write_names())

    from rods_agent.rollouts.batch import DomainRouter

    config = RolloutConfig(max_turns=60, max_tokens=60_000, batch_size=8)
    engine = ScriptedEngine(make_agent, chat=chat)
    return run_rollouts(
        engine, lambda: DomainRouter(max_steps=60), [EpisodeSpec(t) for t in tasks], config
    )


def conversation(record: EpisodeRecord, chat: ChatTemplate) -> list[dict[str, Any]]:
    """The conversation as the model saw it: the env's messages, each assistant message as
    the completion that was sampled, up to the last of them (what the user says after the
    episode ended reaches no model)."""
    texts = [chat.completion_text(record.token_ids[a:b]) for a, b in record.step_spans]
    out, k = [], 0
    for m in record.messages:
        if m["role"] == "assistant":
            out.append(chat.message(texts[k]))
            k += 1
        else:
            out.append(dict(m))
    assert k == len(texts)
    while out and out[-1]["role"] != "assistant":
        out.pop()
    return out


def gemma_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Gemma 3 has no tool role and wants alternating roles: tool results are a user message
    of <tool_response> blocks, a later system message (an error) is a user message, and
    consecutive user messages are one."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m["role"] == "tool":
            m = {"role": "user", "content": f"<tool_response>\n{m['content']}\n</tool_response>"}
        elif m["role"] == "system" and out:
            m = {"role": "user", "content": m["content"]}
        if out and m["role"] == "user" and out[-1]["role"] == "user" and len(out) > 1:
            out[-1] = {"role": "user", "content": out[-1]["content"] + "\n" + m["content"]}
        else:
            out.append({k: v for k, v in m.items() if k in ("role", "content")})
    return out


def reference_text(
    family: str, thinking: bool | None, chat: ChatTemplate, record: EpisodeRecord
) -> str:
    """The template's rendering of the conversation, by the tokenizer itself (gpt-oss: with
    the documented <|return|>/<|end|> difference applied to ours instead)."""
    tok = chat.tokenizer
    messages = conversation(record, chat)
    tools = _tools_of(record)
    kwargs: dict[str, Any] = {}
    if thinking is not None:
        kwargs["enable_thinking"] = thinking
    if family == "qwen3":
        from trl.chat_template_utils import qwen3_training_chat_template

        kwargs["chat_template"] = qwen3_training_chat_template
    if family == "gemma3":
        messages = gemma_messages(with_tools_in_system(messages, tools))
        tools = None
    if family == "gptoss":  # the template drops a later system message: it is a user's
        messages = [
            {"role": "user", "content": m["content"]} if m["role"] == "system" and i else m
            for i, m in enumerate(messages)
        ]
    return tok.apply_chat_template(messages, tools=tools, tokenize=False, **kwargs)


def _tools_of(record: EpisodeRecord) -> list[dict[str, Any]]:
    task = next(t for t in TASKS if t.id == record.task_id)
    return [json.loads(json.dumps(s)) for s in load_domain(task.domain).toolkit.schemas()]


@pytest.mark.parametrize("case", FAMILY_CASES, ids=case_id)
@pytest.mark.parametrize("stumble", [False, True], ids=["oracle", "errors-first"])
def test_oracle_episodes_reach_full_progress_on_the_templates_own_tokens(
    family_models: FamilyModels, case: tuple[str, bool | None], stumble: bool
) -> None:
    family, thinking = case
    chat = chat_of(family_models, family, thinking)
    tasks = TASKS if not stumble else TASKS[:2]
    records = oracle_records(chat, tasks, stumble)
    for record in records:
        assert record.errors == [], record.errors
        assert record.termination in ("user_stop", "terminal_tool"), record.termination
        assert record.progress == 1.0 and record.success, (record.task_id, record.turn_results)
        assert record.token_check == EXPECTED_CHECK[family], record.task_id
        ours = chat.decode(record.token_ids)
        reference = reference_text(family, thinking, chat, record)
        if family == "gptoss":
            # the one difference: <|return|> closes a final answer where history has <|end|>
            assert "<|return|>" in ours
            ours, reference = (
                ours.replace("<|return|>", "<|end|>"),
                reference.replace("<|return|>", "<|end|>"),
            )
        assert ours == reference, record.task_id
        if family != "gptoss":  # token for token, not only the text
            assert record.token_ids == chat.encode(reference), record.task_id
        # only sampled tokens carry loss, each with its stop token
        assert sum(record.assistant_mask) == sum(b - a for a, b in record.step_spans)
        for _a, b in record.step_spans:
            assert record.token_ids[b - 1] in chat.end_of_turn_ids
    if stumble:
        for record in records:
            said = [str(m.get("content")) for m in record.messages]
            assert any("could not parse the tool call JSON" in s for s in said)
            assert any("no_such_tool" in s for s in said)
    else:
        assert any(len(r.turn_results) > 1 for r in records)  # later user turns


class Thinking:
    """The oracle thinking aloud: the answer and a drafted write in its reasoning."""

    def __init__(self, task: Task) -> None:
        self.oracle = OracleAgent(task, load_domain(task.domain).toolkit.write_names())

    def act(self, observation: str, info: dict[str, Any]) -> str:
        action = self.oracle.act(observation, info)
        draft = '<tool_call>{"name": "cancel_pending_order", "arguments": {"order_id": "#W9999999", "reason": "ordered by mistake"}}</tool_call>'
        return f"<think>\nSecretly: {draft} and then: {action}\n</think>\n\n{action}"


@pytest.mark.parametrize("case", [("qwen3", True), ("gptoss", None)], ids=case_id)
def test_reasoning_stays_in_the_training_sequence_and_out_of_the_environment(
    family_models: FamilyModels, case: tuple[str, bool | None]
) -> None:
    family, thinking = case
    chat = chat_of(family_models, family, thinking)
    tasks = [t for t in TASKS if t.domain == "retail"][:2]
    by_id = {t.id: t for t in tasks}
    from rods_agent.rollouts.batch import DomainRouter

    engine = ScriptedEngine(lambda info: Thinking(by_id[info["task_id"]]), chat=chat)
    records = run_rollouts(
        engine, lambda: DomainRouter(max_steps=60), [EpisodeSpec(t) for t in tasks],
        RolloutConfig(max_turns=60, max_tokens=60_000),
    )  # fmt: skip
    for record in records:
        assert record.progress == 1.0 and record.termination == "user_stop" and not record.errors
        ours = chat.decode(record.token_ids)
        assert ours.count("Secretly:") == record.n_steps  # every turn's reasoning is trained on
        env_text = json.dumps(record.messages)
        assert "Secretly" not in env_text and "W9999999" not in env_text  # none reached the env
        assert record.token_check == "history"
        if family == "qwen3":  # equal to the prefix-preserving template, reasoning included
            assert record.token_ids == chat.encode(reference_text(family, thinking, chat, record))


@pytest.mark.parametrize("case", FAMILY_CASES, ids=case_id)
def test_each_family_ends_a_call_with_its_own_closing_marker(
    family_models: FamilyModels, case: tuple[str, bool | None]
) -> None:
    """Where the rollout stops a turn (issue 41): ``</tool_call>`` for the families that
    write Hermes blocks (Gemma 3 through rods' tool instructions); none where the call has no
    closing text of its own (Llama 3.1's JSON), where a stop token ends it already
    (gpt-oss's ``<|call|>``), or where the model reasons first (a Qwen3 that thinks may draft
    a call inside ``<think>``)."""
    family, thinking = case
    chat = chat_of(family_models, family, thinking)
    expected = {"qwen2_5": "</tool_call>", "gemma3": "</tool_call>", "llama3_1": None,
                "gptoss": None, "qwen3": None if thinking else "</tool_call>"}  # fmt: skip
    assert chat.call_end == expected[family]
    call = {"type": "function", "function": {"name": "f", "arguments": {"k": "v"}}}
    written = chat.write({"role": "assistant", "content": "", "tool_calls": [call]})
    if chat.call_end is not None:  # only the message's closing follows the marker
        rest = written.split(chat.call_end)
        assert len(rest) == 2 and rest[1].strip() in {*chat.close_texts, ""}


def test_the_tokenizers_folder_is_the_one_setup_fills(monkeypatch):
    """``tokenizers_dir`` names the checkout's ``.assets/tokenizers`` (what ``scripts/setup.sh
    tokenizers`` writes), wherever the module that computes it lives."""
    from pathlib import Path

    from rods_agent.models.tiny import tokenizers_dir

    monkeypatch.delenv("RODS_TOKENIZERS_DIR", raising=False)
    root = Path(__file__).resolve().parents[2]
    assert tokenizers_dir() == root / ".assets" / "tokenizers"
    assert "$ROOT/.assets/tokenizers" in (root / "scripts" / "setup" / "tokenizers.sh").read_text()
