"""Subcommands of the ``rods`` CLI: each module has ``add_arguments(parser)`` and ``run(args)``."""
