"""``rods experiment``: the paper's experiment in miniature (docs/learning/protocol.md;
results: docs/learning.md).

:mod:`~rods_agent.experiment.config` (the YAML), :mod:`~rods_agent.experiment.runner`
(the stages, resumable), :mod:`~rods_agent.experiment.stats` (intervals over tasks and
seeds), :mod:`~rods_agent.experiment.summary` (the table and plots).
"""
