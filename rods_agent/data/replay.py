"""The replay buffer: the active pool of tasks with their zone histories.

Every task the engine knows is an :class:`Entry` with a status:

- ``active``: in the active pool (capacity C), sampled for training;
- ``waiting``: a seed task beyond the capacity, or a synthesized candidate not admitted yet;
- ``parked``: hard for ``hard_m`` visits in a row; it comes back for a retry after
  ``park_steps`` (doubling with each park of the same task).

A task that leaves for good (mastered ``mastered_k`` visits in a row, older than
``max_age``, or a synthesized task whose first visits did not confirm the boundary) is
dropped from the entries; a short record of it stays in :attr:`ReplayBuffer.removed`.

With ``retire_seeds`` off, a task of the starting pool never leaves for good (it is
still parked when hard, and comes back). With ``dynamic=False`` (the ``static``,
``filter`` and ``envtuning`` modes) the buffer is a fixed pool:
every task is active, nothing is retired or parked, and sampling is uniform. Zone
histories are kept either way, so every mode reports the same statistics.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from rods_agent.data.boundary import GroupStats, Zone
from rods_agent.training.config import DataConfig
from rods_env.errors import RodsError
from rods_env.task import Task

Status = Literal["waiting", "active", "parked"]
Event = Literal["confirmed", "dropped", "retired", "parked"]

SCORE_DECAY = 0.5
"""Weight of the newest visit in a task's recent-variance score (an exponential average)."""

MAX_PARK_DOUBLINGS = 5
"""A task parked again and again waits at most ``park_steps * 2**5`` steps."""


@dataclass
class Entry:
    """One task in the buffer and what the engine has seen of it.

    Attributes:
        task: The task.
        key: Its dedupe key when known (synthesized tasks carry it from the critique).
        status: ``active``, ``waiting`` or ``parked``.
        created: Step at which the task entered the buffer (seeds: 0).
        admitted: Step at which it entered the active pool (None while waiting).
        visits: Groups observed.
        history: The last visits as ``[step, zone, mean, std]`` (newest last).
        mastered_streak: Mastered visits in a row, up to now.
        hard_streak: Hard visits in a row, up to now.
        score: Recent reward variance, scaled to [0, 1] (None before the first visit).
        confirmed: False for a synthesized task still on probation.
        boundary_visits: Visits at the boundary (what confirms a synthesized task).
        parks: Times the task was parked.
        parked_until: First step at which a parked task may come back.
    """

    task: Task
    key: str | None
    status: Status
    created: int
    admitted: int | None = None
    visits: int = 0
    history: list[list[Any]] = field(default_factory=list)
    mastered_streak: int = 0
    hard_streak: int = 0
    score: float | None = None
    confirmed: bool = True
    boundary_visits: int = 0
    parks: int = 0
    parked_until: int | None = None

    @property
    def synthesized(self) -> bool:
        """Whether the task came from synthesis (not from the starting pool)."""
        return self.task.provenance.origin == "synthesized"

    @property
    def zone(self) -> Zone | None:
        """The zone of the last visit (None before the first)."""
        return self.history[-1][1] if self.history else None

    def weight(self, variance_weight: float) -> float:
        """Sampling weight: 1 plus ``variance_weight`` times the recent-variance score.

        An unvisited task counts as maximally uncertain (score 1), so a newly admitted
        candidate is visited soon and its probation ends quickly.
        """
        score = 1.0 if self.score is None else self.score
        return 1.0 + variance_weight * score

    def to_dict(self, *, with_task: bool) -> dict[str, Any]:
        """A JSON-able dict (the task body only when ``with_task``; else its id)."""
        return {
            "id": self.task.id,
            "task": self.task.model_dump(mode="json") if with_task else None,
            "key": self.key,
            "status": self.status,
            "created": self.created,
            "admitted": self.admitted,
            "visits": self.visits,
            "history": [list(v) for v in self.history],
            "mastered_streak": self.mastered_streak,
            "hard_streak": self.hard_streak,
            "score": self.score,
            "confirmed": self.confirmed,
            "boundary_visits": self.boundary_visits,
            "parks": self.parks,
            "parked_until": self.parked_until,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], task: Task) -> Entry:
        """The entry :meth:`to_dict` wrote, for ``task``."""
        return cls(
            task=task,
            key=data["key"],
            status=data["status"],
            created=int(data["created"]),
            admitted=data["admitted"],
            visits=int(data["visits"]),
            history=[list(v) for v in data["history"]],
            mastered_streak=int(data["mastered_streak"]),
            hard_streak=int(data["hard_streak"]),
            score=data["score"],
            confirmed=bool(data["confirmed"]),
            boundary_visits=int(data["boundary_visits"]),
            parks=int(data["parks"]),
            parked_until=data["parked_until"],
        )


class ReplayBuffer:
    """The active pool over seed and synthesized tasks, with staged injection and retirement.

    Args:
        config: Capacity, retirement and injection settings (see :class:`DataConfig`).
        dynamic: Apply capacity, retirement, parking and weighted sampling (mode ``rods``);
            False keeps a fixed pool sampled uniformly (modes ``static`` and ``filter``).
    """

    def __init__(self, config: DataConfig, *, dynamic: bool) -> None:
        self.config = config
        self.dynamic = dynamic
        self.entries: dict[str, Entry] = {}
        self.removed: list[dict[str, Any]] = []

    # -- adding ----------------------------------------------------------------------------
    def add_seed(self, task: Task) -> Entry:
        """Add a task of the starting pool: active while there is room, else waiting."""
        if task.id in self.entries:
            raise RodsError(f"task id '{task.id}' appears twice in the training pool")
        room = not self.dynamic or self.count("active") < self.config.capacity
        entry = Entry(task, None, "active" if room else "waiting", created=0)
        entry.admitted = 0 if room else None
        self.entries[task.id] = entry
        return entry

    def offer(self, task: Task, key: str, *, step: int) -> Entry:
        """Queue a synthesized candidate; it waits for :meth:`admit` and then its probation."""
        if task.id in self.entries:
            raise RodsError(f"synthesized task id '{task.id}' is already in the buffer")
        entry = Entry(task, key, "waiting", created=step, confirmed=False)
        self.entries[task.id] = entry
        return entry

    def candidates(self) -> int:
        """Synthesized candidates waiting for admission."""
        return sum(1 for e in self.entries.values() if e.status == "waiting" and e.synthesized)

    # -- sampling --------------------------------------------------------------------------
    def sample(self, n: int, rng: random.Random) -> list[Task]:
        """Up to ``n`` distinct tasks of the active pool.

        Dynamic buffers draw without replacement with probability proportional to
        :meth:`Entry.weight` (Efraimidis-Spirakis keys); when the active pool has fewer
        than ``n`` tasks, parked tasks due soonest are retried early, then waiting tasks
        are taken early. Fixed pools draw uniformly.
        """
        active = [e for e in self.entries.values() if e.status == "active"]
        if not self.dynamic:
            return [e.task for e in rng.sample(active, min(n, len(active)))]
        if len(active) < n:
            parked = sorted(
                (e for e in self.entries.values() if e.status == "parked"),
                key=lambda e: e.parked_until or 0,
            )
            active.extend(parked[: n - len(active)])
        if len(active) < n:
            waiting = [e for e in self.entries.values() if e.status == "waiting"]
            waiting.sort(key=lambda e: not e.synthesized)  # candidates, then seeds
            active.extend(waiting[: n - len(active)])
        weight = self.config.variance_weight
        keyed = [(rng.random() ** (1.0 / e.weight(weight)), i) for i, e in enumerate(active)]
        keyed.sort(reverse=True)
        return [active[i].task for _, i in keyed[:n]]

    # -- observing -------------------------------------------------------------------------
    def visit(self, task_id: str, stats: GroupStats, zone: Zone, *, step: int) -> Event | None:
        """Record one group of ``task_id`` and apply probation, retirement and parking.

        Returns:
            What happened to the task: ``confirmed`` (a synthesized task's probation
            passed), ``dropped`` (its first visits were not at the boundary), ``retired``
            (mastered ``mastered_k`` visits in a row), ``parked`` (hard ``hard_m`` visits in
            a row), or None.
        """
        entry = self.entries.get(task_id)
        if entry is None:
            raise RodsError(f"a group of task '{task_id}', which the data engine does not hold")
        cfg = self.config
        entry.visits += 1
        entry.history.append([step, zone, stats.mean, stats.std])
        del entry.history[: -cfg.history]
        scaled = min(1.0, 4.0 * stats.variance)  # a [0, 1] reward's variance is at most 1/4
        entry.score = (
            scaled
            if entry.score is None
            else (1.0 - SCORE_DECAY) * entry.score + SCORE_DECAY * scaled
        )
        entry.mastered_streak = entry.mastered_streak + 1 if zone == "mastered" else 0
        entry.hard_streak = entry.hard_streak + 1 if zone == "hard" else 0
        if zone == "boundary":
            entry.boundary_visits += 1
        if not self.dynamic:
            return None
        if entry.status != "active":  # sampled early: the active pool ran short
            self._activate(entry, step)
        if not entry.confirmed:
            if zone != "boundary":
                self._remove(entry, "not_boundary", step)
                return "dropped"
            if entry.boundary_visits >= cfg.confirm_visits:
                entry.confirmed = True
                return "confirmed"
            return None
        if entry.mastered_streak >= cfg.mastered_k and self._retirable(entry):
            self._remove(entry, "mastered", step)
            return "retired"
        if entry.hard_streak >= cfg.hard_m:
            # The streak is kept: one more hard visit after the retry parks it again.
            entry.parks += 1
            entry.status = "parked"
            wait = cfg.park_steps * 2 ** min(entry.parks - 1, MAX_PARK_DOUBLINGS)
            entry.parked_until = step + wait
            return "parked"
        return None

    def expire(self, step: int) -> list[str]:
        """Retire active synthesized tasks admitted more than ``max_age`` steps ago."""
        if not self.dynamic or self.config.max_age <= 0:
            return []
        old = [
            e
            for e in self.entries.values()
            if e.status == "active"
            and e.synthesized
            and self._retirable(e)
            and e.admitted is not None
            and step - e.admitted >= self.config.max_age
        ]
        for entry in old:
            self._remove(entry, "age", step)
        return [e.task.id for e in old]

    def admit(self, step: int) -> dict[str, int]:
        """Fill the active pool: parked tasks due for a retry, synthesized candidates, then
        waiting seeds; a full pool first evicts tasks last seen mastered to make room.

        Synthesized candidates go before waiting seeds (they were made around tasks just
        seen at the boundary; a waiting seed's zone is unknown), but enter at most
        ``admit_per_step`` per step, and only while the active pool holds fewer synthesized
        tasks than :meth:`synthesized_cap`.

        Returns:
            How many entered: ``{"retried", "synthesized", "seeds"}``.
        """
        done = {"retried": 0, "synthesized": 0, "seeds": 0}
        if not self.dynamic:
            return done
        cfg = self.config
        room = cfg.capacity - self.count("active")
        due = sorted(
            (
                e
                for e in self.entries.values()
                if e.status == "parked" and (e.parked_until or 0) <= step
            ),
            key=lambda e: e.parked_until or 0,
        )
        waiting = [e for e in self.entries.values() if e.status == "waiting"]
        synth_cap = self.synthesized_cap()
        synth_active = sum(
            1 for e in self.entries.values() if e.status == "active" and e.synthesized
        )
        # A full pool makes room for what may enter this step (retries, candidates within
        # the rate and the cap, seeds) by evicting tasks last seen mastered, before
        # anything is admitted.
        candidates = sum(1 for e in waiting if e.synthesized)
        admissible = min(candidates, cfg.admit_per_step, max(0, synth_cap - synth_active))
        wanted = len(due) + admissible + (len(waiting) - candidates)
        room += self._evict(step, wanted - max(room, 0))
        for entry in due:
            if room <= 0:
                break
            self._activate(entry, step)
            room -= 1
            done["retried"] += 1
        for entry in waiting:
            if room <= 0 or done["synthesized"] >= cfg.admit_per_step or synth_active >= synth_cap:
                break
            if entry.synthesized:
                self._activate(entry, step)
                room -= 1
                synth_active += 1
                done["synthesized"] += 1
        for entry in waiting:
            if room <= 0:
                break
            if not entry.synthesized:
                self._activate(entry, step)
                room -= 1
                done["seeds"] += 1
        return done

    def synthesized_cap(self) -> int:
        """The most synthesized tasks the active pool may hold: ``synth_cap`` when set (a
        hard count); else ``p_max * capacity`` while the starting pool can fill the rest,
        and the room no task of the starting pool can take once they are used (retired:
        every one left is active, waiting or parked), so the pool stays full rather than
        shrink as the seeds are mastered."""
        cfg = self.config
        if cfg.synth_cap is not None:
            return min(cfg.synth_cap, cfg.capacity)
        seeds = sum(1 for e in self.entries.values() if not e.synthesized)
        return max(math.floor(cfg.p_max * cfg.capacity), cfg.capacity - seeds)

    def _evict(self, step: int, wanted: int) -> int:
        """Make room for up to ``wanted`` waiting tasks in a full pool by retiring active
        tasks whose last visit was mastered, least variance first (a full buffer drops
        its least useful items; the ``mastered_k`` streak would cost more visits)."""
        if wanted <= 0:
            return 0
        candidates = [
            e
            for e in self.entries.values()
            if e.status == "active"
            and e.confirmed
            and e.mastered_streak >= 1
            and self._retirable(e)
        ]
        candidates.sort(key=lambda e: e.score if e.score is not None else 1.0)
        for entry in candidates[:wanted]:
            self._remove(entry, "evicted", step)
        return len(candidates[:wanted])

    def _retirable(self, entry: Entry) -> bool:
        """Whether ``entry`` may leave for good (as mastered, by age or by eviction): a
        synthesized task always, a task of the starting pool unless ``retire_seeds`` is off."""
        return entry.synthesized or self.config.retire_seeds

    def _activate(self, entry: Entry, step: int) -> None:
        if entry.status == "waiting":
            entry.admitted = step
        entry.status = "active"
        entry.parked_until = None

    def _remove(self, entry: Entry, reason: str, step: int) -> None:
        del self.entries[entry.task.id]
        self.removed.append(
            {
                "id": entry.task.id,
                "reason": reason,
                "step": step,
                "origin": entry.task.provenance.origin,
                "generation": entry.task.provenance.generation,
                "visits": entry.visits,
            }
        )

    # -- reading ---------------------------------------------------------------------------
    def exhausted(self, since: int) -> bool:
        """Whether nothing is left to train on: no task active or waiting, and every parked
        task was last seen (hard) at or after step ``since``, the last step whose groups
        changed the policy, so a retry would find it hard again."""
        for entry in self.entries.values():
            if entry.status != "parked":
                return False
            if not entry.history or entry.history[-1][0] < since:
                return False
        return True

    def count(self, status: Status) -> int:
        """Entries with ``status``."""
        return sum(1 for e in self.entries.values() if e.status == status)

    def tasks(self, status: Status = "active") -> list[Task]:
        """The tasks with ``status``, in the order they entered the buffer."""
        return [e.task for e in self.entries.values() if e.status == status]

    def composition(self) -> dict[str, Any]:
        """The pool's make-up: what ``pool`` in the step metrics holds.

        ``seed`` and ``synthesized`` count the active pool; ``generations`` splits it by
        synthesis generation (0: the starting pool); ``difficulty`` is the mean of each
        difficulty knob of its tasks (:attr:`rods_env.task.Signature.knobs`: dependency
        depth, requests in a turn, turns, skills composed).
        """
        active = [e for e in self.entries.values() if e.status == "active"]
        generations: dict[str, int] = {}
        knobs: dict[str, float] = {}
        measured = 0
        for e in active:
            g = str(e.task.provenance.generation)
            generations[g] = generations.get(g, 0) + 1
            if e.task.signature is not None:
                measured += 1
                for knob, value in e.task.signature.knobs.items():
                    knobs[knob] = knobs.get(knob, 0.0) + value
        return {
            "seed": sum(1 for e in active if not e.synthesized),
            "synthesized": sum(1 for e in active if e.synthesized),
            "parked": self.count("parked"),
            "active": len(active),
            "probation": sum(1 for e in active if not e.confirmed),
            "candidates": self.candidates(),
            "waiting_seeds": sum(
                1 for e in self.entries.values() if e.status == "waiting" and not e.synthesized
            ),
            "retired": len(self.removed),
            "generations": dict(sorted(generations.items(), key=lambda kv: int(kv[0]))),
            "difficulty": {k: v / measured for k, v in knobs.items()} if measured else {},
        }

    # -- persistence -----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """JSON-able state: every entry (synthesized tasks in full) and the removal log."""
        return {
            "entries": [e.to_dict(with_task=e.synthesized) for e in self.entries.values()],
            "removed": [dict(r) for r in self.removed],
        }

    def load_state_dict(self, state: Mapping[str, Any], seeds: Mapping[str, Task]) -> None:
        """Restore :meth:`state_dict`; seed tasks are looked up by id in ``seeds``."""
        entries: dict[str, Entry] = {}
        for data in state["entries"]:
            if data["task"] is not None:
                task = Task.model_validate(data["task"])
            else:
                found = seeds.get(data["id"])
                if found is None:
                    raise RodsError(
                        f"the saved data engine holds task '{data['id']}', which is not in "
                        "the training pool it was given (was the pool or its split changed?)"
                    )
                task = found
            entries[task.id] = Entry.from_dict(data, task)
        self.entries = entries
        self.removed = [dict(r) for r in state["removed"]]

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Any:
        return iter(list(self.entries.values()))


def seeds_by_id(tasks: Iterable[Task]) -> dict[str, Task]:
    """Tasks keyed by id."""
    return {t.id: t for t in tasks}
