"""Evaluation: :mod:`.evaluate` (``evaluate``, what ``rods eval`` and the trainer run) and
the parts it runs, one module per stage: :mod:`.pools`, :mod:`.run_folder`,
:mod:`.progress`, :mod:`.scores`, :mod:`.files`. Importing this package imports none of them.
"""
