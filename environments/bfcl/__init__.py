"""BFCL multi-turn: the benchmark RODS is judged by, as rods environments scored by BFCL's rules.

Each environment id is one :class:`~rods_env.benchmark.BenchmarkDomain` instance, declared
under the entry-point group ``rods.benchmarks`` (an entry-point name with capitals is the
id's title)::

    BFCL                       rods/BFCL-v0                        all 800 tasks (`--env bfcl`)
    BFCL-MultiTurn             rods/BFCL-MultiTurn-v0              all 800 tasks
    BFCL-MultiTurn-Base        rods/BFCL-MultiTurn-Base-v0         base (200)
    BFCL-MultiTurn-MissParam   rods/BFCL-MultiTurn-MissParam-v0    miss_param (200)
    BFCL-MultiTurn-MissFunc    rods/BFCL-MultiTurn-MissFunc-v0     miss_func (200)
    BFCL-MultiTurn-LongContext rods/BFCL-MultiTurn-LongContext-v0  long_context (200)
    BFCL-Paper                 rods/BFCL-Paper-v0                  the RODS paper's setting: train
                                                                   on 400, test on the other 400

    import gymnasium, rods_env
    env = gymnasium.make("rods/BFCL-MultiTurn-MissFunc-v0")
    strict = gymnasium.make("rods/BFCL-MultiTurn-v0", verdicts="strict")  # the correct verdicts

The data, the API classes and the function docs come from the installed ``bfcl-eval``
package (``bash scripts/setup.sh bfcl``), imported only when an environment or the tasks
are made.

**Splits** (the paper's setting, :mod:`~environments.bfcl.split`): every id serves all of
its tasks by default (``seed_tasks()``, ``make_env()``: BFCL's full benchmark, whose
leaderboard numbers need every task); ``split="train"`` is the 100 train tasks of each
category (400 for the ids of all four), ``split="test"`` the other 100 (400).
``training_tasks()`` gives the train half and :meth:`BFCLDomain.synthesizer` resamples it
(:mod:`~environments.bfcl.resample`, the paper's RODS on BFCL), each variant held against the
test half (:mod:`~environments.bfcl.guard`).

Modules: :mod:`~environments.bfcl.apis` (the safe execution layer: dispatch, per-episode
instances, bounded MathAPI, result texts, state, gold replay), :mod:`~environments.bfcl.tasks`
(the tasks, their rods views, BFCL's leaderboard numbers), :mod:`~environments.bfcl.reading`
(calls read as BFCL's decoder and executor read them), :mod:`~environments.bfcl.verdicts`
(BFCL's checker turn by turn, official and strict), :mod:`~environments.bfcl.env` (the
environment), :mod:`~environments.bfcl.agents` (oracle, perturbations, trivial agents)
and :mod:`~environments.bfcl.export` (BFCL result files from rods' episodes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rods_env.benchmark import BenchmarkDomain
from rods_env.errors import ConfigError
from rods_env.task import Task

MAX_STEPS = 8 * 21
"""The most agent steps a task can take under BFCL's rules (8 turns, 21 steps each)."""

TRAIN_DOMAIN = "bfcl-api"
"""The rods domain over the same API classes that trains for BFCL (``environments.bfcl.
world``): ``rods train env=[bfcl]`` trains on it and evaluates on BFCL's tasks."""

SPLITS: tuple[str, ...] = ("train", "test", "all")
"""The splits a BFCL id takes (``"all"``, like None: every task)."""


class BFCLDomain(BenchmarkDomain):
    """BFCL multi-turn, one category or all four, scored by BFCL's checker rules.

    Args:
        name: The entry-point name in lower case (``"bfcl-multiturn-base"``).
        title: The id's title (``"BFCL-MultiTurn-Base"``).
        category: ``base``, ``miss_param``, ``miss_func``, ``long_context``, or None for all.
    """

    user_modes = ("scripted",)
    synthesis = None  # mode rods resamples the train half: synthesizer()
    train_domain: str | None = TRAIN_DOMAIN
    max_steps = MAX_STEPS
    verdicts = ("official", "strict")
    description = "BFCL v4 multi-turn (8 API classes), scored by BFCL's own checker rules"

    def __init__(self, name: str, title: str, category: str | None, *, paper: bool = False) -> None:
        self.name = name
        self.title = title
        self.category = category
        self.paper = paper
        if paper:
            # the paper's setting trains on BFCL's own train half, not on a stand-in domain
            self.train_domain = None
            self.description = (
                "BFCL v3 multi-turn in the RODS paper's setting: 100 tasks of each category "
                "train, the other 100 test (environments/bfcl/paper_split.json)"
            )
        self._views: list[Task] | None = None

    def missing(self) -> str | None:
        """Why bfcl-eval cannot be used (with the install command), or None."""
        from environments.bfcl.apis import bfcl_missing

        return bfcl_missing()

    def seed_tasks(self, split: str | None = None) -> list[Task]:
        """BFCL's tasks as rods views, each with its split in the paper's split.

        Args:
            split: ``"train"`` or ``"test"``: that half (100 tasks per category); None or
                ``"all"``: every task (800 for the ids of all four categories).

        Raises:
            ConfigError: for another split.
        """
        if split not in (None, *SPLITS):
            raise ConfigError(f"unknown BFCL split '{split}'; splits: {', '.join(SPLITS)}")
        if self._views is None:
            from environments.bfcl.tasks import load_tasks, task_view

            self._views = [task_view(t, self.name) for t in load_tasks(self.category)]
        if split in (None, "all"):
            return list(self._views)
        return [t for t in self._views if t.split == split]

    def make_env(self, **kwargs: Any) -> Any:
        """A :class:`~environments.bfcl.env.BFCLEnv` of this category."""
        from environments.bfcl.env import BFCLEnv

        return BFCLEnv(self.category, **kwargs)

    def check_tasks(self, tasks: Sequence[Task]) -> list[str]:
        """Tasks that are neither BFCL multi-turn tasks of this installation nor resampled
        variants with a readable payload (the gold of every BFCL task is checked against
        BFCL's own checker by the tests; a variant's was, when it was made)."""
        from environments.bfcl.tasks import from_payload, task_index

        index = task_index()
        found = []
        for t in tasks:
            if t.payload is not None:
                try:
                    from_payload(t.payload)
                except ConfigError as exc:
                    found.append(f"{t.id}: {exc}")
            elif t.id not in index:
                found.append(f"{t.id}: not a BFCL multi-turn task")
        return found

    def oracle_agent(self, task: Task, *, user_mode: str = "scripted") -> Any:
        """The gold replay (:class:`~environments.bfcl.agents.OracleAgent`); a resampled
        variant's gold comes from its payload."""
        from environments.bfcl.agents import OracleAgent
        from environments.bfcl.tasks import bfcl_task

        return OracleAgent(bfcl_task(task))

    @property
    def policy(self) -> str:
        """Empty: BFCL's function-calling mode sends no system prompt."""
        return ""

    def tool_schemas(self) -> list[dict[str, Any]]:
        """Every function of the classes this category's tasks involve (a task sees only
        its own classes' functions)."""
        from environments.bfcl.apis import functions_of, schemas
        from environments.bfcl.tasks import load_tasks

        classes = dict.fromkeys(c for t in load_tasks(self.category) for c in t.classes)
        return list(schemas(functions_of(list(classes))))

    def scores(self, successes: Mapping[str, Sequence[bool]]) -> Mapping[str, float | None]:
        """BFCL's leaderboard numbers (:func:`environments.bfcl.tasks.leaderboard`): over
        all 800 tasks, or over the test half when only test tasks were evaluated."""
        from environments.bfcl.tasks import leaderboard

        return leaderboard(successes)

    def synthesizer(self, per_seed: int, seed: int, known: Iterable[str] = ()) -> Any:
        """The resampler of the train half (the paper's RODS on BFCL):
        :class:`environments.bfcl.resample.BFCLResampler`.

        Args:
            per_seed: Accepted variants wanted per parent task.
            seed: The synthesis seed (a variant depends only on its parent, this seed and
                its number).
            known: Dedupe keys already in the pool.
        """
        from environments.bfcl.resample import BFCLResampler

        return BFCLResampler(per_seed=per_seed, seed=seed, known=set(known))


BFCL = BFCLDomain("bfcl", "BFCL", None)
BFCL_MULTI_TURN = BFCLDomain("bfcl-multiturn", "BFCL-MultiTurn", None)
BASE = BFCLDomain("bfcl-multiturn-base", "BFCL-MultiTurn-Base", "base")
MISS_PARAM = BFCLDomain("bfcl-multiturn-missparam", "BFCL-MultiTurn-MissParam", "miss_param")
MISS_FUNC = BFCLDomain("bfcl-multiturn-missfunc", "BFCL-MultiTurn-MissFunc", "miss_func")
LONG_CONTEXT = BFCLDomain(
    "bfcl-multiturn-longcontext", "BFCL-MultiTurn-LongContext", "long_context"
)

PAPER = BFCLDomain("bfcl-paper", "BFCL-Paper", None, paper=True)
"""The RODS paper's setting (``rods/BFCL-Paper-v0``): training starts from the 400 train
tasks (and mode rods resamples them), evaluation scores the 400 test tasks with BFCL's
numbers per category (``rods eval --env bfcl-paper --split test``; docs/paper.md)."""

DOMAINS: tuple[BFCLDomain, ...] = (
    BFCL, BFCL_MULTI_TURN, BASE, MISS_PARAM, MISS_FUNC, LONG_CONTEXT, PAPER
)  # fmt: skip
"""Every BFCL environment, one per id."""

ENV_IDS: Mapping[str, str | None] = {d.env_id: d.category for d in DOMAINS}
"""Gymnasium id -> the category it serves (None: all 800 tasks)."""

__all__ = [
    "BASE",
    "BFCL",
    "BFCL_MULTI_TURN",
    "DOMAINS",
    "ENV_IDS",
    "LONG_CONTEXT",
    "MAX_STEPS",
    "MISS_FUNC",
    "MISS_PARAM",
    "PAPER",
    "SPLITS",
    "TRAIN_DOMAIN",
    "BFCLDomain",
]
