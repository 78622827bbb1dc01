"""Training: ``rods train``'s loop, the policies it trains, the warm start and ``rods sft``.

The modules, from the loop down (each imports only those below it, never the loop):

* :mod:`~rods_agent.training.loop`: ``train()``, the loop top to bottom, and ``build_policy``.
* :mod:`~rods_agent.training.run_dir`: the run directory, checkpoints, resume.
* :mod:`~rods_agent.training.metrics`: a step's metrics line, TensorBoard, progress bar.
* :mod:`~rods_agent.training.pools`: the starting pool and the test split.
* :mod:`~rods_agent.training.policy`: the ``Policy`` protocol the loop is written against.
* :mod:`~rods_agent.training.simulated`: the simulated learner (``policy: simulated``).
* :mod:`~rods_agent.training.model_policy`: ``ModelPolicy`` (``policy: model``), composed of
  :mod:`~rods_agent.training.learner` (the model, LoRA, the KL reference),
  :mod:`~rods_agent.training.numerics` (optimizer, learning-rate schedule),
  :mod:`~rods_agent.training.generator` (the sampling engine and weight sync),
  :mod:`~rods_agent.training.model_checkpoint` (its checkpoint files, model folders) and
  :mod:`~rods_agent.training.warm_start` (oracle transcripts, supervised fine-tuning).
* :mod:`~rods_agent.training.sft`: ``rods sft`` (warm start, then a model folder).
* :mod:`~rods_agent.training.export`: ``rods export`` (a checkpoint as a model folder).
* :mod:`~rods_agent.training.report`: ``rods report`` (plots and a summary of runs).
* :mod:`~rods_agent.training.grpo`: GRPO as tensor functions (advantages, the clipped loss).
* :mod:`~rods_agent.training.config`: ``TrainConfig``, the typed configuration (it imports
  nothing of this package, so the data engine can read its ``DataConfig``).

Importing this package imports none of them (and no torch).
"""
