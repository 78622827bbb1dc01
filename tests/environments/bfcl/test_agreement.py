"""rods' BFCL verdicts against BFCL's own checker: 100% agreement, 800 tasks per trajectory.

Each trajectory is played through the environment; the calls the environment decoded and
ran go to BFCL's ``multi_turn_checker`` (tests/environments/bfcl/official.py); the two
verdicts must be equal on every task. Trajectories: the gold, seven perturbations of it,
and four agents that do not do the task. Each kind must also produce both verdicts on some
tasks or be one the checker must reject everywhere, so agreement is not agreement on
"fail" alone.
"""

from __future__ import annotations

import collections
import json
import time

import pytest

from environments.bfcl.agents import PERTURBATIONS, TRIVIAL, OracleAgent, perturbed
from rods_env.oracle import run_episode
from tests.environments.bfcl.official import official_verdict

KINDS = ("gold", *PERTURBATIONS, *TRIVIAL)


def _agent(kind, task):
    if kind == "gold":
        return OracleAgent(task)
    if kind in PERTURBATIONS:
        return perturbed(kind, task, seed=0)
    return TRIVIAL[kind](task, 0)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_verdicts_equal_bfcl_checker_on_all_800_tasks(env, tasks, kind):
    t0 = time.perf_counter()
    verdicts: collections.Counter[tuple[bool, bool]] = collections.Counter()
    disagree = []
    for task in tasks:
        info = run_episode(env, _agent(kind, task), task=task)
        official = official_verdict(task, info["turn_results"])
        verdicts[(info["success"], official["valid"])] += 1
        if info["success"] != official["valid"]:
            disagree.append((task.id, info["success"], official.get("error_type")))
    seconds = time.perf_counter() - t0
    assert not disagree, f"{kind}: {len(disagree)} of {len(tasks)} disagree, e.g. {disagree[:5]}"
    assert sum(verdicts.values()) == 800
    print(f"{kind}: {dict(verdicts)} in {seconds:.1f}s")
    passed = verdicts[(True, True)]
    if kind in ("gold", "one_call_per_step"):
        assert passed >= 798  # the gold passes everywhere; one call per step exceeds BFCL's
        # 20 steps per turn in the two long-context turns of 34 calls
    elif kind in ("silent", "late_by_one_turn", "random_calls"):
        assert passed == 0
    else:
        assert 0 < passed < 800, (kind, dict(verdicts))


def test_the_checker_rejects_what_it_must_not_eval(tasks):
    """The harness never hands BFCL a call string it could be hurt by."""
    from tests.environments.bfcl.official import safe_call_strings

    for bad in (
        "__import__('os').system('true')",
        "ls(a=open('x'))",
        "print(1)",
        "ls(**{'a': 1})",
    ):
        with pytest.raises((AssertionError, ValueError, SyntaxError)):
            safe_call_strings([[[bad]]])
    safe_call_strings([[["ls(a=True)", "cd(folder='x')"]]])


def test_conversations_cut_by_the_step_limit_agree_too(env):
    """The 21st tool step of a turn: BFCL fails the task when it cuts a turn before the
    last (fewer turns than the ground truth), and checks every turn when it cuts the last."""
    from environments.bfcl.agents import PlanAgent, gold_plan
    from environments.bfcl.tasks import MAX_STEPS_PER_TURN, get_task
    from rods_env.task import ToolCall

    task = get_task("multi_turn_base_0")
    gold = gold_plan(task)
    pwd = ((ToolCall(name="pwd", arguments={}),),) * MAX_STEPS_PER_TURN
    for plan, expected in (
        ((gold[0] + pwd, *gold[1:]), False),
        ((*gold[:-1], gold[-1] + pwd), True),
    ):
        info = run_episode(env, PlanAgent(plan), task=task)
        assert info["truncated"] and info["success"] is expected
        assert official_verdict(task, info["turn_results"])["valid"] is expected


def test_bfcls_checker_keeps_every_instance_it_makes(tasks):
    """The defect the harness isolates: BFCL's checker stores instances in its module's
    globals under the model name and test id and never drops them."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    from environments.bfcl.apis import call_text
    from tests.environments.bfcl.official import restore_bfcl_module_state

    def count():
        return sum(1 for k in vars(multi_turn_utils) if k.endswith("_instance"))

    before = count()
    sample = tasks[:: len(tasks) // 40]
    try:
        for task in sample:
            decoded = [
                [[call_text(c.name, c.arguments) for c in t]] if t else [] for t in task.gold
            ]
            result = multi_turn_checker(
                decoded, [list(t) for t in task.ground_truth], task.entry(), task.category, "leak"
            )
            assert result["valid"]
        grown = count() - before
        assert grown == 2 * sum(len(t.classes) for t in sample)  # model's and gold's, kept
    finally:
        space = vars(multi_turn_utils)
        for key in [k for k in space if k.startswith("leak_") and k.endswith("_instance")]:
            del space[key]
        restore_bfcl_module_state()
    assert count() == before


def test_exported_results_get_the_same_verdicts_from_bfcls_decoder_and_checker(tasks, tmp_path):
    """`rods eval` → environments.bfcl.export → BFCL's function-calling decoder → BFCL's
    checker: the verdicts of a user's `bfcl evaluate` on the same outputs."""
    from environments.bfcl.agents import PlanAgent, silent_plan
    from environments.bfcl.export import main as export_main
    from rods_agent.engines.scripted import ScriptedEngine
    from rods_agent.evaluation.evaluate import evaluate
    from tests.environments.bfcl.official import decode_like_bfcl_fc, isolated, safe_call_strings

    sample = tasks[::20]  # 40 tasks, all categories
    kinds = ["gold", "reversed", "repeated", "act_in_empty_turn", "first_turn_only", "silent"]
    by_id = {t.id: t for t in sample}

    def make_agent(info):
        task = by_id[info["task_id"]]
        kind = kinds[sample.index(task) % len(kinds)]
        return PlanAgent(silent_plan(task)) if kind == "silent" else _agent(kind, task)

    from environments.bfcl import BFCL

    views = {t.id: t for t in BFCL.seed_tasks()}
    summary = evaluate(
        ScriptedEngine(make_agent), [views[t.id] for t in sample], out=tmp_path / "run"
    )
    assert export_main([str(tmp_path / "run"), str(tmp_path / "bfcl"), "--model", "m/FC"]) == 0
    files = sorted((tmp_path / "bfcl" / "m_FC" / "multi_turn").iterdir())
    assert [f.name for f in files] == [
        f"BFCL_v4_multi_turn_{c}_result.json"
        for c in ("base", "long_context", "miss_func", "miss_param")
    ]
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    ours = {r.task_id: r.success[0] for r in summary.results}
    verdicts = {}
    for path in files:
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            task = by_id[entry["id"]]
            decoded = decode_like_bfcl_fc(entry["result"])
            if len(decoded) != len(task.ground_truth):
                verdicts[task.id] = False
                continue
            safe_call_strings(decoded)
            with isolated():
                result = multi_turn_checker(
                    decoded, [list(t) for t in task.ground_truth], task.entry(), task.category,
                    "rods",
                )  # fmt: skip
            verdicts[task.id] = result["valid"]
    assert verdicts == ours
    assert 0 < sum(ours.values()) < len(ours)
