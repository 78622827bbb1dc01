"""The task pools a run starts from: the starting (train) pool and the test split."""

from __future__ import annotations

from rods_agent.training.config import TrainConfig
from rods_env.errors import ConfigError
from rods_env.task import Task


def train_domain(env: str) -> str:
    """The domain trained on for ``env``: the domain itself (a benchmark with a train split
    of its own too), or the rods domain that stands in for a benchmark's missing train split
    (:attr:`rods_env.benchmark.BenchmarkDomain.train_domain`; BFCL: ``bfcl-api``)."""
    from rods_env.benchmark import BenchmarkDomain
    from rods_env.registry import load_any_domain

    family = load_any_domain(env)
    if isinstance(family, BenchmarkDomain) and family.train_domain is not None:
        return family.train_domain
    return family.name


def load_pools(config: TrainConfig) -> tuple[list[Task], list[Task]]:
    """The starting pool and the test split (reserved from synthesis, used for evaluation;
    ``data.eval_pool`` replaces the latter with held-out tasks of the caller's choosing).

    ``data.pool`` is ``seeds`` (each domain's seed tasks) or a JSONL task pool, whose tasks
    are split by rods' one split rule (:mod:`rods_env.splits`: a task without a split, as
    in synthesized pools, is a train task). A benchmark domain
    gives its train split only, without the tasks an agent of its exploit panel passes
    (unless ``data.keep_exploitable``), and refuses a pool that holds one of its test tasks. A
    benchmark without a train split (BFCL) trains on its stand-in rods domain
    (:func:`train_domain`), and its test split is the benchmark's own tasks (BFCL's 800),
    never trained on.
    """
    from rods_env.benchmark import BenchmarkDomain
    from rods_env.registry import load_any_domain, load_domain
    from rods_env.splits import in_split
    from rods_env.task import load_tasks

    data = config.data
    pool_file = None if data.pool == "seeds" else load_tasks(data.pool)
    train: list[Task] = []
    test: list[Task] = []
    for env in config.env:
        domain = load_any_domain(env)
        if isinstance(domain, BenchmarkDomain) and domain.train_domain is not None:
            domain.require()
            stand_in = load_domain(domain.train_domain)
            if data.split != "train":
                raise ConfigError(
                    f"data.split: {domain.name}'s tasks are test tasks, evaluated only; "
                    f"training on it uses the train split of {stand_in.name}"
                )
            if pool_file is None:
                tasks = stand_in.seed_tasks("train")
            else:
                tasks = in_split((t for t in pool_file if t.domain == stand_in.name), "train")
            domain.check_training_pool(tasks)
            train.extend(tasks)
            test.extend(domain.seed_tasks())
            continue
        if isinstance(domain, BenchmarkDomain):
            if pool_file is None:
                tasks = domain.training_tasks(data.split, keep_exploitable=data.keep_exploitable)
            else:
                if data.split != "train":
                    domain.training_tasks(data.split)  # refuses with the reason
                tasks = [t for t in pool_file if t.domain == domain.name]
                domain.check_training_pool(tasks)
                if not data.keep_exploitable:
                    exploitable = domain.exploitable_task_ids()
                    tasks = [t for t in tasks if t.id not in exploitable]
            train.extend(tasks)
            test.extend(domain.seed_tasks("test"))
            continue
        if pool_file is None:
            tasks = domain.seed_tasks(None if data.split == "all" else data.split)
        else:
            split = None if data.split == "all" else data.split
            tasks = in_split((t for t in pool_file if t.domain == domain.name), split)
        train.extend(tasks)
        if data.split == "train":
            test.extend(domain.seed_tasks("test"))
    if not train:
        where = "the seed sets" if pool_file is None else data.pool
        raise ConfigError(f"data.pool: no {data.split} tasks of {', '.join(config.env)} in {where}")
    if data.eval_pool is not None:
        test = load_tasks(data.eval_pool)
        if not test:
            raise ConfigError(f"data.eval_pool: no tasks in {data.eval_pool}")
        trained = {t.id for t in train}
        both = [t.id for t in test if t.id in trained]
        if both:
            raise ConfigError(
                f"data.eval_pool: {len(both)} of its tasks are in the training pool too "
                f"(first: {both[0]}); an evaluation split must be held out"
            )
    return train, test
