#!/bin/bash
# per-task success rate of a model on the RL pool at the rollout temperature (4 trials each)
M=$1; OUT=$2
cd /work/wt-main
PYTHONPATH=/work/wt-main OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 VLLM_CPU_KVCACHE_SPACE=2 \
  nice -n 5 /work/main/.venv-vllm/bin/python -c "from rods_agent.cli import main; raise SystemExit(main())" \
  eval --env retail --pool /work/exp/run5/pools/rl-pool.jsonl --split all --engine vllm --model $M \
  --dtype bfloat16 --device cpu --seed 0 --temperature 0.7 --top-p 1.0 --max-tokens 128 \
  --max-episode-tokens 6144 --max-turns 10 --prompt brief --trials 4 --concurrency 64 --no-progress --out $OUT
