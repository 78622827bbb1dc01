"""BFCL multi-turn tasks, read from the installed bfcl-eval package (never copied into rods).

Four categories of 200 tasks each (the same four kinds as rods' augmentations):

============ ==================== ===========================================================
category     rods variant         what changes
============ ==================== ===========================================================
base         base                 --
miss_param   missing_parameter    a turn lacks a needed value; its gold is empty (the agent
                                  should ask) and the next turn gives the value
miss_func    missing_function     functions are held out from the start; the turn that needs
                                  one has an empty gold (the agent should say it cannot), and
                                  a later turn reveals them with BFCL's message
long_context long_context         the classes load BFCL's long-context data (bigger states,
                                  tool outputs up to 84.5K characters)
============ ==================== ===========================================================

A task's ``excluded_function`` field is recorded but, as in BFCL's own pipeline (which never
reads it), does not change the tools the agent sees.

**Splits.** BFCL has no train split; rods uses the paper's setting (RODS trains on half of
each category and tests on the other half): :mod:`environments.bfcl.split` draws it, by
index and stratified by involved classes, and ``paper_split.json`` holds it. A task's
:attr:`BFCLTask.split` is ``"train"`` or ``"test"`` by that file; :func:`load_tasks` with
``split=None`` (or ``"all"``) gives all 800 (BFCL's own full benchmark, whose leaderboard
numbers need every task), ``"train"``/``"test"`` the 400 of that half.

**Variants.** A task resampled from a train task (:mod:`environments.bfcl.resample`) is not
in bfcl-eval's data: its rods view carries its BFCL entry in
:attr:`~rods_env.task.Task.payload` (:func:`payload`), and :func:`bfcl_task` turns a view
back into a :class:`BFCLTask`, so an environment can run it from the view alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from environments.bfcl.apis import Scenario, data_dir, functions, parse_call
from rods_env.errors import ConfigError
from rods_env.task import Provenance, Task, ToolCall, Turn, UserProfile
from rods_env.tools import FrozenDict

CATEGORIES: tuple[str, ...] = ("base", "miss_param", "miss_func", "long_context")
"""BFCL's multi-turn categories, in its leaderboard's order of columns after the overall."""

VARIANTS: Mapping[str, str] = FrozenDict(
    base="base",
    miss_param="missing_parameter",
    miss_func="missing_function",
    long_context="long_context",
)

VERSION_PREFIX = "BFCL_v4"
"""The prefix of bfcl-eval's data files."""

SPLIT_FILE = Path(__file__).with_name("paper_split.json")
"""The paper's split, committed (drawn by :mod:`environments.bfcl.split`)."""


@cache
def paper_split() -> Mapping[str, str]:
    """Task id to ``"train"`` or ``"test"``, from the committed ``paper_split.json``."""
    data = json.loads(SPLIT_FILE.read_text(encoding="utf-8"))
    return {
        task_id: side
        for sides in data["categories"].values()
        for side, ids in sides.items()
        for task_id in ids
    }


REVEAL_MESSAGE = "I have updated some more functions you can choose from. What about now?"
"""The user message of a turn that reveals held-out functions (BFCL's
``DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC``; the tests check it is still BFCL's)."""


def reveal_message(names: Sequence[str]) -> str:
    """The user message of a turn that reveals the functions ``names``: their tool schemas,
    one JSON per line, then BFCL's :data:`REVEAL_MESSAGE` (BFCL's prompting mode puts the
    new functions' docs before the same sentence).

    The schemas are in the text as well as in ``info["tools"]`` because an engine that
    keeps the conversation as one token sequence (local models, training) renders the tool
    list once, at the start: without them it would never see the new functions.
    """
    table = functions()
    docs = "\n".join(json.dumps(table[n].schema) for n in names)
    return f"{docs}\n{REVEAL_MESSAGE}" if docs else REVEAL_MESSAGE


MAX_STEPS_PER_TURN = 20
"""BFCL's ``MAXIMUM_STEP_LIMIT``: after this many tool-calling steps in one turn, the next
one ends the conversation and the task fails."""


@dataclass(frozen=True, eq=False)
class BFCLTask:
    """One BFCL multi-turn task, as BFCL's data has it (:func:`task_view` gives its rods
    :class:`~rods_env.task.Task` view).

    Attributes:
        id: BFCL's id (``multi_turn_base_0``), so results match BFCL's own files.
        category: ``base``, ``miss_param``, ``miss_func`` or ``long_context``.
        turns: The user's messages of each turn (a turn that only reveals functions has
            none in the data; the environment says :func:`reveal_message`).
        ground_truth: BFCL's gold call strings of each turn (empty: the turn is not checked).
        classes: The involved API classes.
        config: JSON text of the initial configuration.
        revealed: Turn index to the functions held out until that turn (miss_func).
        excluded: BFCL's ``excluded_function`` field (not applied, as in BFCL).
        parent: For a resampled variant, the id of the BFCL train task it was made from
            (None for BFCL's own tasks).
    """

    id: str
    category: str
    turns: tuple[tuple[Mapping[str, Any], ...], ...]
    ground_truth: tuple[tuple[str, ...], ...]
    classes: tuple[str, ...]
    config: str
    revealed: Mapping[int, tuple[str, ...]]
    excluded: tuple[str, ...] = ()
    parent: str | None = None

    @property
    def variant(self) -> str:
        """The rods variant name of the category."""
        return VARIANTS[self.category]

    @property
    def split(self) -> str:
        """``"train"`` or ``"test"`` in the paper's split (``paper_split.json``); a variant of
        a train task is a train task; an id the split does not know is a test task (never
        trained on)."""
        if self.parent is not None:
            return "train"
        return paper_split().get(self.id, "test")

    @cached_property
    def config_key(self) -> str:
        """Canonical text of the initial configuration (equal for equal configurations)."""
        return json.dumps(json.loads(self.config), sort_keys=True)

    @property
    def long_context(self) -> bool:
        """Whether the classes load BFCL's long-context data."""
        return self.category == "long_context"

    @cached_property
    def scenario(self) -> Scenario:
        """The initial state (:class:`~environments.bfcl.apis.Scenario`)."""
        return Scenario(self.classes, self.config, self.long_context)

    @cached_property
    def gold(self) -> tuple[tuple[ToolCall, ...], ...]:
        """The ground truth as tool calls with named arguments (parsed, never evaluated)."""
        return tuple(tuple(parse_call(c) for c in turn) for turn in self.ground_truth)

    @property
    def checked_turns(self) -> tuple[int, ...]:
        """The turns BFCL checks (those with gold calls)."""
        return tuple(i for i, calls in enumerate(self.ground_truth) if calls)

    @cached_property
    def held_out(self) -> frozenset[str]:
        """Every function held out at the start (revealed at some later turn)."""
        return frozenset(n for names in self.revealed.values() for n in names)

    def initial_config(self) -> dict[str, Any]:
        """The initial configuration (a fresh copy)."""
        return json.loads(self.config)

    def entry(self) -> dict[str, Any]:
        """The task as BFCL's test entry (what BFCL's checker takes)."""
        return {
            "id": self.id,
            "question": [[dict(m) for m in turn] for turn in self.turns],
            "initial_config": self.initial_config(),
            "involved_classes": list(self.classes),
            "missed_function": {str(k): list(v) for k, v in self.revealed.items()},
            "excluded_function": list(self.excluded),
        }

    def payload(self) -> dict[str, Any]:
        """Everything needed to rebuild the task (:func:`from_payload`): BFCL's entry with
        the configuration as JSON text (its key order is state order: ``ls`` lists files in
        it, and a JSON round trip with sorted keys would change it), the category, the
        ground truth and the parent."""
        return {
            "id": self.id,
            "category": self.category,
            "question": [[dict(m) for m in turn] for turn in self.turns],
            "ground_truth": [list(turn) for turn in self.ground_truth],
            "involved_classes": list(self.classes),
            "initial_config": self.config,
            "missed_function": {str(k): list(v) for k, v in self.revealed.items()},
            "excluded_function": list(self.excluded),
            "parent": self.parent,
        }

    def __repr__(self) -> str:
        return f"BFCLTask({self.id!r}, {len(self.turns)} turns, {'+'.join(self.classes)})"


def task_view(task: BFCLTask, domain: str) -> Task:
    """The rods view of a BFCL task: the same id; skill = category; the variant of the
    category; one turn per BFCL turn, its request the user's message (BFCL's reveal message
    on a turn that only reveals functions), its calls the parsed ground truth, its
    ``withheld_tools`` the functions not yet revealed.

    Args:
        task: The BFCL task.
        domain: The name of the benchmark domain the view belongs to.
    """
    turns = []
    for i, (messages, calls) in enumerate(zip(task.turns, task.gold, strict=True)):
        request = "\n".join(str(m.get("content") or "") for m in messages)
        if not messages and i in task.revealed:
            request = reveal_message(task.revealed[i])
        hidden = tuple(n for at, names in task.revealed.items() if at > i for n in names)
        turns.append(Turn(request=request, calls=calls, withheld_tools=hidden))
    extra: dict[str, Any] = {}
    if task.parent is not None:
        extra = {
            "payload": task.payload(),
            "provenance": Provenance(
                origin="synthesized", parent_id=task.parent, generation=1, mode="resample"
            ),
        }
    return Task(
        id=task.id,
        domain=domain,
        skill=task.category,
        split=task.split,
        user=UserProfile(name="BFCL user"),
        turns=tuple(turns),
        variant=task.variant,
        **extra,
    )


def from_payload(data: Mapping[str, Any]) -> BFCLTask:
    """The task a :meth:`BFCLTask.payload` describes.

    Raises:
        ConfigError: when the payload lacks a field or its turns and ground truth differ
            in number.
    """
    try:
        category = str(data["category"])
        if category not in CATEGORIES:
            raise ConfigError(f"BFCL payload: unknown category '{category}'")
        config = data["initial_config"]
        turns = tuple(tuple(FrozenDict(m) for m in turn) for turn in data["question"])
        ground_truth = tuple(tuple(str(c) for c in turn) for turn in data["ground_truth"])
        task = BFCLTask(
            id=str(data["id"]),
            category=category,
            turns=turns,
            ground_truth=ground_truth,
            classes=tuple(data["involved_classes"]),
            config=config if isinstance(config, str) else json.dumps(config),
            revealed=FrozenDict(
                {int(k): tuple(v) for k, v in (data.get("missed_function") or {}).items()}
            ),
            excluded=tuple(data.get("excluded_function") or ()),
            parent=data.get("parent"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"not a BFCL task payload ({type(exc).__name__}: {exc})") from None
    if len(task.turns) != len(task.ground_truth):
        raise ConfigError(
            f"BFCL payload {task.id}: {len(task.turns)} turns but "
            f"{len(task.ground_truth)} gold turns"
        )
    return task


_FROM_VIEWS: dict[str, tuple[Task, BFCLTask]] = {}


def bfcl_task(choice: BFCLTask | Task | str) -> BFCLTask:
    """The BFCL task a choice names: a :class:`BFCLTask` as it is, a rods view with a
    payload (a resampled variant) rebuilt from it, any other view or id looked up in
    BFCL's data.

    Raises:
        ConfigError: for an unknown id or a bad payload.
    """
    if isinstance(choice, BFCLTask):
        return choice
    if isinstance(choice, Task):
        if choice.payload is None:
            return get_task(choice.id)
        hit = _FROM_VIEWS.get(choice.id)
        if hit is not None and hit[0] == choice:
            return hit[1]
        task = from_payload(choice.payload)
        if len(_FROM_VIEWS) >= 4096:
            _FROM_VIEWS.pop(next(iter(_FROM_VIEWS)))
        _FROM_VIEWS[choice.id] = (choice, task)
        return task
    return get_task(choice)


def _read_lines(path: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _task(category: str, row: Mapping[str, Any], answer: Mapping[str, Any]) -> BFCLTask:
    if row["id"] != answer["id"]:
        raise RuntimeError(f"bfcl-eval data out of order: {row['id']} vs {answer['id']}")
    turns = tuple(tuple(FrozenDict(m) for m in turn) for turn in row["question"])
    ground_truth = tuple(tuple(turn) for turn in answer["ground_truth"])
    if len(turns) != len(ground_truth):
        raise RuntimeError(f"{row['id']}: {len(turns)} turns but {len(ground_truth)} gold turns")
    return BFCLTask(
        id=row["id"],
        category=category,
        turns=turns,
        ground_truth=ground_truth,
        classes=tuple(row["involved_classes"]),
        config=json.dumps(row.get("initial_config", {})),  # key order is state order
        revealed=FrozenDict(
            {int(k): tuple(v) for k, v in (row.get("missed_function") or {}).items()}
        ),
        excluded=tuple(row.get("excluded_function") or ()),
    )


@cache
def category_tasks(category: str) -> tuple[BFCLTask, ...]:
    """The tasks of one category, in BFCL's order (read once per process)."""
    if category not in CATEGORIES:
        raise ConfigError(
            f"unknown BFCL category '{category}'; categories: {', '.join(CATEGORIES)}"
        )
    root = data_dir()
    name = f"{VERSION_PREFIX}_multi_turn_{category}.json"
    rows = _read_lines(root / name)
    answers = _read_lines(root / "possible_answer" / name)
    if len(rows) != len(answers):
        raise RuntimeError(f"bfcl-eval: {len(rows)} tasks but {len(answers)} answers in {name}")
    return tuple(_task(category, row, ans) for row, ans in zip(rows, answers, strict=True))


def load_tasks(category: str | None = None, split: str | None = None) -> list[BFCLTask]:
    """BFCL's multi-turn tasks: one category, or all four (800) in category order.

    Args:
        category: A category name, or None for all.
        split: ``"train"`` or ``"test"``: that half of the paper's split (100 tasks per
            category, :mod:`environments.bfcl.split`); ``"all"`` or None: every task.

    Raises:
        ConfigError: for an unknown category or split.
    """
    if split not in (None, "all", "train", "test"):
        raise ConfigError(f"unknown BFCL split '{split}'; splits: train, test, all")
    cats = CATEGORIES if category is None else (category,)
    tasks = [task for cat in cats for task in category_tasks(cat)]
    if split in ("train", "test"):
        tasks = [t for t in tasks if t.split == split]
    return tasks


@cache
def task_index() -> Mapping[str, BFCLTask]:
    """Every task by id."""
    return FrozenDict({t.id: t for t in load_tasks()})


def get_task(task_id: str) -> BFCLTask:
    """The task with id ``task_id``.

    Raises:
        ConfigError: for an unknown id.
    """
    try:
        return task_index()[task_id]
    except KeyError:
        raise ConfigError(
            f"unknown BFCL task id '{task_id}' (ids look like multi_turn_base_0)"
        ) from None


def leaderboard(
    successes: Mapping[str, Sequence[bool]], split: str | None = None
) -> dict[str, float | None]:
    """BFCL's multi-turn leaderboard numbers from per-task trial successes.

    Per category, the accuracy is the mean over its tasks of each task's success rate (one
    trial each, as BFCL runs, gives BFCL's accuracy exactly). The overall is BFCL's
    unweighted mean of the four category accuracies; like BFCL it is None ("N/A") unless
    every category was evaluated on all of its tasks (of the split).

    Args:
        successes: Task id to the successes of its trials (tasks of other benchmarks or
            domains, and resampled variants, are ignored).
        split: ``"all"``: BFCL's own numbers, over all 800 tasks; ``"test"`` (or
            ``"train"``): the same numbers over that half of the paper's split only (100
            tasks per category; the other half's tasks are ignored); None: ``"all"``
            unless the ids given are all of one half, then that half (so an evaluation of
            the 400 test tasks gets its overall).

    Returns:
        ``{"overall": ..., "base": ..., "miss_func": ..., "miss_param": ...,
        "long_context": ...}`` (BFCL's column order); a category not evaluated is None.
    """
    if split not in (None, "all", "train", "test"):
        raise ConfigError(f"unknown BFCL split '{split}'; splits: train, test, all")
    index = task_index()
    given = [index[t] for t, trials in successes.items() if t in index and trials]
    if split is None:
        halves = {t.split for t in given}
        split = halves.pop() if len(halves) == 1 else "all"
    per: dict[str, list[float]] = {c: [] for c in CATEGORIES}
    for task in given:
        if split != "all" and task.split != split:
            continue
        trials = successes[task.id]
        per[task.category].append(sum(bool(s) for s in trials) / len(trials))
    acc: dict[str, float | None] = {c: (sum(v) / len(v) if v else None) for c, v in per.items()}
    want = {c: len(load_tasks(c, None if split == "all" else split)) for c in CATEGORIES}
    complete = all(len(per[c]) == want[c] for c in CATEGORIES)
    overall = sum(a for a in acc.values() if a is not None) / len(CATEGORIES) if complete else None
    order = ("base", "miss_func", "miss_param", "long_context")
    return {"overall": overall, **{c: acc[c] for c in order}}
