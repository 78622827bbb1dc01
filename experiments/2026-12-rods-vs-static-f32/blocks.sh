#!/usr/bin/env bash
# This experiment's block steps (registration.md, section 4): experiments/blocks.sh with this
# folder and its blocks.env.
#
#   bash experiments/2026-12-rods-vs-static-f32/blocks.sh start|check-warm|copy-warm|commit|status|save K [TAG]
exec bash "$(dirname "$0")/../blocks.sh" 2026-12-rods-vs-static-f32 "$@"
