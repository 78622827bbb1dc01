"""Task synthesis as the agent package runs it, around :mod:`rods_env.synthesis`.

:mod:`~rods_agent.synthesis.pool`: ``synth_pool``, a validated task pool grown offline from
seed tasks (what ``rods synth`` runs: resumable, interruptible, with a summary);
:mod:`~rods_agent.synthesis.rewrite`: ``ModelRewriter``, the optional model-based Rewrite
stage. Importing this package imports neither (nor torch).
"""
