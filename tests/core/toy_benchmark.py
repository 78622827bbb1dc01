"""A tiny benchmark domain: the extension point tested without any real benchmark.

Each task asks for a code; the agent must call ``enter(code=...)`` with it and then say
so. Its own scorer: reward 1 when the last code entered is the task's and the episode
ended with the user's stop. Task 0, whose code is "", is passed by doing nothing (a
trivial task, as some of a real benchmark's are).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import gymnasium as gym

from rods_env.benchmark import BenchmarkDomain
from rods_env.errors import ConfigError, RodsError
from rods_env.parsing import parse_action
from rods_env.spaces import MAX_TEXT_CHARS, UnicodeText
from rods_env.task import Task, ToolCall, Turn, UserProfile
from rods_env.tools import FrozenDict, FrozenList

CODES = ("", "alpha", "bravo", "charlie", "delta", "echo")
SCHEMA = {
    "type": "function",
    "function": {
        "name": "enter",
        "description": "Enter a code.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string"}},
            "required": ["code"],
        },
    },
}


def _task(i: int) -> Task:
    calls = (ToolCall(name="enter", arguments={"code": CODES[i]}),) if CODES[i] else ()
    return Task(
        id=f"toy-bench:{i}",
        domain="toy-bench",
        skill="enter" if CODES[i] else "nothing",
        split="test" if i >= 4 else "train",
        user=UserProfile(name="toy"),
        turns=(Turn(request=f"Please enter the code {CODES[i]!r}.", calls=calls),),
    )


TASKS = tuple(_task(i) for i in range(len(CODES)))


class ToyBenchEnv(gym.Env[str, str]):
    """The toy benchmark's own environment, with ToolEnv's contract."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}  # type: ignore[misc]

    def __init__(
        self,
        *,
        tasks: Sequence[Task] | None = None,
        split: str | None = "train",
        max_steps: int = 10,
        user: Any = None,
        render_mode: str | None = None,
    ) -> None:
        pool = list(TASKS) if tasks is None else [t for t in tasks if t.domain == "toy-bench"]
        self._pool = [t for t in pool if split is None or t.split == split]
        self.max_steps = max_steps
        self.observation_space = UnicodeText(MAX_TEXT_CHARS)
        self.action_space = UnicodeText(MAX_TEXT_CHARS)
        self._task: Task | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        choice = (options or {}).get("task")
        if isinstance(choice, str):
            choice = next((t for t in TASKS if t.id == choice), None)
            if choice is None:
                raise ConfigError("unknown toy-bench task")
        task = choice or self._pool[int(self.np_random.integers(len(self._pool)))]
        self._task, self._entered, self._steps = task, "", 0
        self._over, self._progress, self._termination = False, 0.0, None
        first = task.turns[0].request
        self._messages = [
            FrozenDict(role="system", content="Enter codes."),
            FrozenDict(role="user", content=first),
        ]
        return first, self._info()

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._task is None or self._over:
            raise RodsError("reset first")
        self._steps += 1
        before = self._progress
        parsed = parse_action(action)
        if parsed.calls:
            call = parsed.calls[0]
            function = FrozenDict(name=call.name, arguments="{}")
            calls = FrozenList([FrozenDict(id="c", type="function", function=function)])
            self._messages.append(FrozenDict(role="assistant", content=None, tool_calls=calls))
            self._entered = str((call.arguments or {}).get("code", ""))
            obs = "OK"
            self._messages.append(
                FrozenDict(role="tool", tool_call_id="c", name=call.name, content=obs)
            )
        else:
            self._messages.append(FrozenDict(role="assistant", content=parsed.content))
            obs = "###STOP###"
            self._messages.append(FrozenDict(role="user", content=obs))
            self._end("user_stop")
        truncated = not self._over and self._steps >= self.max_steps
        if truncated:
            self._end("max_steps")
        reward = self._progress - before
        return obs, reward, self._over and not truncated, truncated, self._info()

    def truncate(self, reason: str = "truncated") -> dict[str, Any]:
        if not self._over:
            self._end(reason)
        return self._info()

    def _end(self, reason: str) -> None:
        assert self._task is not None
        self._over, self._termination = True, reason
        wanted = CODES[int(self._task.id.split(":")[1])]
        self._progress = float(reason == "user_stop" and self._entered == wanted)

    def _info(self) -> dict[str, Any]:
        assert self._task is not None
        return {
            "task_id": self._task.id,
            "turn": 0,
            "n_turns": 1,
            "progress": self._progress,
            "success": self._progress == 1.0,
            "turn_results": [{"turn": 0, "passed": self._progress == 1.0}] if self._over else [],
            "termination": self._termination,
            "messages": list(self._messages),
            "tools": FrozenList([FrozenDict(SCHEMA)]),
            "policy": "Enter codes.",
            "steps": self._steps,
        }


class ToyAgent:
    """Enters the task's code, then says so."""

    def __init__(self, task: Task) -> None:
        self.code = CODES[int(task.id.split(":")[1])]
        self.done = False

    def act(self, observation: str, info: dict[str, Any]) -> str:
        if not self.done and self.code:
            self.done = True
            return f'<tool_call>{{"name": "enter", "arguments": {{"code": "{self.code}"}}}}</tool_call>'
        return "Entered."


class ToyBench(BenchmarkDomain):
    """The toy benchmark domain."""

    name = "toy-bench"
    title = "Toy-Bench"

    def seed_tasks(self, split: str | None = None) -> list[Task]:
        return [t for t in TASKS if split is None or t.split == split]

    def make_env(self, **kwargs: Any) -> ToyBenchEnv:
        return ToyBenchEnv(**kwargs)

    def check_tasks(self, tasks: Sequence[Task]) -> list[str]:
        return [f"{t.id}: not a toy-bench task" for t in tasks if t not in TASKS]

    def oracle_agent(self, task: Task, *, user_mode: str = "scripted") -> ToyAgent:
        return ToyAgent(task)

    @property
    def policy(self) -> str:
        return "Enter codes."

    def tool_schemas(self) -> list[dict[str, Any]]:
        return [SCHEMA]

    def exploitable_task_ids(self) -> frozenset[str]:
        return frozenset({"toy-bench:0"})


TOY_BENCH = ToyBench()


def install(monkeypatch: Any) -> list[str]:
    """Install the toy benchmark under ``rods.benchmarks`` for one test (as an entry point
    would); returns the benchmark ids registered. Undo with :func:`uninstall`."""
    from importlib.metadata import EntryPoint

    from rods_env import registry

    real = registry._entry_points

    def entry_points(group: str = registry.ENTRY_POINT_GROUP) -> dict[str, EntryPoint]:
        found = dict(real(group))
        if group == registry.BENCHMARK_GROUP:
            found["toy-bench"] = EntryPoint(
                "toy-bench", "tests.core.toy_benchmark:TOY_BENCH", registry.BENCHMARK_GROUP
            )
        return found

    monkeypatch.setattr(registry, "_entry_points", entry_points)
    registry.load_any_domain.cache_clear()
    return registry.register_envs(benchmarks=True)


def uninstall() -> None:
    """Forget the toy benchmark (after the monkeypatch is undone)."""
    from rods_env import registry

    registry.load_any_domain.cache_clear()
    gym.registry.pop("rods/Toy-Bench-v0", None)
