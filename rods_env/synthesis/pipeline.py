"""The synthesis pipeline: Plan -> Execute -> Rewrite -> Critique -> Augment.

One entry point, :func:`synthesize` (or a :class:`Synthesizer` kept across calls, as the
training loop does), takes seed tasks and yields an :class:`Accepted` or a
:class:`Rejection` (with its reason) for every candidate it builds. The output depends only
on the seed tasks, the configuration and the databases: every random choice comes from a
generator seeded by ``(config.seed, seed task id, mode, variant number, attempt, round,
stage)``.

The *round* is what lets a long-lived :class:`Synthesizer` keep producing around the same
seed: a training loop that synthesizes around a boundary task at every step passes the step
(``variants(task, round=step)``), or lets the synthesizer count how many times it has seen
that seed (the default). Round 0 draws exactly what earlier versions drew.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from rods_env.domain import Domain
from rods_env.errors import ConfigError
from rods_env.gcpause import paused
from rods_env.gold import GOLD_CACHE, Gold
from rods_env.padding import long_size_tokens
from rods_env.synthesis.augment import (
    AUGMENTS,
    LONG_MIN_RATIO,
    LONG_TOKENS,
    apply_augment,
    expected_signature,
    long_context,
)
from rods_env.synthesis.critique import PolicyCheck, critique, dedupe_key
from rods_env.synthesis.execute import Candidate, calls_key, content_id, execute
from rods_env.synthesis.plan import GROW, MODES, STEPS, Reject, plan
from rods_env.synthesis.rewrite import rewrite
from rods_env.task import Task

FINAL_PLAN_REASONS = frozenset({"unknown_skill", "cannot_expand"})
"""Plan verdicts that hold for every variant of a seed (the seed is skipped)."""

BASE_SIZE = "default"
"""The world a long-context seed's entities are drawn from (its long size derives from it)."""


@dataclass(frozen=True)
class SynthesisConfig:
    """How many variants to make, and how.

    Attributes:
        per_seed: Accepted base variants wanted per seed task.
        mode: ``"resample"`` (same signature, new entities) or ``"expand"`` (one step harder).
        augment: Augmentation kinds applied to every accepted base variant (each gives one
            more task): any of ``missing_parameter``, ``missing_function``,
            ``long_context``, ``distractor``.
        seed: Seed of every random choice.
        attempts: Tries per wanted variant before giving up on it.
        rewrite: Whether to rephrase requests (the Rewrite stage).
        policy_checks: Extra domain rule checks run by the critique.
        long_ratio: A long-context variant's tool outputs must be at least this many times
            as long as its base variant's.
        long_tokens: The long-context size knob: tokens of padding (4 characters each)
            wanted in a long-context variant's tool outputs, up to model context lengths
            (the domains offer 4k, 8k, 16k and 32k worlds; a larger size is taken when the
            smaller does not reach ``long_ratio``).
        grow: What *expand* may grow (:data:`~rods_env.synthesis.plan.GROW`): ``shape``
            (a skill's own axes), ``join`` (one more request in the last turn),
            ``append`` (one more request in a new turn), ``deepen`` (a longer chain).
    """

    per_seed: int = 5
    mode: str = "resample"
    augment: tuple[str, ...] = ()
    seed: int = 0
    attempts: int = 3
    rewrite: bool = True
    policy_checks: tuple[PolicyCheck, ...] = ()
    long_ratio: float = LONG_MIN_RATIO
    long_tokens: int = LONG_TOKENS
    grow: tuple[str, ...] = GROW

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.per_seed < 0:
            raise ConfigError(f"per_seed must be 0 or more, got {self.per_seed}")
        if self.attempts < 1:
            raise ConfigError(f"attempts must be at least 1, got {self.attempts}")
        if self.long_tokens < 1:
            raise ConfigError(f"long_tokens must be at least 1, got {self.long_tokens}")
        bad = [a for a in self.augment if a not in AUGMENTS]
        if bad:
            raise ConfigError(
                f"unknown augmentation {', '.join(map(repr, bad))}; kinds: {', '.join(AUGMENTS)}"
            )
        object.__setattr__(self, "augment", tuple(dict.fromkeys(self.augment)))
        unknown = [g for g in self.grow if g not in GROW]
        if unknown or not self.grow:
            raise ConfigError(
                f"grow must name one or more of {', '.join(GROW)}, got {', '.join(self.grow) or 'none'}"
            )
        object.__setattr__(self, "grow", tuple(dict.fromkeys(self.grow)))


@dataclass(frozen=True)
class Accepted:
    """A task that passed the critique.

    Attributes:
        task: The new task (id from its content, provenance filled).
        gold: Its gold replay (reusable, e.g. to warm a gold cache).
        key: Its dedupe key.
    """

    task: Task
    gold: Gold
    key: str
    accepted: Literal[True] = field(default=True, init=False)

    @property
    def augment(self) -> str | None:
        """The augmentation kind, None for a base variant."""
        return self.task.provenance.augment


@dataclass(frozen=True)
class Rejection:
    """A candidate that was rejected.

    Attributes:
        parent_id: The seed task (or, for an augmentation, the base variant) it came from.
        reason: One of :data:`rods_env.synthesis.critique.REASONS`.
        detail: What exactly was wrong.
        mode: The synthesis mode.
        augment: The augmentation kind, None for a base variant.
    """

    parent_id: str
    reason: str
    detail: str
    mode: str
    augment: str | None = None
    accepted: Literal[False] = field(default=False, init=False)


Outcome = Accepted | Rejection


class Synthesizer:
    """Makes validated variants of seed tasks; remembers what it accepted (for dedupe).

    Args:
        config: What to make.
        domains: A domain, or domain name -> domain; other domains are loaded from the
            registry by the tasks' domain names.
        known: Dedupe keys of tasks already in the pool (see :meth:`TaskPool.keys`).
    """

    def __init__(
        self,
        config: SynthesisConfig | None = None,
        *,
        domains: Domain | Mapping[str, Domain] | None = None,
        known: Iterable[str] = (),
    ) -> None:
        self.config = config or SynthesisConfig()
        if isinstance(domains, Domain):
            domains = {domains.name: domains}
        self._domains: dict[str, Domain] = dict(domains or {})
        self.seen: set[str] = set(known)
        self._alternatives: dict[str, dict[str, set[str]]] = {}
        self._sorted: dict[str, dict[str, list[str]]] = {}  # _alternatives, sorted
        self._unsorted: dict[str, set[str]] = {}  # labels whose values changed since
        self._rounds: dict[str, int] = {}
        self._calls: set[str] = set()  # calls keys of known tasks: duplicates before replay

    # -- helpers ---------------------------------------------------------------------------
    def domain(self, name: str) -> Domain:
        """The domain called ``name`` (given at construction, or from the registry)."""
        domain = self._domains.get(name)
        if domain is None:
            from rods_env.registry import load_domain

            domain = self._domains[name] = load_domain(name)
        return domain

    def remember(self, tasks: Iterable[Task], *, keys: bool = True) -> None:
        """Count ``tasks`` as already in the pool (their duplicates are rejected).

        Their facts also become plausible wrong values for missing-parameter variants.
        ``keys=False`` takes only the facts (the keys are known already, e.g. given as
        ``known=pool.keys()``), without replaying any gold.
        """
        for task in tasks:
            if keys:
                domain = self.domain(task.domain)
                self.seen.add(dedupe_key(task, GOLD_CACHE.get(domain, task)))
            self._calls.add(calls_key(task))
            self._note_facts(task)

    def _note_facts(self, task: Task) -> None:
        bank = self._alternatives.setdefault(task.domain, {})
        for label, value in task.user.facts.items():
            if value:
                known = bank.setdefault(label, set())
                if value not in known:
                    known.add(value)
                    self._unsorted.setdefault(task.domain, set()).add(label)

    def _rng(self, tag: str, stage: str) -> random.Random:
        return random.Random(f"rods-synth:{tag}:{stage}")

    def _accept(self, cand: Candidate, key: str) -> Candidate:
        task = cand.task.model_copy(update={"id": content_id(cand.task)})
        self.seen.add(key)
        self._calls.add(calls_key(task))
        self._note_facts(task)
        # an env reset on this task then finds its gold instead of replaying it; not for a
        # long-context task, whose outputs (up to megabytes) would fill the shared cache
        if task.variant != "long_context":
            GOLD_CACHE.put(self.domain(task.domain), task, cand.gold)
        return replace(cand, task=task)

    # -- stages ----------------------------------------------------------------------------
    def _base(
        self, domain: Domain, parent: Task, index: int, attempt: int, tag: str
    ) -> tuple[Candidate, str]:
        cfg = self.config
        p = plan(domain, parent, cfg.mode, index, attempt, cfg.grow)
        if p.variant == "long_context":
            # a long-context seed is a pair: draw new entities on its base world, then pair
            p = replace(p, db_size=BASE_SIZE)
        cand = execute(domain, p, self._rng(tag, "execute"), self._calls)
        # a step of STEPS keeps the parent's requests word for word (a new request is
        # phrased when it is added)
        if cfg.rewrite and p.axis not in STEPS:
            cand = replace(cand, task=rewrite(cand.task, self._rng(tag, "rewrite")))
        # keep the seed's augmentation: it is part of its structure (a step of STEPS keeps
        # the seed's turns, augmentation included)
        if p.variant != "base" and p.axis not in STEPS:
            if p.variant == "long_context":
                tokens = long_size_tokens(parent.db_size) or cfg.long_tokens
                cand = long_context(domain, cand, self._rng(tag, "inherit"), cfg.long_ratio, tokens)
            else:
                prefer = [f for t in parent.turns for f in t.hidden_facts]
                cand = apply_augment(
                    p.variant,
                    domain,
                    cand,
                    self._rng(tag, "inherit"),
                    alternatives=self._guesses(domain.name),
                    prefer=prefer,
                    long_ratio=cfg.long_ratio,
                    long_tokens=cfg.long_tokens,
                )
            prov = cand.task.provenance.model_copy(update={"augment": p.variant})
            cand = replace(cand, task=cand.task.model_copy(update={"provenance": prov}))
        key = critique(
            domain,
            cand.task,
            cand.gold,
            expected=p.parent_signature,
            mode=cfg.mode,
            axis=p.axis,
            seen=self.seen,
            policy_checks=cfg.policy_checks,
            parent=p.parent,
        )
        return self._accept(cand, key), key

    def _augmented(
        self, domain: Domain, base: Candidate, kind: str, tag: str
    ) -> tuple[Candidate, str]:
        aug = apply_augment(
            kind,
            domain,
            base,
            self._rng(tag, f"augment:{kind}"),
            alternatives=self._guesses(domain.name),
            long_ratio=self.config.long_ratio,
            long_tokens=self.config.long_tokens,
        )
        prov = base.task.provenance.model_copy(update={"parent_id": base.task.id, "augment": kind})
        task = aug.task.model_copy(update={"provenance": prov})
        assert base.task.signature is not None
        key = critique(
            domain,
            task,
            aug.gold,
            expected=expected_signature(kind, base.task.signature),
            seen=self.seen,
            policy_checks=self.config.policy_checks,
        )
        return self._accept(replace(aug, task=task), key), key

    def _augmentations(
        self, domain: Domain, base: Candidate, kind: str, tag: str
    ) -> Iterator[Outcome]:
        # An augmentation draws no new entities: one try says whether it applies.
        try:
            aug, key = self._augmented(domain, base, kind, f"{tag}:0")
        except Reject as r:
            yield Rejection(base.task.id, r.reason, r.detail, self.config.mode, kind)
            return
        yield Accepted(aug.task, aug.gold, key)

    def _guesses(self, domain: str) -> dict[str, list[str]]:
        # sorted once per change of the bank, not per augmentation (it holds every fact
        # value of every task the synthesizer has seen)
        found = self._sorted.get(domain)
        changed = self._unsorted.pop(domain, set())
        if found is None or changed:
            bank = self._alternatives.get(domain, {})
            old = found or {}
            # only the labels that changed are sorted again; a new dict, as the earlier one
            # may still be read
            found = self._sorted[domain] = {
                label: old[label] if label in old and label not in changed else sorted(vals)
                for label, vals in bank.items()
            }
        return found

    # -- entry points ----------------------------------------------------------------------
    def next_round(self, parent: Task) -> int:
        """The round :meth:`variants` uses for ``parent`` when none is given: how many times
        this synthesizer has already made variants of it."""
        return self._rounds.get(parent.id, 0)

    def variants(self, parent: Task, *, round: int | None = None) -> Iterator[Outcome]:
        """Yield the outcomes of every candidate built from ``parent``.

        Up to ``attempts`` candidates are tried for each of the ``per_seed`` wanted
        variants; every accepted base variant is followed by its augmentations.

        Args:
            parent: The seed task.
            round: Enters every random stream, so each round draws new candidates around
                the same seed. None: :meth:`next_round` (0 the first time a seed is seen, then
                1, 2, ...); pass the training step to make the output independent of the
                call history. The same ``(config, parent, round)`` gives the same candidates.
        """
        if round is None:
            round = self.next_round(parent)
        if round < 0:
            raise ConfigError(f"round must be 0 or more, got {round}")
        self._rounds[parent.id] = max(self._rounds.get(parent.id, 0), round + 1)
        # each candidate is made without full garbage collections (rods_env.gcpause): they
        # were a fifth of a bfcl-api synthesis run's CPU time
        return paused(self._variants(parent, round))

    def _variants(self, parent: Task, round: int) -> Iterator[Outcome]:
        cfg = self.config
        domain = self.domain(parent.domain)
        suffix = f":r{round}" if round else ""  # round 0 keeps the streams of earlier versions
        for index in range(cfg.per_seed):
            for attempt in range(cfg.attempts):
                tag = f"{cfg.seed}:{parent.id}:{cfg.mode}:{index}:{attempt}{suffix}"
                try:
                    base, key = self._base(domain, parent, index, attempt, tag)
                except Reject as r:
                    yield Rejection(parent.id, r.reason, r.detail, cfg.mode)
                    if r.reason in FINAL_PLAN_REASONS:
                        return
                    continue
                yield Accepted(base.task, base.gold, key)
                if base.task.variant == "base":
                    for kind in cfg.augment:
                        yield from self._augmentations(domain, base, kind, tag)
                break

    def run(self, seeds: Iterable[Task], *, round: int | None = None) -> Iterator[Outcome]:
        """Yield the outcomes for every seed task, after counting the seeds as known.

        Args:
            seeds: The seed tasks.
            round: The round of every seed (see :meth:`variants`).
        """
        seeds = list(seeds)
        self.remember(seeds)
        for parent in seeds:
            yield from self.variants(parent, round=round)


def synthesize(
    seeds: Iterable[Task],
    config: SynthesisConfig | None = None,
    *,
    domains: Domain | Mapping[str, Domain] | None = None,
    known: Iterable[str] = (),
    round: int = 0,
    **options: object,
) -> Iterator[Outcome]:
    """Make validated variants of ``seeds``: the pipeline's one entry point.

    Args:
        seeds: Seed tasks (boundary tasks, or a domain's seed split).
        config: What to make; ``options`` (e.g. ``per_seed=5, mode="expand"``) build one.
        domains: A domain or name -> domain (default: from the registry).
        known: Dedupe keys of tasks already in the pool.
        round: Round number entering every random stream (e.g. the training step): the
            same seeds give new candidates in each round (see :meth:`Synthesizer.variants`).

    Yields:
        :class:`Accepted` and :class:`Rejection` outcomes, in a deterministic order.

    Example:
        >>> accepted = [o.task for o in synthesize(seeds, per_seed=3) if o.accepted]
    """
    if config is None:
        config = SynthesisConfig(**options)  # type: ignore[arg-type]
    elif options:
        config = replace(config, **options)  # type: ignore[arg-type]
    return Synthesizer(config, domains=domains, known=known).run(seeds, round=round)
