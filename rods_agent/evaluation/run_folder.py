"""The run folder: what a run writes, how a rerun resumes, and what it refuses to mix."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rods_agent.evaluation.files import (
    CONFIG,
    EPISODES,
    IDENTITY_DEFAULTS,
    IDENTITY_KEYS,
    PASS_K_PNG,
    RESULTS,
    SUMMARY_JSON,
    SUMMARY_MD,
    TASKS,
)
from rods_agent.evaluation.scores import EvalSummary, TaskResult, plot_pass_k
from rods_agent.rollouts.batch import EpisodeRecord
from rods_env.benchmark import BenchmarkDomain
from rods_env.errors import ConfigError
from rods_env.fileio import append_jsonl, atomic_write, read_jsonl, write_json, write_jsonl
from rods_env.registry import AnyDomain
from rods_env.task import Task, dump_tasks


# -- the run folder ----------------------------------------------------------------------
@dataclass
class _Resumed:
    done: dict[str, TaskResult]
    trials: dict[str, list[EpisodeRecord]]


class RunFolder:
    """The files of a resumable evaluation in one folder (see the module docstring).

    Nothing is created until :meth:`write_config`, so a run that fails before its engine
    exists leaves no folder behind.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise ConfigError(f"--out {self.path} is a file; give a folder")

    def check_config(self, config: Mapping[str, Any]) -> None:
        """Refuse a folder that holds results of a different run.

        Raises:
            ConfigError: naming the settings that differ.
        """
        path = self.path / CONFIG
        if not path.exists():
            return
        try:
            prev = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{path} is unreadable ({exc}); use another --out") from None
        diff = [
            k
            for k in IDENTITY_KEYS
            if k in config and prev.get(k, IDENTITY_DEFAULTS.get(k)) != config[k]
        ]
        if diff:
            shown = ", ".join(f"{k}={prev.get(k)!r} (now {config[k]!r})" for k in diff)
            raise ConfigError(
                f"{self.path} holds results of a different run ({shown}); "
                "use another --out or delete it"
            )

    def write_config(self, config: Mapping[str, Any], tasks: Sequence[Task] = ()) -> None:
        """Write ``config.json`` and ``tasks.jsonl`` (creating the folder)."""
        write_json(self.path / CONFIG, dict(config))
        dump_tasks(tasks, self.path / TASKS)

    def resume(self, tasks: Sequence[Task], trials: int) -> _Resumed:
        """The trials already done, with the files tidied to match.

        Episode lines cut off by a kill and trials that ended in an error are dropped (they
        run again); a task keeps its result line only while all its trials are there.
        Lines of tasks not in ``tasks`` are kept untouched.
        """
        if not self.path.exists():
            return _Resumed({}, {})
        by_id = {t.id: t for t in tasks}
        kept: dict[tuple[str, int], dict[str, Any]] = {}
        for row in read_jsonl(self.path / EPISODES):
            tid, trial = row.get("task_id"), row.get("trial")
            if not isinstance(tid, str) or not isinstance(trial, int):
                continue
            if tid in by_id and (trial >= trials or row.get("termination") == "error"):
                kept.pop((tid, trial), None)
                continue
            kept[(tid, trial)] = row  # a later line of the same trial replaces an earlier one
        per_task: dict[str, list[EpisodeRecord]] = defaultdict(list)
        for (tid, _), row in kept.items():
            if tid in by_id:
                per_task[tid].append(EpisodeRecord.from_dict(row))
        complete = {tid for tid, recs in per_task.items() if len(recs) == trials}
        results: dict[str, dict[str, Any]] = {}
        for row in read_jsonl(self.path / RESULTS):
            tid = row.get("task_id")
            if isinstance(tid, str) and (tid not in by_id or tid in complete):
                results.setdefault(tid, row)
        done: dict[str, TaskResult] = {}
        for tid in complete:
            stored = results.get(tid)
            result = (
                TaskResult.from_dict(stored)
                if stored is not None
                else TaskResult.from_records(by_id[tid], per_task[tid])
            )
            results[tid] = result.to_dict()
            done[tid] = result
        write_jsonl(self.path / EPISODES, kept.values())
        write_jsonl(self.path / RESULTS, results.values())
        partial = {tid: recs for tid, recs in per_task.items() if tid not in complete}
        return _Resumed(done, partial)

    def add_trial(self, record: EpisodeRecord) -> None:
        """Append a finished trial to ``episodes.jsonl``."""
        append_jsonl(self.path / EPISODES, [record.to_dict(tokens=False)])

    def add_result(self, result: TaskResult) -> None:
        """Append a finished task to ``results.jsonl``."""
        append_jsonl(self.path / RESULTS, [result.to_dict()])

    def write_benchmark_results(
        self,
        tasks: Sequence[Task],
        trials: int,
        families: Mapping[str, AnyDomain],
        run: Mapping[str, Any],
    ) -> tuple[str, ...]:
        """Let each benchmark write its own result files of this run's episodes
        (:meth:`~rods_env.benchmark.BenchmarkDomain.write_results`), from ``episodes.jsonl``
        (so a resumed run's are complete); the paths written, relative to the folder."""
        domain_of = {t.id: t.domain for t in tasks}
        rows: dict[tuple[str, int], dict[str, Any]] = {}
        for row in read_jsonl(self.path / EPISODES):
            tid, trial = row.get("task_id"), row.get("trial")
            if tid in domain_of and isinstance(trial, int) and trial < trials:
                rows[(str(tid), trial)] = row  # a later line of a trial replaces an earlier
        written: list[str] = []
        for name, family in families.items():
            if not isinstance(family, BenchmarkDomain):
                continue
            mine = [r for (tid, _), r in sorted(rows.items()) if domain_of[tid] == name]
            if mine:
                paths = family.write_results(mine, self.path, run)
                written += [str(Path(p).relative_to(self.path)) for p in paths]
        return tuple(written)

    def write_summary(self, summary: EvalSummary) -> None:
        """Write ``summary.json``, ``summary.md`` and ``pass_k.png``."""
        write_json(self.path / SUMMARY_JSON, summary.to_dict())
        atomic_write(self.path / SUMMARY_MD, summary.markdown())
        plot_pass_k(summary, self.path / PASS_K_PNG)
