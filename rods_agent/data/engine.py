"""The RODS data engine: which tasks to train on next, given the rewards of the last ones.

Per step a trainer asks the engine for a batch (:meth:`DataEngine.sample`), rolls out G
episodes of each task, and hands back each task's group of rewards
(:meth:`DataEngine.observe`). The engine needs nothing else: no model, no tokens, no
trainer. That is what lets the same engine run inside ``rods train`` and inside another
trainer (TRL's ``GRPOTrainer`` through a callback).

From each group it computes the zone (:mod:`rods_agent.data.boundary`); in mode ``rods`` it
then retires mastered tasks, parks hard ones, synthesizes new variants around the boundary
tasks with :class:`rods_env.synthesis.Synthesizer` (the paper's RODS: the same structure
with new entities), and admits them to the active pool in stages
(:mod:`rods_agent.data.replay`). Mode ``rods-expand`` also grows harder neighbours (one
step more of structure), of boundary tasks and of tasks retired as mastered. Modes
``static``, ``filter`` and ``envtuning`` are the same engine with these parts switched off
(``envtuning`` handles data as ``static`` does; its environments differ, not its data).
The paper's ablations are settings of :class:`~rods_agent.training.config.DataConfig`:
``synthesize`` (off: the buffer without new tasks), ``parents`` (boundary or uniform),
``synth_cap`` (a count of synthesized tasks) and ``retire_seeds``.

Every random choice comes from a generator seeded by ``(run seed, step)``, and the whole
state is JSON (:meth:`DataEngine.state_dict`), so a resumed run samples and synthesizes
exactly what the unbroken run would have.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rods_agent.data.boundary import ZONES, GroupStats, Thresholds, Zone
from rods_agent.data.replay import ReplayBuffer, seeds_by_id
from rods_agent.training.config import TRAIN_MODES, DataConfig, SynthMode, TrainMode
from rods_env.errors import ConfigError, RodsError
from rods_env.task import Task

Mode = TrainMode
MODES: tuple[str, ...] = TRAIN_MODES
DYNAMIC_MODES: tuple[str, ...] = ("rods", "rods-expand")
"""Modes whose pool grows and is pruned (capacity, retirement, parking, weighted sampling)."""
KEEP_EVERY_GROUP: tuple[str, ...] = ("static", "envtuning")
"""Modes whose update takes every group, tied ones included (the paper's fixed-data RL)."""
STATE_VERSION = 1


@dataclass
class _Round:
    """What one step's synthesis round produced."""

    accepted: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0


@dataclass(frozen=True)
class GroupResult:
    """One task's group of G rollout rewards from one step.

    Attributes:
        task_id: The task (as returned by :meth:`DataEngine.sample`).
        rewards: The reward of each rollout (progress or success, in [0, 1]).
    """

    task_id: str
    rewards: tuple[float, ...]


def round_seed(seed: int, step: int) -> int:
    """The synthesis seed of one step's round: a fresh random stream per (run seed, step)."""
    digest = hashlib.sha256(f"rods-data:synthesis:{seed}:{step}".encode()).digest()
    return int.from_bytes(digest[:6], "big")


class DataEngine:
    """Boundary detection, the replay buffer and synthesis in the loop, behind one API.

    Args:
        config: The ``data`` section of the training config.
        mode: ``static`` (a fixed pool, every group trained on), ``envtuning`` (the same
            data as ``static``), ``filter`` (a fixed pool, zero-variance groups dropped),
            ``rods`` (the full engine, same-structure synthesis) or ``rods-expand`` (rods
            with harder neighbours too).
        tasks: The starting pool (seed tasks or a task pool).
        reserved: Tasks that synthesized tasks must never duplicate (the test split).
        seed: The run's seed.

    Example:
        >>> engine = DataEngine(config.data, mode="rods", tasks=train, reserved=test, seed=0)
        >>> for step in range(steps):
        ...     tasks = engine.sample(8, step=step)
        ...     groups = [GroupResult(t.id, rollout_rewards(t)) for t in tasks]
        ...     report = engine.observe(groups, step=step)
    """

    def __init__(
        self,
        config: DataConfig | None = None,
        *,
        mode: str = "rods",
        tasks: Iterable[Task],
        reserved: Iterable[Task] = (),
        seed: int = 0,
    ) -> None:
        if mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.config = config or DataConfig()
        error = self.config.mode_error(mode)
        if error is not None:
            raise ConfigError(error)
        self.mode: Mode = mode  # type: ignore[assignment]
        self.synth_modes: tuple[SynthMode, ...] = self.config.synthesis_modes(mode)
        """The synthesis modes this engine uses (empty: it synthesizes nothing)."""
        self.seed = int(seed)
        self.thresholds = Thresholds(self.config.mastered, self.config.hard, self.config.min_std)
        self._seeds = seeds_by_id(tasks)
        self._reserved = list(reserved)
        if self.synthesizes:
            self._check_synthesis({t.domain for t in self._seeds.values()}, self.mode)
        self.buffer = ReplayBuffer(self.config, dynamic=self.dynamic)
        order = list(self._seeds.values())
        if self.dynamic:
            # seeds beyond the capacity wait; which ones start must not follow the file's
            # order (it groups tasks by domain and skill)
            random.Random(f"rods-data:pool:{self.seed}").shuffle(order)
        for task in order:
            self.buffer.add_seed(task)
        if not self.buffer.entries:
            raise ConfigError("the training pool is empty: no task to train on")
        self._keys: set[str] | None = None  # dedupe keys, computed on the first synthesis
        self._domains: dict[str, Any] = {}
        self._benchmarks: dict[str, Any] = {}  # benchmark domains that synthesize for themselves
        self.totals: dict[str, Any] = {"accepted": 0, "rejected": {}, "admitted": 0}
        self.last_signal_step = -1  # the last step with a group that changes the policy

    @property
    def dynamic(self) -> bool:
        """Whether this mode prunes the pool and samples by variance (``rods``,
        ``rods-expand``)."""
        return self.mode in DYNAMIC_MODES

    @property
    def synthesizes(self) -> bool:
        """Whether this engine grows the pool by synthesis (a dynamic mode with
        ``data.synthesize`` on and a synthesis mode to use)."""
        return self.dynamic and bool(self.synth_modes)

    # -- the API a trainer uses ------------------------------------------------------------
    def sample(self, n: int, *, step: int) -> list[Task]:
        """The next batch: up to ``n`` distinct tasks of the active pool.

        Deterministic given the engine's state and ``step``. Mode ``rods`` favours tasks
        whose recent groups had a high reward variance; the fixed-pool modes draw uniformly.
        An empty batch means the pool is exhausted (mode ``rods``): every task was retired,
        or is parked as hard and was seen hard since the last group with a signal.
        """
        if n < 1:
            raise ConfigError(f"a batch needs at least one task, got n={n}")
        if self.dynamic and self.buffer.exhausted(self.last_signal_step):
            return []  # every task retired, or parked as hard since the policy last changed
        rng = random.Random(f"rods-data:sample:{self.seed}:{step}")
        return self.buffer.sample(n, rng)

    def keep(self, rewards: Sequence[float]) -> bool:
        """Whether a group belongs in the loss: always in ``static`` and ``envtuning``; in
        ``filter``, ``rods`` and ``rods-expand`` only when its rewards differ (a
        zero-variance group has zero advantage)."""
        if self.mode in KEEP_EVERY_GROUP:
            return True
        return self.thresholds.has_signal(GroupStats.of(rewards))

    def observe(self, groups: Sequence[GroupResult], *, step: int) -> dict[str, Any]:
        """Take one step's groups: zones, then (mode ``rods``) retire, park, synthesize, admit.

        Args:
            groups: One result per task of the step's batch.
            step: The step the groups come from.

        Returns:
            The step's data metrics: ``effective_group_ratio`` (share of groups with a
            reward variance), ``synth_modes`` (the synthesis modes in use), ``zones`` (groups per zone), ``variance`` (mean reward
            variance of the groups of each zone), ``pool`` (see
            :meth:`ReplayBuffer.composition`), ``synthesized`` (``accepted``, ``rejected``
            by reason, ``admitted``, ``confirmed``), ``retired`` (by reason) and
            ``seconds`` (``engine``: everything but synthesis; ``synthesis``).
        """
        started = time.perf_counter()
        zones: Counter[str] = Counter({z: 0 for z in ZONES})
        variance: dict[str, list[float]] = {z: [] for z in ZONES}
        events: Counter[str] = Counter()
        removed_before = len(self.buffer.removed)
        with_signal = 0
        boundary: list[tuple[Task, GroupStats]] = []
        graduated: list[tuple[Task, GroupStats]] = []
        for group in groups:
            stats = GroupStats.of(group.rewards)
            zone: Zone = self.thresholds.zone(stats)
            zones[zone] += 1
            variance[zone].append(stats.variance)
            if self.thresholds.has_signal(stats):
                with_signal += 1
                self.last_signal_step = step
            entry = self.buffer.entries.get(group.task_id)
            task = entry.task if entry is not None else None
            event = self.buffer.visit(group.task_id, stats, zone, step=step)
            if event is not None:
                events[event] += 1
            if task is None:
                continue
            if zone == "boundary" and event != "dropped":
                boundary.append((task, stats))
            elif event == "retired" and self.config.expand_mastered:
                graduated.append((task, stats))  # grown only where "expand" is in use
        if self.config.parents == "uniform":
            boundary = self._uniform_parents(len({t.id for t, _ in boundary}), step)
        self.buffer.expire(step)
        synthesis = _Round()
        if self.synthesizes and (boundary or graduated):
            synthesis = self._synthesize(boundary, graduated, step)
        admitted = self.buffer.admit(step)
        rejected = dict(synthesis.rejected)
        if events["dropped"]:
            rejected["not_boundary"] = events["dropped"]
        self._count(synthesis.accepted, rejected, admitted["synthesized"])
        retired = Counter(r["reason"] for r in self.buffer.removed[removed_before:])
        retired.pop("not_boundary", None)
        elapsed = time.perf_counter() - started
        return {
            "effective_group_ratio": with_signal / len(groups) if groups else 0.0,
            "synth_modes": list(self.synth_modes),
            "zones": dict(zones),
            "variance": {z: sum(v) / len(v) if v else None for z, v in variance.items()},
            "pool": self.buffer.composition(),
            "synthesized": {
                "accepted": synthesis.accepted,
                "rejected": dict(sorted(rejected.items())),
                "admitted": admitted["synthesized"],
                "confirmed": events["confirmed"],
            },
            "retired": dict(sorted(retired.items())),
            "parked": events["parked"],
            "retried": admitted["retried"],
            "seconds": {
                "engine": elapsed - synthesis.seconds,
                "synthesis": synthesis.seconds,
            },
        }

    def task(self, task_id: str) -> Task:
        """The task with id ``task_id`` (active, waiting or parked).

        Raises:
            KeyError: when the engine does not hold it (never had it, or retired it).
        """
        entry = self.buffer.entries.get(task_id)
        if entry is None:
            raise KeyError(f"the data engine holds no task '{task_id}'")
        return entry.task

    @property
    def active(self) -> list[Task]:
        """The active pool, in the order the tasks entered it."""
        return self.buffer.tasks("active")

    # -- synthesis -------------------------------------------------------------------------
    @staticmethod
    def _check_synthesis(domains: Iterable[str], mode: str) -> None:
        """Refuse a synthesizing mode on a benchmark domain that rods' synthesis cannot
        grow (``data.synthesize: false`` runs there)."""
        from rods_env.benchmark import BenchmarkDomain
        from rods_env.registry import benchmark_names, load_any_domain

        benchmarks = set(benchmark_names())
        for name in sorted(set(domains) & benchmarks):
            domain = load_any_domain(name)
            if isinstance(domain, BenchmarkDomain) and domain.synthesis is not None:
                raise ConfigError(
                    f"mode={mode} synthesizes tasks, but {name} cannot: {domain.synthesis}"
                )
            if isinstance(domain, BenchmarkDomain) and mode != "rods":
                raise ConfigError(
                    f"mode={mode} expands tasks, but {name}'s synthesizer only resamples its "
                    "train tasks at matched structure: use mode=rods"
                )

    def _domain(self, name: str) -> Any:
        domain = self._domains.get(name)
        if domain is None:
            from rods_env.registry import load_domain

            domain = self._domains[name] = load_domain(name)
        return domain

    def _benchmark(self, name: str) -> Any:
        """The benchmark domain ``name`` when it synthesizes for itself (its
        ``synthesizer``: BFCL's resampler of its train half), else None (a rods domain)."""
        if name not in self._benchmarks:
            from rods_env.benchmark import BenchmarkDomain
            from rods_env.registry import benchmark_names, load_any_domain

            found = None
            if name in set(benchmark_names()):
                family = load_any_domain(name)
                if isinstance(family, BenchmarkDomain) and hasattr(family, "synthesizer"):
                    found = family
            self._benchmarks[name] = found
        return self._benchmarks[name]

    def dedupe_keys(self) -> set[str]:
        """Dedupe keys a synthesized task must not repeat: the starting pool, the reserved
        (test) tasks, and every task synthesized so far, retired or dropped ones included."""
        if self._keys is None:
            from rods_env.gold import GOLD_CACHE
            from rods_env.registry import domain_names
            from rods_env.synthesis import dedupe_key

            rods = {name.lower() for name in domain_names()}
            keys = set()
            for task in [*self._seeds.values(), *self._reserved]:
                if task.domain.lower() not in rods:
                    continue  # a benchmark's test task: no rods gold; the benchmark guards it
                keys.add(dedupe_key(task, GOLD_CACHE.get(self._domain(task.domain), task)))
            for entry in self.buffer.entries.values():
                if entry.key is not None:
                    keys.add(entry.key)
            self._keys = keys
        return self._keys

    def _synthesize(
        self,
        boundary: list[tuple[Task, GroupStats]],
        graduated: list[tuple[Task, GroupStats]],
        step: int,
    ) -> _Round:
        """Variants of this step's boundary tasks (and of tasks just retired as mastered),
        queued as candidates.

        Boundary parents go first, in order of their group's reward variance, highest first
        (the tasks the policy is least sure about), until ``max_candidates`` wait. Each
        parent gets ``synth_per_boundary`` variants per synthesis mode in use
        (:attr:`synth_modes`: mode ``rods`` resamples only); with ``expand`` in use, a
        parent the policy mostly solves (group mean >= 0.5) gets its harder neighbours
        (*expand*) first, one it mostly fails its same-structure siblings (*resample*)
        first, and a task retired as mastered gets only harder neighbours (with
        ``expand_mastered``), so the curriculum climbs past what the policy has learned.
        """
        from rods_env.synthesis import SynthesisConfig, Synthesizer

        started = time.perf_counter()
        cfg = self.config
        room = cfg.max_candidates - self.buffer.candidates()
        result = _Round()
        modes_in_use = self.synth_modes
        if room <= 0 or cfg.synth_per_boundary <= 0 or not modes_in_use:
            result.seconds = time.perf_counter() - started
            return result
        keys = self.dedupe_keys()
        seed = round_seed(self.seed, step)
        parents: dict[str, tuple[Task, list[str]]] = {}
        ranked = sorted(boundary, key=lambda ts: -ts[1].variance)  # stable on ties
        for task, stats in ranked:  # a task twice in one batch counts once
            expand_first = stats.mean >= 0.5
            modes: list[str] = sorted(modes_in_use, key=lambda m: (m == "expand") != expand_first)
            parents.setdefault(task.id, (task, modes))
        for task, _ in graduated:
            if "expand" in modes_in_use:
                parents.setdefault(task.id, (task, ["expand"]))
        rods_parents = False
        for task, _ in parents.values():
            if self._benchmark(task.domain) is None:
                self._domain(task.domain)
                rods_parents = True
        synthesizers: dict[str, Any] = {}
        own: dict[str, Any] = {}  # a benchmark's own resampler, per domain
        for task, _ in parents.values():
            family = self._benchmark(task.domain)
            if family is not None and task.domain not in own:
                own[task.domain] = family.synthesizer(cfg.synth_per_boundary, seed, keys)
        for mode in modes_in_use if rods_parents else ():
            synth = Synthesizer(
                SynthesisConfig(
                    per_seed=cfg.synth_per_boundary,
                    mode=mode,
                    augment=tuple(cfg.synth_augment),
                    seed=seed,
                    attempts=cfg.synth_attempts,
                    grow=tuple(cfg.synth_grow),
                ),
                domains=self._domains,
                known=keys,
            )
            if cfg.synth_augment:
                # plausible guesses for missing_parameter come from the pool's own facts
                synth.remember(self.buffer.tasks("active"))
            synthesizers[mode] = synth
        every = [*synthesizers.values(), *own.values()]
        for parent, parent_modes in parents.values():
            for name in parent_modes:
                synth = own.get(parent.domain) or synthesizers[name]
                for outcome in synth.variants(parent):
                    if not outcome.accepted:
                        result.rejected[outcome.reason] += 1
                        continue
                    if outcome.task.id in self.buffer.entries:
                        result.rejected["duplicate"] += 1
                        continue
                    keys.add(outcome.key)
                    for other in every:
                        other.seen.add(outcome.key)
                    self.buffer.offer(outcome.task, outcome.key, step=step)
                    result.accepted += 1
                    room -= 1
                    if room <= 0:
                        result.seconds = time.perf_counter() - started
                        return result
        result.seconds = time.perf_counter() - started
        return result

    def _uniform_parents(self, n: int, step: int) -> list[tuple[Task, GroupStats]]:
        """``n`` parents drawn uniformly from the active pool (the ablation ``parents:
        uniform``), seeded by ``(run seed, step)``; each with the stats of its last visit
        (none yet: an empty group, which orders it last and resamples it first)."""
        if n <= 0:
            return []
        active = [e for e in self.buffer.entries.values() if e.status == "active"]
        rng = random.Random(f"rods-data:parents:{self.seed}:{step}")
        drawn = rng.sample(active, min(n, len(active)))
        out = []
        for entry in drawn:
            last = entry.history[-1] if entry.history else None
            stats = GroupStats(float(last[2]), float(last[3]), 0) if last else GroupStats.of(())
            out.append((entry.task, stats))
        return out

    def _count(self, accepted: int, rejected: Mapping[str, int], admitted: int) -> None:
        self.totals["accepted"] += accepted
        self.totals["admitted"] += admitted
        totals = self.totals["rejected"]
        for reason, n in rejected.items():
            totals[reason] = totals.get(reason, 0) + n

    # -- persistence -----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The engine's state as JSON-able data: the buffer (synthesized tasks in full, zone
        histories, streaks, parking), the removal log, every dedupe key, and the totals."""
        return {
            "version": STATE_VERSION,
            "mode": self.mode,
            "synth_modes": list(self.synth_modes),
            "seed": self.seed,
            "buffer": self.buffer.state_dict(),
            "keys": sorted(self._keys) if self._keys is not None else None,
            "last_signal_step": self.last_signal_step,
            "totals": {
                "accepted": self.totals["accepted"],
                "admitted": self.totals["admitted"],
                "rejected": dict(sorted(self.totals["rejected"].items())),
            },
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (for the same starting pool).

        Raises:
            RodsError: when the state is of another version, mode or set of synthesis
                modes, or names a seed task
                that the engine was not given.
        """
        if state.get("version") != STATE_VERSION:
            raise RodsError(
                f"data engine state version {state.get('version')!r} is not {STATE_VERSION}"
            )
        if state.get("mode") != self.mode:
            raise RodsError(
                f"data engine state is of mode {state.get('mode')!r}, this engine runs {self.mode!r}"
            )
        saved_modes = state.get("synth_modes")  # older states lack it
        if saved_modes is not None and tuple(saved_modes) != self.synth_modes:
            raise RodsError(
                f"data engine state synthesized with {saved_modes}, this engine uses "
                f"{list(self.synth_modes)}"
            )
        self.seed = int(state["seed"])
        self.buffer.load_state_dict(state["buffer"], self._seeds)
        keys = state.get("keys")
        self._keys = set(keys) if keys is not None else None
        self.last_signal_step = int(state.get("last_signal_step", -1))  # older states lack it
        totals = state["totals"]
        self.totals = {
            "accepted": int(totals["accepted"]),
            "admitted": int(totals["admitted"]),
            "rejected": dict(totals["rejected"]),
        }
