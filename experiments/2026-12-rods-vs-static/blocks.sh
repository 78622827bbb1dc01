#!/usr/bin/env bash
# This experiment's block steps (registration section 8; amendments 1-3): experiments/blocks.sh
# with this folder, its blocks.env and its warm-start-check.env (warm-start-check.md's values).
#
#   bash experiments/2026-12-rods-vs-static/blocks.sh start|copy-warm|commit|status|save K [TAG]
exec bash "$(dirname "$0")/../blocks.sh" 2026-12-rods-vs-static "$@"
