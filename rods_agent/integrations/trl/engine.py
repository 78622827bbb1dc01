"""The RODS data engine inside TRL: an endless dataset view and a ``TrainerCallback``.

``GRPOTrainer`` reads its prompts from a dataset and reads it ahead (the dataloader
prefetches, the repeat wrapper buffers a whole generation batch), so a dataset that sampled
tasks when a row is *read* would sample round r+1 before round r's rewards are in. The view
therefore binds late: each row names only a slot of a generation round (``rods_round``,
``rods_slot``); the environment's ``reset`` asks the view for the slot's task, and the view
samples a round's tasks from the engine the first time one of its slots is reset -- when
TRL starts generating that round, after the previous round was observed.

Per round::

    reset(rods_round=r, rods_slot=i)  -> EngineDataset.task_for   (engine.sample(B, step=r) once)
    get_reward()                      -> EngineDataset.record     (this rank's rewards)
    RodsCallback.on_step_end          -> gather every rank's rewards, engine.observe(groups, step=r)

Several processes (DDP, ZeRO, FSDP) each hold an engine. They stay identical because the
engine is deterministic given its inputs (its random streams are seeded by (run seed,
step), synthesis included) and every rank observes the same gathered groups in the same
order; after each observation the callback compares a fingerprint of the engine state
across ranks and stops the run if they ever differ.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

from rods_agent.data import DataEngine, GroupResult
from rods_agent.data.engine import KEEP_EVERY_GROUP
from rods_agent.integrations.trl.data import policy_prompt
from rods_env.errors import ConfigError, RodsError
from rods_env.fileio import append_jsonl, read_jsonl, write_json, write_jsonl
from rods_env.registry import AnyDomain
from rods_env.task import Task

if TYPE_CHECKING:
    from datasets import IterableDataset

ENGINE_STATE = "rods_data_engine.json"
"""File name of the engine's state in a TRL checkpoint folder."""
METRICS = "rods_metrics.jsonl"
"""File name of the data metrics, one line per observed round, in TRL's output folder."""


def all_gather(obj: Any) -> list[Any]:
    """``obj`` from every process of the default process group (``[obj]`` without one)."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - torch is a dependency of the agent extra
        return [obj]
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def process_rank() -> int:
    """This process's rank in the default process group (0 without one)."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover
        return 0
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def state_fingerprint(engine: DataEngine) -> str:
    """A short hash of the engine's whole state (equal states, equal fingerprints)."""
    text = json.dumps(engine.state_dict(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class EngineDataset:
    """The data engine's active pool as an endless TRL dataset whose rows bind late.

    Args:
        engine: The data engine (one per process; see the module docstring).
        env_id: The rods env id (or domain) the engine's tasks belong to.
        tasks_per_round: Distinct tasks per generation round: TRL's
            ``generation_batch_size // num_generations`` (:func:`rows_per_round`).
        reserved: Tasks that rows may name by ``task_id`` without being in the engine (the
            test split, for TRL's evaluation).
    """

    def __init__(
        self,
        engine: DataEngine,
        env_id: str | AnyDomain,
        *,
        tasks_per_round: int,
        reserved: Sequence[Task] = (),
    ) -> None:
        if tasks_per_round < 1:
            raise ConfigError(f"tasks_per_round must be at least 1, got {tasks_per_round}")
        from rods_agent.integrations.trl.env import resolve_domain

        self.domain = resolve_domain(env_id)
        self.engine = engine
        self.tasks_per_round = int(tasks_per_round)
        self._reserved = {t.id: t for t in reserved}
        self._rounds: dict[int, list[Task]] = {}
        self._step_of: dict[int, int] = {}  # a row's round -> the engine's step
        self._open: int | None = None  # the round sampled and not observed yet
        self._records: list[tuple[int, int, str, float]] = []
        self._groups: dict[int, list[GroupResult]] = {}
        self.observed_through = -1
        """The engine's last observed step (-1: none)."""

    # -- the dataset ------------------------------------------------------------------------
    def rows(self, start_round: int = 0) -> Iterator[dict[str, Any]]:
        """The endless stream of rows: ``tasks_per_round`` slots per round."""
        prompt = policy_prompt(self.domain)
        for r in itertools.count(start_round):
            for i in range(self.tasks_per_round):
                yield {"prompt": prompt, "task_id": "", "rods_round": r, "rods_slot": i}

    def dataset(self) -> IterableDataset:
        """The rows as a ``datasets.IterableDataset`` (train with ``max_steps``)."""
        from datasets import IterableDataset

        return IterableDataset.from_generator(self.rows)

    # -- what the environment calls ----------------------------------------------------------
    def tasks_for_round(self, r: int) -> list[Task]:
        """The tasks of the rows of round ``r``, sampled from the engine on first use.

        A new round is the engine's next step (``observed_through + 1``) whatever its row
        number, so a trainer that restarts its row stream on resume, or skips rows, still
        walks the engine's steps in order.

        Raises:
            RodsError: when a new round is asked for while the last one is not observed yet
                (the trainer reads rows ahead: see :class:`RodsCallback` for the settings).
        """
        tasks = self._rounds.get(r)
        if tasks is not None:
            return tasks
        if self._open is not None:
            raise RodsError(
                f"round {r} was asked for before round {self._open} was observed: the data "
                "engine samples a round after the previous one's rewards are in (add "
                "RodsCallback to the trainer, and keep shuffle_dataset=False)"
            )
        step = self.observed_through + 1
        tasks = self.engine.sample(self.tasks_per_round, step=step)
        # an active pool smaller than a round repeats tasks; their groups are merged
        tasks = [tasks[i % len(tasks)] for i in range(self.tasks_per_round)]
        self._rounds[r], self._step_of[r], self._open = tasks, step, r
        for old in [k for k in self._rounds if k != r and self._step_of[k] < step - 1]:
            del self._rounds[old], self._step_of[old]
        return tasks

    def task_for(self, row: Mapping[str, Any]) -> Task:
        """The task of a row: its slot's task, or the task it names by id."""
        r = row.get("rods_round")
        if r is not None:
            slot = int(row["rods_slot"])
            if not 0 <= slot < self.tasks_per_round:
                raise ConfigError(f"rods_slot {slot} is not in 0..{self.tasks_per_round - 1}")
            return self.tasks_for_round(int(r))[slot]
        task_id = row.get("task_id")
        if isinstance(task_id, str) and task_id in self._reserved:
            return self._reserved[task_id]
        if not isinstance(task_id, str) or not task_id:
            raise ConfigError(
                "a row of the data engine's dataset names a slot (rods_round, rods_slot) "
                f"or a task_id; got the columns {sorted(row)}"
            )
        try:
            return self.engine.task(task_id)
        except KeyError as exc:
            raise ConfigError(str(exc.args[0])) from None

    def record(self, row: Mapping[str, Any], task: Task, reward: float) -> None:
        """Keep a training episode's reward until the round is observed (evaluation rows,
        which name a task id, are not recorded)."""
        r = row.get("rods_round")
        if r is not None:
            self._records.append((int(r), int(row["rods_slot"]), task.id, float(reward)))

    def env_kwargs(self, row: Mapping[str, Any]) -> Mapping[str, Any]:
        """The environment arguments of a row's episode, as ``rods train`` gives them: mode
        ``envtuning``'s training rows get Environment Tuning's actionable hints; evaluation
        rows (a task id) never do."""
        if self.engine.mode == "envtuning" and row.get("rods_round") is not None:
            return {"actionable_hints": True}
        return {}

    @property
    def filters_groups(self) -> bool:
        """Whether the engine leaves some groups out of the loss (modes ``filter``,
        ``rods``, ``rods-expand``); ``static`` and ``envtuning`` keep every group."""
        return self.engine.mode not in KEEP_EVERY_GROUP

    # -- what the callback calls -------------------------------------------------------------
    def gather(self) -> dict[int, list[GroupResult]]:
        """Every process's recorded rewards, grouped by round and task (a collective call:
        every process must make it). The groups stay until :meth:`observe` takes them."""
        mine, self._records = self._records, []
        records: list[tuple[int, int, int, str, float]] = []
        for rank, theirs in enumerate(all_gather(mine)):
            records.extend((r, slot, rank, task_id, reward) for r, slot, task_id, reward in theirs)
        records.sort(key=lambda x: x[:3])  # the same order on every process
        by_round: dict[int, dict[str, list[float]]] = defaultdict(dict)
        for r, _, _, task_id, reward in records:
            by_round[r].setdefault(task_id, []).append(reward)
        for r, groups in by_round.items():
            merged = self._groups.setdefault(r, [])
            known = {g.task_id: i for i, g in enumerate(merged)}
            for task_id, rewards in groups.items():
                if task_id in known:
                    old = merged[known[task_id]]
                    merged[known[task_id]] = GroupResult(task_id, old.rewards + tuple(rewards))
                else:
                    merged.append(GroupResult(task_id, tuple(rewards)))
        return self._groups

    def keep(self, r: int, task_id: str) -> bool:
        """Whether the engine keeps the group of ``task_id`` in round ``r`` in the loss
        (call :meth:`gather` first)."""
        for group in self._groups.get(r, ()):
            if group.task_id == task_id:
                return self.engine.keep(group.rewards)
        raise RodsError(f"no rewards of task '{task_id}' in round {r} were gathered")

    def observe(self) -> list[dict[str, Any]]:
        """Hand every gathered round to the engine, in order; returns one report per round."""
        reports = []
        for r in sorted(self._groups):
            if r not in self._step_of:  # a round whose rows all ran on other processes
                self.tasks_for_round(r)
        for r in sorted(self._groups, key=lambda q: self._step_of[q]):
            groups = self._groups.pop(r)
            step = self._step_of[r]
            started = time.perf_counter()
            report = self.engine.observe(groups, step=step)
            rewards = [x for g in groups for x in g.rewards]
            reports.append(
                {
                    "round": step,
                    "reward": sum(rewards) / len(rewards) if rewards else None,
                    "groups": len(groups),
                    "completions": len(rewards),
                    "kept_groups": sum(self.engine.keep(g.rewards) for g in groups),
                    **report,
                    "group_rewards": {g.task_id: list(g.rewards) for g in groups},
                    "observe_seconds": time.perf_counter() - started,
                }
            )
            self.observed_through = step
            if self._open == r:
                self._open = None
        return reports

    # -- persistence --------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The engine's state and the last observed round (JSON-able)."""
        return {"engine": self.engine.state_dict(), "observed_through": self.observed_through}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (the same starting pool and mode)."""
        self.engine.load_state_dict(state["engine"])
        self.observed_through = int(state["observed_through"])
        self._open = None
        self._step_of.clear()
        self._rounds.clear()
        self._groups.clear()
        self._records.clear()


def rows_per_round(args: Any) -> int:
    """Distinct prompts per generation round of a ``GRPOConfig``."""
    return int(args.generation_batch_size) // int(args.num_generations)


class RodsCallback(TrainerCallback):
    """Feeds each step's group rewards to the data engine (a ``transformers`` callback).

    After every optimizer step it gathers the rewards every process recorded, observes
    each new round (zones, retirement, synthesis around the boundary, admission), writes
    the round's data metrics to ``<output_dir>/rods_metrics.jsonl`` (main process), and
    checks that the engine's state is the same on every process. It saves the engine with
    each checkpoint and restores it when training resumes from one.

    Args:
        view: The :class:`EngineDataset` the trainer reads.
        check_every: Compare engine fingerprints across processes every this many rounds
            (0: never).
        resume_from: The checkpoint folder a resumed run starts from, when it is not
            ``<output_dir>/checkpoint-<step>`` (where ``resume_from_checkpoint=True`` finds it).
    """

    def __init__(
        self, view: EngineDataset, *, check_every: int = 1, resume_from: str | Path | None = None
    ) -> None:
        self.view = view
        self.check_every = int(check_every)
        self.resume_from = Path(resume_from) if resume_from is not None else None
        self.fingerprints: list[str] = []
        self.seconds = {"gather": 0.0, "observe": 0.0, "check": 0.0}
        """Time this process spent gathering rewards, in the engine, and comparing states."""
        self.steps_run = 0
        """Optimizer steps this callback saw (this run, resumed steps not counted)."""

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Check the trainer's settings; restore the engine when resuming a checkpoint."""
        if getattr(args, "shuffle_dataset", False):
            raise ConfigError(
                "the data engine's dataset must not be shuffled: set shuffle_dataset=False"
            )
        per_round = rows_per_round(args)
        if per_round != self.view.tasks_per_round:
            raise ConfigError(
                f"the data engine's dataset has {self.view.tasks_per_round} tasks per round, but "
                f"the trainer generates {per_round} (generation_batch_size // num_generations)"
            )
        if state.global_step > 0:
            folder = self.resume_from or Path(args.output_dir) / f"checkpoint-{state.global_step}"
            path = folder / ENGINE_STATE
            if not path.is_file():
                raise ConfigError(f"{path}: no data engine state to resume from")
            self.view.load_state_dict(json.loads(path.read_text(encoding="utf-8")))
            metrics = Path(args.output_dir) / METRICS
            if process_rank() == 0 and metrics.is_file():
                # rounds logged after the checkpoint will be run again
                kept = [r for r in read_jsonl(metrics) if r["round"] <= self.view.observed_through]
                write_jsonl(metrics, kept)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Observe the rounds generated so far and log their data metrics."""
        self.steps_run += 1
        started = time.perf_counter()
        self.view.gather()
        gathered = time.perf_counter()
        reports = self.view.observe()
        self.seconds["gather"] += gathered - started
        self.seconds["observe"] += time.perf_counter() - gathered
        rank = process_rank()
        for report in reports:
            if self.check_every and report["round"] % self.check_every == 0:
                started = time.perf_counter()
                self._check_same_state(report["round"])
                self.seconds["check"] += time.perf_counter() - started
        if rank == 0 and reports:
            rows = [{"step": state.global_step, **report} for report in reports]
            append_jsonl(Path(args.output_dir) / METRICS, rows)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Write the engine's state into the checkpoint folder (main process)."""
        if process_rank() == 0:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            write_json(folder / ENGINE_STATE, self.view.state_dict())

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Write each process's final engine state next to the metrics."""
        rank = process_rank()
        name = ENGINE_STATE if rank == 0 else f"rods_data_engine.rank{rank}.json"
        write_json(Path(args.output_dir) / name, self.view.state_dict())

    def _check_same_state(self, r: int) -> None:
        fingerprint = state_fingerprint(self.view.engine)
        self.fingerprints.append(fingerprint)
        every = all_gather(fingerprint)
        if len(set(every)) > 1:
            raise RodsError(
                f"the data engine's state differs across processes after round {r}: "
                f"{every} (rank order)"
            )
