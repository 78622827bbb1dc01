"""The task pools a run starts from: the starting (train) pool and the test split."""

from __future__ import annotations

from rods_agent.config import TrainConfig
from rods_env.errors import ConfigError
from rods_env.task import Task


def train_domain(env: str) -> str:
    """The rods domain trained on for ``env``: the domain itself, or the domain that stands
    in for a benchmark's missing train split (:attr:`rods_env.benchmark.BenchmarkDomain.
    train_domain`; BFCL: ``bfcl-api``).

    Raises:
        ConfigError: for a benchmark with nothing to train on.
    """
    from rods_env.benchmark import BenchmarkDomain
    from rods_env.registry import load_any_domain

    family = load_any_domain(env)
    if not isinstance(family, BenchmarkDomain):
        return family.name
    if family.train_domain is None:
        raise ConfigError(
            f"env {env}: {family.name} is a benchmark with no rods domain to train on"
        )
    return family.train_domain


def load_pools(config: TrainConfig) -> tuple[list[Task], list[Task]]:
    """The starting pool and the test split (reserved from synthesis, used for evaluation).

    ``data.pool`` is ``seeds`` (each domain's seed tasks) or a JSONL task pool; a pool's
    tasks without a split (synthesized pools) count as train tasks. A benchmark without a
    train split (BFCL) trains on its stand-in rods domain (:func:`train_domain`) and its
    test split is the benchmark's own tasks (BFCL's 800), which are never trained on.
    """
    from rods_env.benchmark import BenchmarkDomain
    from rods_env.registry import load_any_domain, load_domain
    from rods_env.task import load_tasks

    data = config.data
    pool_file = None if data.pool == "seeds" else load_tasks(data.pool)
    train: list[Task] = []
    test: list[Task] = []
    for env in config.env:
        family = load_any_domain(env)
        if isinstance(family, BenchmarkDomain):
            family.require()
            domain = load_domain(train_domain(env))
            if data.split != "train":
                raise ConfigError(
                    f"data.split: {family.name}'s tasks are test tasks, evaluated only; "
                    "training on it uses the train split of "
                    f"{domain.name}"
                )
            if pool_file is None:
                tasks = domain.seed_tasks("train")
            else:
                tasks = [t for t in pool_file if t.domain == domain.name and t.split != "test"]
            family.check_training_pool(tasks)
            train.extend(tasks)
            test.extend(family.seed_tasks())
            continue
        domain = load_domain(env)
        if pool_file is None:
            tasks = domain.seed_tasks(None if data.split == "all" else data.split)
        else:
            wanted = {"train": ("train", None), "test": ("test",), "all": ("train", "test", None)}
            tasks = [
                t for t in pool_file if t.domain == domain.name and t.split in wanted[data.split]
            ]
        train.extend(tasks)
        if data.split == "train":
            test.extend(domain.seed_tasks("test"))
    if not train:
        where = "the seed sets" if pool_file is None else data.pool
        raise ConfigError(f"data.pool: no {data.split} tasks of {', '.join(config.env)} in {where}")
    return train, test
