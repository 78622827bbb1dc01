"""Episodes in a process of their own: speed of gold replays, a profile of ``reset`` and
``step``, and a fingerprint of everything the environments hand out.

``benchmarks/test_episode_core.py`` runs it on this checkout and, for the in-run baseline,
on another commit's ``rods_env`` and ``environments`` (extracted with ``git archive`` and put
first on ``PYTHONPATH``), alternating the two, so both are measured under the same load. It
uses only the public environment API (``gymnasium.make``, ``reset``, ``step``,
``truncate``), which both sides share.

Modes:

* ``speed DOMAIN``: the gold replay of every seed task of a rods domain (the oracle's
  actions, recorded once, then played as τ-bench plays its tasks' gold actions; the
  scripted user), ``--runs`` times; prints the seconds of each run (wall and CPU), the
  same episodes with the oracle agent choosing each action (CPU), the mean ``reset`` and
  ``step`` times and a fingerprint of every step's output.
* ``profile DOMAIN``: the same replay under ``cProfile``; prints the functions that take
  the most time, inside ``reset`` and inside ``step``.
* ``taubench DOMAIN --path CHECKOUT``: the same gold replay in τ-bench (a checkout of
  sierra-research/tau-bench): every task of its test split, each episode ``reset``, the
  gold actions through ``step``, then the closing message that ends it and computes
  τ-bench's reward (a user that answers without a model; ``litellm``, which τ-bench imports
  but never calls here, is a stand-in). Prints episodes per second and the mean ``reset``
  and ``step`` times, as ``speed`` does.
* ``transcripts``: every registered id (own domains and the benchmarks that are installed)
  driven by oracle agents and by seeded streams of fuzzed actions (malformed calls, message
  dicts, reasoning, cut episodes), every ``(observation, reward, terminated, truncated,
  info)`` written canonically; prints one fingerprint per id (``--dump FILE`` writes the
  steps themselves, to diff two versions).

Run: ``python benchmarks/episode_worker.py speed retail --runs 3``.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import json
import os
import pstats
import random
import sys
import time
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr, ensure_ascii=True)


# -- speed ---------------------------------------------------------------------------------
def _setup(name: str) -> tuple[Any, list[tuple[Any, list[Any]]]]:
    """An environment of domain ``name`` with every seed task's gold replayed (cached, as
    in training) and each task's gold actions recorded: the oracle agent's actions, played
    once before any clock runs (τ-bench's gold replay plays its tasks' given actions)."""
    import gymnasium as gym

    import rods_env
    from rods_env.gold import GOLD_CACHE
    from rods_env.oracle import oracle_agent

    env = gym.make(rods_env.load_domain(name).env_id, split=None, max_steps=500).unwrapped
    recorded = []
    for task in env.domain.seed_tasks():
        GOLD_CACHE.get(env.domain, task)
        agent = oracle_agent(env.domain, task)
        obs, info = env.reset(options={"task": task})
        actions, done = [], False
        while not done:
            actions.append(agent.act(obs, info))
            obs, _, terminated, truncated, info = env.step(actions[-1])
            done = terminated or truncated
        recorded.append((task, actions))
    return env, recorded


def _replay(
    env: Any, recorded: list[tuple[Any, list[Any]]], digest: Any | None, clock: dict
) -> int:
    """Play the recorded episodes; returns the episodes that did not succeed."""
    failed = 0
    for task, actions in recorded:
        t0 = time.perf_counter()
        _, info = env.reset(options={"task": task})
        clock["reset"] += time.perf_counter() - t0
        for action in actions:
            t0 = time.perf_counter()
            obs, reward, terminated, truncated, info = env.step(action)
            clock["step"] += time.perf_counter() - t0
            clock["steps"] += 1
            if digest is not None:
                digest.update(obs.encode("utf-8", "replace"))
                digest.update(repr((reward, terminated, truncated, info["progress"])).encode())
        failed += not info["success"]
    return failed


def _with_oracle(env: Any, recorded: list[tuple[Any, list[Any]]]) -> int:
    """The same episodes with the oracle agent choosing each action (its time counts)."""
    from rods_env.oracle import oracle_agent

    failed = 0
    for task, _ in recorded:
        agent = oracle_agent(env.domain, task)
        obs, info = env.reset(options={"task": task})
        done = False
        while not done:
            obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
            done = terminated or truncated
        failed += not info["success"]
    return failed


def speed(name: str, runs: int) -> dict[str, Any]:
    """Episodes per second of the gold replay of every seed task of domain ``name``:
    ``cpu``/``wall`` (seconds per run) for the recorded gold actions, ``oracle_cpu`` with
    the oracle agent acting, mean ``reset_us`` and ``step_us``; the first run is the
    first time each episode runs in the process (after a warm-up on other work)."""
    import rods_env

    env, recorded = _setup(name)
    out: dict[str, Any] = {"rods_env": os.path.dirname(rods_env.__file__), "tasks": len(recorded)}
    out.update(wall=[], cpu=[], oracle_cpu=[], reset_us=[], step_us=[], steps=0, failed=0)
    digest = hashlib.sha256()
    for run in range(runs):
        clock = {"reset": 0.0, "step": 0.0, "steps": 0}
        start, start_cpu = time.perf_counter(), time.process_time()
        failed = _replay(env, recorded, digest if run == 0 else None, clock)
        out["wall"].append(time.perf_counter() - start)
        out["cpu"].append(time.process_time() - start_cpu)
        out["reset_us"].append(1e6 * clock["reset"] / len(recorded))
        out["step_us"].append(1e6 * clock["step"] / clock["steps"])
        out["steps"], out["failed"] = clock["steps"], out["failed"] + failed
        start_cpu = time.process_time()
        out["failed"] += _with_oracle(env, recorded)
        out["oracle_cpu"].append(time.process_time() - start_cpu)
    out["fingerprint"] = digest.hexdigest()
    return out


def profile(name: str, top: int) -> dict[str, Any]:
    """Where the gold replay's time goes: the ``top`` functions by own time inside
    ``reset`` and inside ``step`` (each profiled on its own, two replays of every task)."""
    import rods_env

    env, recorded = _setup(name)
    profilers = {"reset": cProfile.Profile(), "step": cProfile.Profile()}
    for _ in range(2):
        for task, actions in recorded:
            profilers["reset"].enable()
            env.reset(options={"task": task})
            profilers["reset"].disable()
            for action in actions:
                profilers["step"].enable()
                env.step(action)
                profilers["step"].disable()
    out: dict[str, Any] = {"rods_env": os.path.dirname(rods_env.__file__)}
    out["episodes"] = 2 * len(recorded)
    out["steps"] = 2 * sum(len(a) for _, a in recorded)
    for what, prof in profilers.items():
        stats = pstats.Stats(prof, stream=io.StringIO())
        total = stats.total_tt  # type: ignore[attr-defined]
        rows = []
        for (path, line, func), (_, calls, own, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
            where = path.rsplit("/", 2)
            rows.append(
                {
                    "function": f"{'/'.join(where[-2:])}:{line}({func})",
                    "calls": calls,
                    "own_s": own,
                    "cumulative_s": cumulative,
                }
            )
        rows.sort(key=lambda r: -r["own_s"])
        out[what] = {"total_s": total, "top": rows[:top]}
    return out


# -- τ-bench ---------------------------------------------------------------------------------
class _TauUser:
    """τ-bench's user without a model: the instruction opens, any message is answered."""

    def reset(self, instruction: str | None = None) -> str:
        return instruction or ""

    def step(self, content: str) -> str:
        return "###STOP###" if content.startswith("Thanks") else "OK."

    def get_total_cost(self) -> float:
        return 0.0


def taubench(name: str, path: str, runs: int) -> dict[str, Any]:
    """Episodes per second of τ-bench's gold replay of every test task of ``name``."""
    import types

    if "litellm" not in sys.modules:  # imported by τ-bench's user module, never called here
        stub = types.ModuleType("litellm")
        stub.completion = None  # type: ignore[attr-defined]
        sys.modules["litellm"] = stub
    sys.path.insert(0, path)
    from tau_bench.envs import get_env
    from tau_bench.types import RESPOND_ACTION_NAME, Action

    env = get_env(name, user_strategy="human", user_model="none", task_split="test", task_index=0)
    env.user = _TauUser()
    tasks = env.tasks
    out: dict[str, Any] = {"tau_bench": path, "tasks": len(tasks)}
    out.update(wall=[], cpu=[], reset_us=[], step_us=[], steps=0, failed=0)
    for _ in range(runs):
        clock = {"reset": 0.0, "step": 0.0, "agent": 0.0, "steps": 0}
        failed = 0
        start, start_cpu = time.perf_counter(), time.process_time()
        for i, task in enumerate(tasks):
            t0 = time.perf_counter()
            env.reset(task_index=i)
            clock["reset"] += time.perf_counter() - t0
            closing = "Thanks, that is all. " + " ".join(task.outputs)
            actions = [*task.actions, Action(name=RESPOND_ACTION_NAME, kwargs={"content": closing})]
            for action in actions:
                t0 = time.perf_counter()
                response = env.step(action)
                clock["step"] += time.perf_counter() - t0
                clock["steps"] += 1
                if response.done:
                    break
            failed += response.reward != 1.0
        out["wall"].append(time.perf_counter() - start)
        out["cpu"].append(time.process_time() - start_cpu)
        out["reset_us"].append(1e6 * clock["reset"] / len(tasks))
        out["step_us"].append(1e6 * clock["step"] / clock["steps"])
        out["steps"], out["failed"] = clock["steps"], failed
    return out


# -- transcripts ---------------------------------------------------------------------------
_TEXTS = [
    "Sure, could you tell me your email and zip code?",
    "<think>I could call a tool here.</think>Let me check that for you.",
    '<think>drafted <tool_call>{"name": "x", "arguments": {}}</tool_call></think>Hello.',
    '{"name": "Summary", "arguments": {"done": true}}',
    "{sigh} all done",
    "",
    "   ",
    "Done. ###STOP###",
]


def _fuzz_actions(rng: random.Random, names: list[str], calls: list[Any]) -> list[Any]:
    from rods_env.oracle import tool_call_text
    from tests.core import fuzz

    out: list[Any] = []
    for _ in range(rng.randrange(2, 9)):
        roll = rng.random()
        if roll < 0.3 and calls:
            call = rng.choice(calls)
            text = tool_call_text(call)
            if rng.random() < 0.3:
                text = "<think>first a look</think>" + text
            out.append(text)
        elif roll < 0.4 and calls:
            call = rng.choice(calls)
            out.append(
                {
                    "role": "assistant",
                    "content": rng.choice([None, "", "One moment."]),
                    "tool_calls": [
                        {"function": {"name": call.name, "arguments": json.dumps(call.arguments)}}
                    ],
                }
            )
        elif roll < 0.55:
            out.append(rng.choice(_TEXTS))
        else:
            out.append(fuzz.random_action(rng, names, huge=rng.random() < 0.1))
    return out


def _record(lines: list[str], label: str, value: Any) -> None:
    lines.append(f"{label}\t{_canonical(value)}")


def _drive(env: Any, agent: Any, task: Any, lines: list[str], label: str, cut: int | None) -> None:
    obs, info = env.reset(options={"task": task})
    _record(lines, f"{label} reset", [obs, info])
    done, n = False, 0
    while not done:
        if cut is not None and n >= cut:
            _record(lines, f"{label} truncate", env.truncate("max_tokens"))
            return
        action = agent.act(obs, info)
        try:
            out = env.step(action)
        except Exception as exc:
            _record(lines, f"{label} raised", [type(exc).__name__, str(exc)])
            return
        obs, info = out[0], out[4]
        _record(lines, f"{label} step {n}", list(out))
        done = out[2] or out[3]
        n += 1


class _Script:
    """An agent that plays a fixed list of actions, then says it is done."""

    def __init__(self, actions: list[Any]) -> None:
        self.actions = list(actions)

    def act(self, observation: str, info: dict[str, Any]) -> Any:
        return self.actions.pop(0) if self.actions else "Thanks, that is all. ###STOP###"


def _ids() -> list[tuple[str, dict[str, Any]]]:
    import rods_env

    ids: list[tuple[str, dict[str, Any]]] = [(i, {}) for i in rods_env.ENV_IDS]
    for env_id in rods_env.BENCHMARK_ENV_IDS:
        if rods_env.load_any_domain(env_id).missing() is None:
            ids.append((env_id, {}))
    if ("rods/Tau2-Telecom-v0", {}) in ids:
        ids.append(("rods/Tau2-Telecom-v0", {"solo": True}))
    return ids


def transcripts(per_id: int, dump: str | None) -> dict[str, Any]:
    """Fingerprints of oracle and fuzzed episodes on every id (see the module doc)."""
    import gymnasium as gym

    import rods_env

    out: dict[str, Any] = {"rods_env": os.path.dirname(rods_env.__file__), "ids": {}}
    sink = open(dump, "w", encoding="utf-8") if dump else None  # noqa: SIM115
    for env_id, kwargs in _ids():
        env = gym.make(env_id, split=None, max_steps=30, **kwargs).unwrapped
        domain = rods_env.load_any_domain(env_id)
        solo = bool(kwargs.get("solo"))
        tasks = list(env.tasks)
        rng = random.Random(f"{env_id}{solo}")
        picked = [tasks[rng.randrange(len(tasks))] for _ in range(per_id)]
        names = sorted({t["function"]["name"] for t in env.reset(seed=0)[1]["tools"]})
        lines: list[str] = []
        for k, task in enumerate(picked):
            if isinstance(domain, rods_env.Domain):
                from rods_env.oracle import oracle_agent

                oracle = oracle_agent(domain, task)
                calls = [c for turn in task.turns for c in turn.calls]
            else:
                oracle = domain.oracle_agent(task, user_mode="solo" if solo else "scripted")
                calls = list(getattr(task, "gold_calls", ()) or ())
            label = f"{env_id}{'/solo' if solo else ''} {task.id}"
            _drive(env, oracle, task, lines, f"{label} oracle", None)
            fuzzed = _Script(_fuzz_actions(rng, names, calls))
            _drive(env, fuzzed, task, lines, f"{label} fuzz", None)
            if k % 3 == 0:
                _drive(
                    env,
                    _Script(_fuzz_actions(rng, names, calls)),
                    task,
                    lines,
                    f"{label} cut",
                    rng.randrange(1, 4),
                )
        # a seeded sample of the pool, and two interleaved environments
        env.reset(seed=11)
        lines.append(f"sampled\t{_canonical(env.reset(seed=3)[1]['task_id'])}")
        key = f"{env_id}{'/solo' if solo else ''}"
        out["ids"][key] = hashlib.sha256("\n".join(lines).encode("utf-8", "replace")).hexdigest()
        if sink is not None:
            sink.write("\n".join(lines) + "\n")
    if sink is not None:
        sink.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("speed", "profile", "taubench", "transcripts"))
    parser.add_argument("--path", default=None, help="a tau-bench checkout (taubench mode)")
    parser.add_argument("domain", nargs="?", default="retail")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--per-id", type=int, default=6)
    parser.add_argument("--dump", default=None)
    args = parser.parse_args()
    if args.mode == "speed":
        result = speed(args.domain, args.runs)
    elif args.mode == "taubench":
        result = taubench(args.domain, args.path, args.runs)
    elif args.mode == "profile":
        result = profile(args.domain, args.top)
    else:
        result = transcripts(args.per_id, args.dump)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
