#!/usr/bin/env bash
# The registration's block steps (section 8; amendments 1 and 2), from the repository root:
#
#   bash experiments/2026-12-rods-vs-static/blocks.sh start K    # run block K (resumes), detached
#   bash experiments/2026-12-rods-vs-static/blocks.sh copy-warm K # amendment 2: block K starts from block K-1's warm start
#   bash experiments/2026-12-rods-vs-static/blocks.sh commit K   # step 3, once block K is whole
#   bash experiments/2026-12-rods-vs-static/blocks.sh status K   # where block K stands
#   bash experiments/2026-12-rods-vs-static/blocks.sh save K TAG # amendment 1: block K's finished
#                                                               # stages copied to partial/ (staged)
#
# `start` runs the registered command `rods experiment experiment.yaml "runs.seeds=[0,...,K]"`
# detached (logs in $LOGS, default /work/logs: blockK.out, blockK.err), with a watcher that
# reruns it up to 3 times if it fails (a rerun resumes: amendment 1). It refuses while a
# runner is alive, on a CPU without bf16 matmul, and once the experiment has stopped
# (amendment 3). `copy-warm` refuses
# unless the machine and code are those of warm-start-check.md. `commit` refuses unless the
# block is whole, and stages nothing big.
set -euo pipefail
cd "$(dirname "$0")/../.."
EXP=experiments/2026-12-rods-vs-static
OUT=$EXP/out
LOGS=${LOGS:-/work/logs}
CPUINFO=${CPUINFO:-/proc/cpuinfo}  # read for the CPU's flags (a test points it elsewhere)
what=${1:?usage: blocks.sh start|copy-warm|commit|status|save K}
K=${2:?usage: blocks.sh start|copy-warm|commit|status|save K}
[[ $K =~ ^[0-9]+$ ]] && ((K <= 19)) || { echo "blocks.sh: K must be 0-19, got '$K'" >&2; exit 2; }
seeds="[$(seq -s, 0 "$K")]"
final=$OUT/final/variants-0/step-12/done.json
modes=(static rods rods-expand envtuning)  # experiment.yaml's runs.modes

whole() {  # block K's four runs have done.json and the final stage scored its five models
  for mode in "${modes[@]}"; do
    [[ -f $OUT/runs/$mode-s$K/done.json ]] || return 1
  done
  [[ -f $final ]] && grep -q "\"warm-s$K\"" "$final" && grep -q "\"envtuning-s$K\"" "$final"
}

case $what in
start)
  # amendment 3: the registered bf16 training runs ~50x slower without native bf16 matmul
  if ! grep -m1 '^flags' "$CPUINFO" | grep -qwE 'avx512_bf16|amx_bf16'; then
    echo "blocks.sh: this CPU has neither avx512_bf16 nor amx_bf16 (amendment 3): no block runs on it" >&2
    exit 1
  fi
  # amendment 3, item 3: six sessions without a block stopped the experiment (sessions.md)
  if [[ -f $EXP/summary.md ]] && grep -q 'Stopped, not completed' "$EXP/summary.md"; then
    echo "blocks.sh: the experiment stopped (summary.md, amendment 3): no block runs any more" >&2
    exit 1
  fi
  if pgrep -f "rods experiment $EXP/experiment.yaml" > /dev/null; then
    echo "blocks.sh: a runner is still running (pgrep -af 'rods experiment'); wait for it" >&2
    exit 1
  fi
  mkdir -p "$LOGS"
  cmd=(.venv-vllm/bin/rods experiment "$EXP/experiment.yaml" "runs.seeds=$seeds")
  echo "=== block $K: ${cmd[*]} at $(date -u)" >> "$LOGS/block$K.reruns"
  nohup setsid bash -c '
    for i in 0 1 2 3; do
      "$@" >> "'"$LOGS/block$K.out"'" 2>> "'"$LOGS/block$K.err"'" < /dev/null && exit 0
      echo "=== attempt $i failed at $(date -u)" >> "'"$LOGS/block$K.reruns"'"
    done' _ "${cmd[@]}" > /dev/null 2>&1 < /dev/null &
  echo "block $K started (runs.seeds=$seeds); progress: tail -f $LOGS/block$K.err"
  ;;
copy-warm)
  ((K >= 2)) || { echo "blocks.sh: blocks 0 and 1 train their warm starts" >&2; exit 2; }
  src=$OUT/warm-starts/s$((K - 1))
  [[ -f $src/done.json && -f $src/epoch-1/model/model.safetensors ]] \
    || { echo "blocks.sh: $src has no warm start with its model here: re-train" >&2; exit 1; }
  [[ ! -e $OUT/warm-start ]] || { echo "blocks.sh: $OUT/warm-start exists already" >&2; exit 1; }
  paths=(rods_agent rods_env environments scripts constraints pyproject.toml)
  bad=()
  [[ $(uptime -s) == "2026-12-06 06:59:00" ]] || bad+=("boot $(uptime -s)")
  [[ $(grep -m1 flags "$CPUINFO" | sha256sum | cut -c1-16) == 655e587dbba24c41 ]] \
    || bad+=("CPU flags")
  [[ $(git log -1 --format=%h --abbrev=7 -- "${paths[@]}") == e0bbc6a ]] || bad+=("code commits")
  git diff --quiet HEAD -- "${paths[@]}" || bad+=("uncommitted code")
  [[ $(ls .venv-vllm/lib/python3.11/site-packages | grep dist-info | sha256sum | cut -c1-16) \
    == d725630d7170f75d ]] \
    || bad+=(".venv-vllm packages")
  if ((${#bad[@]})); then
    echo "blocks.sh: not the machine and code of warm-start-check.md (${bad[*]}): block $K re-trains its warm start" >&2
    exit 1
  fi
  sum=$(sha256sum "$src/epoch-1/model/model.safetensors" | cut -d' ' -f1)
  [[ $sum == 64b48851a69b1e6678c95e72819fee801765192e7b15573a625fdc3a5d874f5e ]] \
    || { echo "blocks.sh: $src's model is not the checked one ($sum)" >&2; exit 1; }
  cp -a "$src" "$OUT/warm-start"
  rm -f "$OUT/warm-start/reused.json"
  printf '{"from": "s%d", "sha256": "%s", "at": "%s"}\n' $((K - 1)) "$sum" "$(date -u +%FT%TZ)" \
    > "$OUT/warm-start/reused.json"
  echo "block $K's warm start is a copy of s$((K - 1)) ($sum)"
  ;;
commit)
  whole || { echo "blocks.sh: block $K is not whole (four runs' done.json, five final evaluations)" >&2; exit 1; }
  ! pgrep -f "rods experiment $EXP/experiment.yaml" > /dev/null \
    || { echo "blocks.sh: a runner is still running" >&2; exit 1; }
  [[ ! -e $OUT/warm-starts/s$K ]] || { echo "blocks.sh: $OUT/warm-starts/s$K exists" >&2; exit 1; }
  mkdir -p "$OUT/warm-starts"
  mv "$OUT/warm-start" "$OUT/warm-starts/s$K"
  find "$OUT" \( -name episodes.jsonl -o -name log.txt \) -exec gzip -9 {} \;
  .venv/bin/python "$EXP/analyze.py" --json /dev/null > /dev/null
  git add "$OUT"
  big=$(git diff --cached --name-only -- "$OUT" | xargs -r du -b | awk '$1 > 1000000 {print $2}')
  [[ -z $big ]] || { echo "blocks.sh: staged files over 1 MB: $big" >&2; exit 1; }
  size=$(git ls-files -z "$EXP" | du -cb --files0-from=- | tail -1 | cut -f1)
  ((size <= 20000000)) || { echo "blocks.sh: $EXP would hold $size bytes (over 20 MB)" >&2; exit 1; }
  git commit -q -m "$OUT: block $K, whole (registration section 8, step 3); the experiment folder is $size bytes" -- "$OUT"
  git log --oneline -1
  ;;
status)
  pid=$(pgrep -f "python .*rods experiment $EXP/experiment.yaml" | head -1) || true
  if [[ -n $pid ]]; then
    echo "runner: alive, pid $pid, $(ps -o args= -p "$pid" | grep -o 'runs.seeds=.*')"
  else
    echo "runner: none"
  fi
  for mode in "${modes[@]}"; do
    run=$OUT/runs/$mode-s$K
    steps=0
    [[ -f $run/metrics.jsonl ]] && steps=$(wc -l < "$run/metrics.jsonl")
    [[ -f $run/done.json ]] && end=", done" || end=""
    echo "run $mode-s$K: $steps metric lines$end"
  done
  evals=("$OUT/final/variants-0/warm-s$K")
  for mode in "${modes[@]}"; do evals+=("$OUT/final/variants-0/step-12/$mode-s$K"); done
  for ev in "${evals[@]}"; do
    [[ -d $ev ]] || { echo "final $(basename "$ev"): not started"; continue; }
    n=0
    [[ -f $ev/episodes.jsonl ]] && n=$(wc -l < "$ev/episodes.jsonl")
    [[ -f $ev/episodes.jsonl.gz ]] && n=$(zcat "$ev/episodes.jsonl.gz" | wc -l)
    [[ -f $ev/done.json ]] && end=", done" || end=""
    echo "final $(basename "$ev"): $n episodes$end"
  done
  if [[ -e $OUT/warm-starts/s$K ]]; then
    echo "block $K is committed"
  elif whole; then
    echo "block $K is whole: blocks.sh commit $K"
  else
    echo "block $K is not whole"
  fi
  ;;
save)
  tag=${3:?usage: blocks.sh save K TAG, e.g. 2026-12-07a}
  [[ $tag =~ ^[A-Za-z0-9-]+$ ]] || { echo "blocks.sh: TAG must be letters, digits and '-'" >&2; exit 2; }
  whole && { echo "blocks.sh: block $K is whole: commit it instead" >&2; exit 1; }
  dest=$EXP/partial/block-$K-session-$tag
  mkdir -p "$dest"
  here=$PWD
  (
    cd "$OUT"
    runs=(runs/*-s"$K")
    [[ -e ${runs[0]} ]] && tar czf - --exclude=checkpoints "${runs[@]}" > "$here/$dest/runs-s$K.tar.gz"
    [[ -d warm-start ]] && tar czf - --exclude=model warm-start > "$here/$dest/warm-start.tar.gz"
    evals=(final/variants-0/warm-s"$K" final/variants-0/step-12/*-s"$K")
    have=()
    for ev in "${evals[@]}"; do [[ -d $ev ]] && have+=("$ev"); done
    ((${#have[@]} == 0)) || tar czf - "${have[@]}" > "$here/$dest/final-s$K.tar.gz"
    cp timings.json "$here/$dest/timings.json"
  )
  for old in "$EXP"/partial/block-"$K"-session-*; do
    [[ $old == "$dest" ]] && continue
    git rm -r -q --ignore-unmatch "$old"
    rm -rf "$old"
  done
  git add "$dest"
  du -ab "$dest"
  echo "staged $dest (and the removal of block $K's older copies): add its line to partial/README.md and commit"
  ;;
*)
  echo "blocks.sh: unknown step '$what' (start, copy-warm, commit, status, save)" >&2
  exit 2
  ;;
esac
