"""The task pools a run starts from: the starting (train) pool and the test split."""

from __future__ import annotations

from rods_agent.config import TrainConfig
from rods_env.errors import ConfigError
from rods_env.task import Task


def load_pools(config: TrainConfig) -> tuple[list[Task], list[Task]]:
    """The starting pool and the test split (reserved from synthesis, used for evaluation).

    ``data.pool`` is ``seeds`` (each domain's seed tasks) or a JSONL task pool; a pool's
    tasks without a split (synthesized pools) count as train tasks. A benchmark domain
    gives its train split only, without the tasks an agent of its exploit panel passes
    (unless ``data.keep_exploitable``), and refuses a pool that holds one of its test tasks.
    """
    from rods_env.benchmark import BenchmarkDomain
    from rods_env.registry import load_any_domain
    from rods_env.task import load_tasks

    data = config.data
    pool_file = None if data.pool == "seeds" else load_tasks(data.pool)
    train: list[Task] = []
    test: list[Task] = []
    for env in config.env:
        domain = load_any_domain(env)
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
