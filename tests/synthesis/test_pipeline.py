"""The pipeline on the toy bank: valid variants, the right structure, determinism."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rods_env.domain import Skill
from rods_env.errors import ConfigError
from rods_env.seeds import make_task
from rods_env.synthesis import (
    AUGMENTS,
    REASONS,
    Accepted,
    Rejection,
    SynthesisConfig,
    SynthesisReport,
    Synthesizer,
    check_one_step,
    content_id,
    execute,
    plan,
    synthesize,
)
from rods_env.synthesis.plan import growable_axes
from rods_env.synthesis.report import entities
from tests.synthesis.conftest import assert_valid
from tests.synthesis.toy_synth import SHAPED


def _run(seeds, **kw):
    # the toy's long database has more accounts, not longer records: no length requirement
    kw.setdefault("long_ratio", 1.0)
    return list(synthesize(seeds, domains=SHAPED, **kw))


@pytest.mark.parametrize("mode", ["resample", "expand"])
def test_every_accepted_variant_is_valid_and_has_the_planned_structure(seeds, mode):
    parents = {t.id: t for t in seeds}
    outcomes = _run(seeds, per_seed=2, mode=mode, augment=AUGMENTS)
    accepted = [o.task for o in outcomes if o.accepted]
    assert len(accepted) >= len(seeds)
    base = {t.id: t for t in accepted if t.variant == "base"}
    for task in accepted:
        assert_valid(SHAPED, task)
        prov = task.provenance
        assert prov.origin == "synthesized" and prov.mode == mode and prov.generation == 1
        if task.variant == "base":
            parent = parents[prov.parent_id]
            assert prov.augment is None and task.split == parent.split
            if mode == "resample":
                assert task.signature == parent.signature
                assert task.shape == parent.shape
            else:
                check_one_step(parent.signature, task.signature, _grown_axis(parent, task))
                assert task.signature.size > parent.signature.size
        else:
            assert prov.augment == task.variant and prov.parent_id in base
            b = base[prov.parent_id]
            want_turns = b.signature.turns + (task.variant == "missing_function")
            assert task.signature.tools == b.signature.tools
            assert task.signature.turns == want_turns
    assert {t.variant for t in accepted} == {"base", *AUGMENTS}


def _grown_axis(parent, task):
    (axis,) = [a for a in task.shape if task.shape[a] != parent.shape.get(a)]
    assert task.shape[axis] == parent.shape[axis] + 1
    return axis


def test_resample_draws_new_entities(seeds):
    outcomes = _run(seeds, per_seed=3)
    parents = {t.id: t for t in seeds}
    for o in outcomes:
        if o.accepted:
            parent = parents[o.task.provenance.parent_id]
            assert set(entities(o.task)) != set(entities(parent))


def test_same_seed_same_output_different_seed_different_entities(seeds):
    a = _run(seeds, per_seed=2, augment=AUGMENTS, seed=0)
    b = _run(seeds, per_seed=2, augment=AUGMENTS, seed=0)
    c = _run(seeds, per_seed=2, augment=AUGMENTS, seed=1)
    assert [o.task.to_json() if o.accepted else o for o in a] == [
        o.task.to_json() if o.accepted else o for o in b
    ]
    ents_a = {e for o in a if o.accepted for e in entities(o.task)}
    ents_c = {e for o in c if o.accepted for e in entities(o.task)}
    assert ents_a != ents_c
    ids_a = {o.task.id for o in a if o.accepted}
    ids_c = {o.task.id for o in c if o.accepted}
    assert ids_a != ids_c


def test_ids_come_from_content_and_are_unique(seeds):
    tasks = [o.task for o in _run(seeds, per_seed=3, augment=AUGMENTS) if o.accepted]
    assert len({t.id for t in tasks}) == len(tasks)
    for t in tasks:
        assert t.id == content_id(t)


def test_duplicates_are_rejected_against_the_batch_and_the_known_pool(seeds):
    first = Synthesizer(SynthesisConfig(per_seed=2, attempts=1), domains=SHAPED)
    one = list(first.run(seeds))
    assert len({o.key for o in one if o.accepted}) == sum(o.accepted for o in one)
    # the same candidates again, told what is already in the pool: the accepted ones are
    # now duplicates, the rejected ones are rejected for the same reason
    two = _run(seeds, per_seed=2, attempts=1, known=first.seen)
    assert len(one) == len(two)
    for a, b in zip(one, two, strict=True):
        assert not b.accepted
        assert b.reason == ("duplicate" if a.accepted else a.reason)


def test_a_resample_equal_to_its_seed_is_a_duplicate(seeds):
    def same_account(db, rng, shape):
        return SHAPED.skill("balance").generate(db, __import__("random").Random(0), shape)

    dom = replace(SHAPED, skills=(Skill("balance", "", same_account, writes=False),))
    seed = make_task(dom, dom.skills[0], __import__("random").Random(1), task_id="s")
    out = _run_on(dom, [seed], per_seed=1, attempts=2, rewrite=False)
    assert [o.reason for o in out] == ["duplicate", "duplicate"]


def _run_on(domain, seeds, **kw):
    return list(synthesize(seeds, domains=domain, **kw))


def test_cannot_expand_is_reported_once_per_seed(seeds):
    balance = [t for t in seeds if t.skill == "balance"][:2]
    out = _run(balance, per_seed=3, mode="expand")
    assert [(o.accepted, o.reason) for o in out] == [(False, "cannot_expand")] * 2


def test_expand_at_the_limit_cannot_expand(seeds):
    top = [t for t in seeds if t.skill == "transfer" and t.shape["transfers"] == 3]
    out = _run(top, per_seed=1, mode="expand")
    assert {o.reason for o in out} == {"cannot_expand"}


def test_expand_round_robins_over_axes(seeds):
    skill = Skill(
        "s",
        "",
        lambda db, rng, shape: None,
        shape={"a": 1, "b": 1},
        limits={"a": (1, 2), "b": (1, 3)},
    )
    dom = replace(SHAPED, skills=(skill,))
    seed = seeds[0].model_copy(update={"skill": "s", "shape": {"a": 1, "b": 1}})
    assert [plan(dom, seed, "expand", i).axis for i in range(4)] == ["a", "b", "a", "b"]
    assert plan(dom, seed, "expand", 0).shape == {"a": 2, "b": 1}
    at_a_max = seed.model_copy(update={"shape": {"a": 2, "b": 1}})
    assert [plan(dom, at_a_max, "expand", i).axis for i in range(2)] == ["b", "b"]
    assert plan(dom, seed, "resample").shape == {"a": 1, "b": 1}


def test_execute_matches_make_task(seeds):
    import random

    seed = seeds[0]
    p = plan(SHAPED, seed, "resample")
    cand = execute(SHAPED, p, random.Random(5))
    ref = make_task(
        SHAPED, p.skill, random.Random(5), task_id="pending", shape=p.shape, split=seed.split
    )
    assert cand.task.turns == ref.turns and cand.task.signature == ref.signature
    assert cand.task.user == ref.user


def test_outcomes_and_report(seeds):
    report = SynthesisReport(seeds)
    for o in _run(seeds, per_seed=2, mode="expand", augment=("distractor",)):
        assert isinstance(o, (Accepted, Rejection))
        report.add(o)
    report.finish()
    d = report.to_dict()
    assert d["accepted"] == len(report.accepted) > 0
    assert d["candidates"] == d["accepted"] + sum(d["rejected"].values())
    at_limit = [t for t in seeds if not growable_axes(SHAPED.skill(t.skill), t.shape)]
    assert d["rejected"]["cannot_expand"] == len(at_limit) == 9  # balance; the others at 3
    assert set(d["rejected"]) <= set(REASONS)
    assert d["accepted_by_kind"]["distractor"] == d["accepted_by_kind"]["base"]
    assert sum(c["seeds"] for c in d["signatures"].values()) == len(seeds)
    assert d["entity_coverage"]["to_account"]["new"] > 0
    text = report.format()
    assert "rejected by reason" in text and "cannot_expand" in text


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"mode": "grow"}, "mode must be one of"),
        ({"augment": ("paraphrase",)}, "unknown augmentation 'paraphrase'"),
        ({"per_seed": -1}, "per_seed"),
        ({"attempts": 0}, "attempts"),
    ],
)
def test_bad_config_is_a_config_error(kwargs, needle):
    with pytest.raises(ConfigError, match=needle):
        SynthesisConfig(**kwargs)


# -- rounds ----------------------------------------------------------------------------------
def test_the_same_parents_ten_rounds_still_give_new_tasks(seeds):
    parents = [t for t in seeds if t.skill in ("transfer", "session")][:4]
    synth = Synthesizer(SynthesisConfig(per_seed=2), domains=SHAPED)
    synth.remember(parents)
    keys: set[str] = set()
    per_round = []
    for step in range(10):
        accepted = [o for p in parents for o in synth.variants(p) if o.accepted]
        per_round.append(len(accepted))
        new = {o.key for o in accepted}
        assert not new & keys, f"round {step} repeated a task"
        keys |= new
    assert min(per_round) > 0, per_round
    assert [synth.next_round(p) for p in parents] == [10] * len(parents)


def test_the_guesses_are_the_facts_seen_so_far_sorted_after_every_round(seeds):
    """The missing-parameter augmentation's alternatives: every fact value the synthesizer
    has seen, per label, sorted; only the labels that changed are sorted again, and a
    list handed out earlier stays as it was."""
    parents = [t for t in seeds if t.skill in ("transfer", "session")][:4]
    synth = Synthesizer(SynthesisConfig(per_seed=2), domains=SHAPED)
    synth.remember(parents[:1])
    before = synth._guesses(SHAPED.name)
    kept = {label: list(values) for label, values in before.items()}
    for step in range(3):
        list(synth.run(parents, round=step))
        bank = synth._alternatives[SHAPED.name]
        assert synth._guesses(SHAPED.name) == {label: sorted(v) for label, v in bank.items()}
    assert before == kept and synth._guesses(SHAPED.name) != kept


def test_without_a_new_round_the_same_parents_stop_producing(seeds):
    parents = [t for t in seeds if t.skill == "transfer"][:3]
    synth = Synthesizer(SynthesisConfig(per_seed=2, attempts=1), domains=SHAPED)
    synth.remember(parents)
    first = [o for p in parents for o in synth.variants(p, round=0) if o.accepted]
    again = [o for p in parents for o in synth.variants(p, round=0)]
    assert first and not any(o.accepted for o in again)
    assert {o.reason for o in again} == {"duplicate"}


def test_a_round_is_reproducible_and_independent_of_call_history(seeds):
    parents = [t for t in seeds if t.skill == "transfer"][:2]

    def at(round_: int, warmup: int) -> list[str]:
        synth = Synthesizer(SynthesisConfig(per_seed=2), domains=SHAPED)
        for r in range(warmup):
            for p in parents:
                list(synth.variants(p, round=r + 100))
        return [
            o.task.to_json() for p in parents for o in synth.variants(p, round=round_) if o.accepted
        ]

    assert at(3, 0) == at(3, 2)
    assert at(3, 0) != at(4, 0)
    round0 = [o.task.to_json() for o in _run(parents, per_seed=2) if o.accepted]
    assert round0 == [o.task.to_json() for o in _run(parents, per_seed=2, round=0) if o.accepted]
    assert round0 != [o.task.to_json() for o in _run(parents, per_seed=2, round=1) if o.accepted]
    with pytest.raises(ConfigError, match="round"):
        Synthesizer(domains=SHAPED).variants(parents[0], round=-1)
