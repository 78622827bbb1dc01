"""The parts of an evaluation (:mod:`rods_agent.evaluate` runs them), one module per
stage: :mod:`.pools`, :mod:`.run_folder`, :mod:`.progress`, :mod:`.scores`, :mod:`.files`.
"""
