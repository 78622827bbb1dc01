"""Model-based Rewrite: paraphrase synthesized requests with any engine, and validate them.

The template Rewrite stage (:mod:`rods_env.synthesis.rewrite`) gives a few hundred request
skeletons per domain. :class:`ModelRewriter` asks a model (any :class:`Engine`: vLLM,
transformers, an OpenAI-compatible server) to paraphrase each request, persona lines
included, in the voice of the user's persona, in batches. Every paraphrase goes through
:func:`rods_env.synthesis.rewrite.paraphrase_problem`: it must keep every fact value as a
whole token, add no value, read as a sentence and leave every gold argument derivable, so
the task's meaning (its gold) is unchanged. A paraphrase that fails is refused with its
reason and the request keeps its template text; a task whose text changes gets a new
content id. The default pipeline (``rods synth`` without ``--rewrite-model``) never loads a
model.

Example::

    from rods_agent.engines import make_engine
    from rods_agent.synthesis.rewrite import ModelRewriter

    rewriter = ModelRewriter(make_engine("vllm", "/models/qwen2.5-7b-instruct"))
    rewritten = rewriter.rewrite(tasks)  # one RewriteOutcome per task
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rods_agent.engines.base import Engine, GenerationRequest, SamplingParams
from rods_env.domain import Domain
from rods_env.gold import GOLD_CACHE
from rods_env.synthesis.critique import underivable_arguments
from rods_env.synthesis.execute import content_id
from rods_env.synthesis.rewrite import paraphrase_problem
from rods_env.task import Task
from rods_env.user import PERSONAS, persona_name

SYSTEM_PROMPT = (
    "You rewrite what a customer writes to a customer-service agent. Say the same thing in "
    "other words, in the customer's voice: {voice}. Keep every value exactly as written "
    "(ids, names, numbers, dates, addresses, product options, email addresses), add no new "
    "information, and leave nothing out. Reply with the rewritten message only."
)
"""The instruction each paraphrase request starts with (``{voice}``: the persona)."""

DEFAULT_PARAMS = SamplingParams(max_tokens=192, temperature=0.7, top_p=0.95, seed=0)


@dataclass(frozen=True)
class TurnRewrite:
    """What happened to one request.

    Attributes:
        turn: The turn index.
        accepted: Whether the paraphrase replaced the request.
        text: The paraphrase the model wrote.
        reason: Why it was refused (one of
            :data:`rods_env.synthesis.rewrite.PARAPHRASE_REASONS`, or ``engine_error``).
        detail: What exactly was wrong.
    """

    turn: int
    accepted: bool
    text: str
    reason: str | None = None
    detail: str = ""


@dataclass(frozen=True)
class RewriteOutcome:
    """One task after the model Rewrite stage.

    Attributes:
        task: The task with the accepted paraphrases (a new content id when any was
            accepted), or the original task.
        original: The task as it came in.
        turns: One :class:`TurnRewrite` per request.
    """

    task: Task
    original: Task
    turns: tuple[TurnRewrite, ...] = field(default_factory=tuple)

    @property
    def changed(self) -> bool:
        """Whether any request was rewritten."""
        return any(t.accepted for t in self.turns)


@dataclass
class RewriteStats:
    """Counts over rewritten tasks, for summaries.

    Attributes:
        requests: Paraphrases asked for.
        accepted: Paraphrases that replaced a request.
        rejected: Refused paraphrases by reason.
        examples: One refused paraphrase (and why) per reason.
    """

    requests: int = 0
    accepted: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)

    def add(self, outcome: RewriteOutcome) -> None:
        """Count one task's outcome."""
        for t in outcome.turns:
            self.requests += 1
            if t.accepted:
                self.accepted += 1
            else:
                reason = t.reason or "refused"
                self.rejected[reason] += 1
                self.examples.setdefault(reason, f"{t.detail} | {t.text[:160]!r}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able summary."""
        return {
            "requests": self.requests,
            "accepted": self.accepted,
            "acceptance_rate": round(self.accepted / self.requests, 4) if self.requests else 0.0,
            "rejected": dict(self.rejected.most_common()),
            "examples": dict(sorted(self.examples.items())),
        }


def _voice(task: Task) -> str:
    name = persona_name(task.user.persona)
    if name is not None:
        return PERSONAS[name].description
    return task.user.persona or "plain and polite"


class ModelRewriter:
    """Paraphrases the requests of tasks with a model, keeping only valid paraphrases.

    Args:
        engine: Any engine of :mod:`rods_agent.engines`.
        params: Sampling parameters (default: temperature 0.7, 192 new tokens).
        batch_size: Requests per ``engine.generate`` call.
        domains: A domain or name -> domain, to replay gold for the derivability check
            (default: from the registry).
    """

    def __init__(
        self,
        engine: Engine,
        *,
        params: SamplingParams | None = None,
        batch_size: int = 16,
        domains: Domain | Mapping[str, Domain] | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.engine = engine
        self.params = params or DEFAULT_PARAMS
        self.batch_size = batch_size
        if isinstance(domains, Domain):
            domains = {domains.name: domains}
        self._domains: dict[str, Domain] = dict(domains or {})

    def _domain(self, name: str) -> Domain:
        domain = self._domains.get(name)
        if domain is None:
            from rods_env.registry import load_domain

            domain = self._domains[name] = load_domain(name)
        return domain

    @staticmethod
    def request_for(task: Task, turn: int) -> GenerationRequest:
        """The chat that asks for a paraphrase of one request."""
        return GenerationRequest(
            messages=[
                {"role": "system", "content": SYSTEM_PROMPT.format(voice=_voice(task))},
                {"role": "user", "content": task.turns[turn].request},
            ],
            key=f"rewrite:{task.id}:{turn}",
        )

    def rewrite(self, tasks: Sequence[Task]) -> list[RewriteOutcome]:
        """Paraphrase every request of ``tasks`` (batched); one outcome per task, in order."""
        jobs = [(i, t) for i, task in enumerate(tasks) for t in range(len(task.turns))]
        texts: list[tuple[str, str | None]] = []
        for start in range(0, len(jobs), self.batch_size):
            chunk = jobs[start : start + self.batch_size]
            requests = [self.request_for(tasks[i], t) for i, t in chunk]
            completions = self.engine.generate(requests, self.params)
            for c in completions:
                if c.finish_reason == "error":
                    texts.append(("", c.error or "engine error"))
                else:
                    texts.append((c.text, None))
        by_task: dict[int, list[tuple[int, str, str | None]]] = {}
        for (i, t), (text, error) in zip(jobs, texts, strict=True):
            by_task.setdefault(i, []).append((t, text, error))
        return [self._apply(task, by_task.get(i, [])) for i, task in enumerate(tasks)]

    def _apply(self, task: Task, answers: list[tuple[int, str, str | None]]) -> RewriteOutcome:
        domain = self._domain(task.domain)
        gold = GOLD_CACHE.get(domain, task)

        def underivable(candidate: Task) -> list[str]:
            return underivable_arguments(domain, candidate, gold)

        results: list[TurnRewrite] = []
        new = task
        for turn, text, error in answers:
            if error is not None:
                results.append(TurnRewrite(turn, False, text, "engine_error", error[:200]))
                continue
            problem = paraphrase_problem(new, turn, text, underivable)
            if problem is not None:
                results.append(TurnRewrite(turn, False, text, problem[0], problem[1]))
                continue
            turns = list(new.turns)
            turns[turn] = turns[turn].model_copy(update={"request": text.strip()})
            new = new.model_copy(update={"turns": tuple(turns)})
            results.append(TurnRewrite(turn, True, text.strip()))
        if new is not task:
            new = new.model_copy(update={"id": content_id(new)})
            if new.variant != "long_context":  # its outputs are too big for the shared cache
                GOLD_CACHE.put(domain, new, gold)
        return RewriteOutcome(task=new, original=task, turns=tuple(results))
