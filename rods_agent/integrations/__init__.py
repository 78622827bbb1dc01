"""Integrations of rods with other trainers (optional extras)."""
