"""The BFCL API world's tasks: the committed seeds and a synthesized pool of 1,000 are
multi-turn tasks over 1-3 classes in BFCL's four styles, solved by the oracle, given
nothing by the exploit panel, and share nothing with BFCL's 800 test tasks."""

from __future__ import annotations

from collections import Counter

import pytest

from rods_env.exploits import EXPLOITS, EXTRA_EXPLOITS, run_panel
from rods_env.gold import replay_gold
from rods_env.oracle import oracle_agent, run_episode
from rods_env.synthesis import CANNOT, critique
from tests.synthesis.conftest import assert_valid


@pytest.fixture(scope="module")
def domain(bfcl):
    from environments.bfcl.world import DOMAIN

    return DOMAIN


@pytest.fixture(scope="module")
def seeds(domain):
    return domain.seed_tasks()


def test_the_seed_set_spans_class_combinations_styles_and_worlds(domain, seeds):
    from environments.bfcl.world.skills import RECIPE_BY_NAME

    assert len(seeds) >= 200
    styles = Counter(t.variant for t in seeds)
    assert set(styles) == {"base", "missing_parameter", "missing_function", "long_context"}
    assert min(styles.values()) >= 50, styles
    combos = Counter("+".join(RECIPE_BY_NAME[t.skill].classes) for t in seeds)
    assert len(combos) == len(RECIPE_BY_NAME) and min(combos.values()) >= 5, combos
    assert {len(RECIPE_BY_NAME[t.skill].classes) for t in seeds} == {1, 2, 3}
    assert len({t.db_seed for t in seeds}) == len(seeds)  # every task its own world
    assert {t.split for t in seeds} == {"train", "test"}
    for task in seeds:
        assert len(task.turns) >= 2, task.id
        for turn in task.turns:
            # per-turn gold calls; the one turn without is a missing-function refusal
            assert turn.calls or (turn.withheld_tools and turn.outputs == (CANNOT,)), task.id
        if task.variant == "missing_parameter":
            assert any(t.hidden_facts for t in task.turns), task.id
        if task.variant == "long_context":
            assert task.db_size.startswith("long-"), task.id


def test_every_seed_passes_the_critique_and_the_oracle_solves_it(domain, seeds):
    """Execution, derivable arguments, the policy checks (no error results, every required
    value shown by a result, nothing shared with BFCL) and the whole exploit panel."""
    env = domain_env(domain, seeds)
    for task in seeds:
        critique(domain, task, replay_gold(domain, task), expected=None)
        out = run_episode(env, oracle_agent(domain, task), task=task)
        assert out["success"] and out["progress"] == 1.0, (task.id, out["turn_results"])


def domain_env(domain, tasks):
    from rods_env.env import ToolEnv

    return ToolEnv(domain, tasks=tasks, split=None, max_steps=80)


def test_the_exploit_panel_gets_nothing_and_the_read_only_agent_is_closed_by_the_output_rule(
    domain, seeds
):
    """The panel, BFCL's cheapest exploit (only the gold's read-only calls) and acting a
    turn late or early: zero turns, zero successes. Under BFCL's rules alone (state and
    results, no value to say) the read-only agent would pass the read-only turns."""
    names = (*EXPLOITS, *EXTRA_EXPLOITS)
    passed = Counter()
    for task in seeds:
        for name, info in run_panel(domain, task, names=names).items():
            passed[name] += sum(r["passed"] for r in info["turn_results"]) + info["success"]
    assert passed.total() == 0, passed
    bfcl_only = 0
    for task in seeds:
        quiet = task.model_copy(
            update={"turns": tuple(t.model_copy(update={"outputs": ()}) for t in task.turns)}
        )
        info = run_panel(domain, quiet, names=("read_only",))["read_only"]
        bfcl_only += sum(
            r["passed"] for r, t in zip(info["turn_results"], task.turns, strict=True) if t.calls
        )
    assert bfcl_only > 0  # the turns the output rule closes


def test_the_seeds_share_nothing_with_bfcls_test_tasks(seeds):
    from environments.bfcl.world.contamination import NEAR_DUPLICATE, report

    numbers = report(seeds)
    assert numbers["bfcl_questions"] > 2000 and numbers["bfcl_states"] > 400
    assert numbers["near_duplicates"] == 0 and numbers["tasks_sharing_anything"] == 0, numbers
    assert numbers["nearest_similarity_max"] < NEAR_DUPLICATE


def test_the_guard_flags_a_copied_question_call_sequence_and_state(domain, seeds, monkeypatch):
    from environments.bfcl.tasks import load_tasks
    from environments.bfcl.world import contamination

    bfcl = next(t for t in load_tasks("base") if any(len(turn) >= 2 for turn in t.gold))
    task = seeds[0]
    question = str(bfcl.turns[0][0]["content"])
    asked = task.model_copy(
        update={"turns": (task.turns[0].model_copy(update={"request": question}), *task.turns[1:])}
    )
    assert any("near duplicate" in v for v in contamination.violations(asked))
    reworded = question.replace(".", "!").upper() + " Thanks."
    sim, where = contamination.bfcl_index().nearest(reworded)
    assert sim >= contamination.NEAR_DUPLICATE and where is not None
    calls = next(turn for turn in bfcl.gold if len(turn) >= 2)
    copied = task.model_copy(
        update={"turns": (task.turns[0].model_copy(update={"calls": calls}), *task.turns[1:])}
    )
    assert any("gold calls are a turn of" in v for v in contamination.violations(copied))
    (state,) = [k for k, v in contamination.bfcl_index().states.items() if v == bfcl.id][:1]
    monkeypatch.setattr(contamination, "initial_states", lambda t, index=None: {state[0]: state[1]})
    assert any("initial" in v for v in contamination.violations(task))


def test_the_guards_outline_lets_every_bfcl_state_through():
    """The state check digests only a state whose outline a BFCL state has: every BFCL
    initial state (taken as a world's record) is digested and found; a long listing is
    outlined by its length alone."""
    from environments.bfcl.apis import new_world
    from environments.bfcl.tasks import load_tasks
    from environments.bfcl.world import contamination
    from environments.bfcl.world.state import ApiState, public_state

    index = contamination.bfcl_index()
    found = 0
    for task in load_tasks()[:40]:
        for cls, instance in new_world(task.scenario).instances.items():
            if cls == "MathAPI":
                continue
            record = ApiState.model_construct(api=cls, state=public_state(instance))
            digest = contamination._candidate_digest(cls, record, index)
            assert digest is not None and (cls, digest) in index.states, (task.id, cls)
            found += 1
    assert found > 40
    listing = {f"k{i}": {"v": i} for i in range(contamination.OUTLINED_KEYS + 1)}
    assert contamination.outline({"a": listing}) == ((repr("a"), ("d", len(listing))),)
    assert contamination.outline(dict(listing)) == contamination.outline(listing)


@pytest.mark.slow
def test_a_synthesized_pool_of_1000_tasks_shares_nothing_with_bfcl(domain, seeds):
    """Resample and expand around the train seeds, with the three BFCL styles as
    augmentations, until 1,000 tasks are accepted; the guard measures the pool (the
    critique already rejected every candidate that shared anything)."""
    from environments.bfcl.world.contamination import report
    from rods_env.synthesis import SynthesisConfig, Synthesizer

    train = [t for t in seeds if t.split == "train"]
    pool = []
    augments = ("missing_parameter", "missing_function", "long_context")
    for round_ in range(8):
        for mode in ("resample", "expand"):
            synth = Synthesizer(
                SynthesisConfig(per_seed=1, mode=mode, augment=augments, seed=round_)
            )
            pool += [o.task for o in synth.run(train, round=round_) if o.accepted]
        if len(pool) >= 1000:
            break
    pool = pool[:1000]
    assert len(pool) == 1000
    assert {t.domain for t in pool} == {"bfcl-api"} and all(t.split == "train" for t in pool)
    assert Counter(t.variant for t in pool).keys() >= {
        "base", "missing_parameter", "missing_function", "long_context"
    }  # fmt: skip
    numbers = report(pool)
    assert numbers["near_duplicates"] == 0 and numbers["tasks_sharing_anything"] == 0, numbers
    for task in pool[::4]:  # the oracle solves it, doing nothing earns nothing
        assert_valid(domain, task)
