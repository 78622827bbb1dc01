"""rods_agent: engines, rollouts, evaluation and RODS training for agents on rods_env."""

__version__ = "0.1.0"
