"""Episodes played by a model: what training and evaluation both run.

:mod:`~rods_agent.rollouts.batch`: batched multi-turn rollouts (continuous batching, the
token sequence with its assistant mask and log-probabilities, ``EpisodeRecord``);
:mod:`~rods_agent.rollouts.user`: ``LLMUser``, the simulated user played by any engine, and
``UserBatcher``, which batches many episodes' user replies. Importing this package imports
neither.
"""
