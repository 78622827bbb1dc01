"""Skill-aligned task synthesis: new valid tasks with a seed's structure, no model needed.

Five stages (see ``docs/synthesis.md``): :func:`plan`, :func:`execute`, :func:`rewrite`,
:func:`critique`, :func:`apply_augment`; :func:`synthesize` chains them::

    from rods_env.synthesis import TaskPool, synthesize

    pool = TaskPool(domain.seed_tasks("train"))
    for outcome in synthesize(pool.tasks, per_seed=5, mode="resample", known=pool.keys()):
        if outcome.accepted:
            pool.add(outcome.task, key=outcome.key)
"""

from rods_env.synthesis.augment import (
    AUGMENTS,
    CANNOT,
    apply_augment,
    distractor,
    expected_signature,
    long_context,
    missing_function,
    missing_parameter,
)
from rods_env.synthesis.critique import (
    REASONS,
    PolicyCheck,
    check_one_step,
    critique,
    dedupe_key,
    free_turns,
    underivable_arguments,
)
from rods_env.synthesis.execute import Candidate, content_id, execute
from rods_env.synthesis.pipeline import (
    Accepted,
    Outcome,
    Rejection,
    SynthesisConfig,
    Synthesizer,
    synthesize,
)
from rods_env.synthesis.plan import MODES, Plan, Reject, plan
from rods_env.synthesis.pool import TaskPool
from rods_env.synthesis.report import SynthesisReport
from rods_env.synthesis.rewrite import rewrite

__all__ = [
    "AUGMENTS",
    "CANNOT",
    "MODES",
    "REASONS",
    "Accepted",
    "Candidate",
    "Outcome",
    "Plan",
    "PolicyCheck",
    "Reject",
    "Rejection",
    "SynthesisConfig",
    "SynthesisReport",
    "Synthesizer",
    "TaskPool",
    "apply_augment",
    "check_one_step",
    "content_id",
    "critique",
    "dedupe_key",
    "distractor",
    "execute",
    "expected_signature",
    "free_turns",
    "long_context",
    "missing_function",
    "missing_parameter",
    "plan",
    "rewrite",
    "synthesize",
    "underivable_arguments",
]
