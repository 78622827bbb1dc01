#!/usr/bin/env bash
# A registered experiment's block steps, from the repository root (each experiment folder's
# own blocks.sh calls this with its name):
#
#   bash experiments/blocks.sh EXP start K       # run block K (resumes), detached
#   bash experiments/blocks.sh EXP check-warm K  # block K's re-trained warm start against block K-1's
#   bash experiments/blocks.sh EXP copy-warm K   # block K starts from block K-1's warm start
#   bash experiments/blocks.sh EXP commit K      # once block K is whole: compress, check, commit
#   bash experiments/blocks.sh EXP status K      # where block K stands
#   bash experiments/blocks.sh EXP save K TAG    # block K's finished stages copied to partial/ (staged)
#
# A block is one run seed K: the warm start, one run per arm, the final evaluations of the
# warm start and of every arm's last step on the held-out tasks. `start` runs
# `rods experiment EXP/experiment.yaml "runs.seeds=[0,...,K]"` detached (logs in $LOGS,
# default /work/logs: blockK.out, blockK.err), with a watcher that reruns it up to 3 times if
# it fails (a rerun resumes where it stopped). It refuses while any `rods experiment` runs,
# once the experiment's summary.md says it stopped, and, where the experiment's blocks.env
# sets NEED_BF16=1, on a CPU without bf16 matmul.
#
# A warm start is copied (`copy-warm`) only where re-training it was shown to give the same
# bytes: `check-warm K` compares block K's re-trained warm start with block K-1's and, if
# they are equal, writes EXP/warm-start-check.env with the machine and code they ran on
# (boot, CPU flags, the last commit of the code, the vLLM environment); `copy-warm` refuses
# unless all of them still hold. `commit` refuses unless the block is whole, and stages
# nothing big.
#
# EXP/blocks.env (sourced) sets LAST (the last block), MODES (runs.modes, in order), STEPS
# (runs.steps), NEED_BF16 (0 or 1) and WHY_BF16 (where that rule comes from); what it exports
# (e.g. VLLM_CPU_KVCACHE_SPACE) reaches the runner that `start` launches.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: experiments/blocks.sh EXP start|check-warm|copy-warm|commit|status|save K [TAG]"
name=${1:?$usage}
what=${2:?$usage}
K=${3:?$usage}
EXP=experiments/$name
[[ $name =~ ^[A-Za-z0-9._-]+$ && -f $EXP/blocks.env && -f $EXP/experiment.yaml ]] \
  || { echo "blocks.sh: $EXP has no blocks.env and experiment.yaml" >&2; exit 2; }
LAST='' MODES='' STEPS='' NEED_BF16=0 WHY_BF16=''
# shellcheck source=/dev/null
source "$EXP/blocks.env"
OUT=$EXP/out
LOGS=${LOGS:-/work/logs}
CPUINFO=${CPUINFO:-/proc/cpuinfo}  # read for the CPU's flags (a test points it elsewhere)
[[ $K =~ ^[0-9]+$ ]] && ((K <= LAST)) || { echo "blocks.sh: K must be 0-$LAST, got '$K'" >&2; exit 2; }
seeds="[$(seq -s, 0 "$K")]"
read -r -a modes <<< "$MODES"
final=$OUT/final/variants-0/step-$STEPS/done.json
code_paths=(rods_agent rods_env environments scripts constraints pyproject.toml)
CHECK=$EXP/warm-start-check.env

whole() {  # block K's runs have done.json and the final stage scored all its models
  for mode in "${modes[@]}"; do
    [[ -f $OUT/runs/$mode-s$K/done.json ]] || return 1
  done
  [[ -f $final ]] || return 1
  for model in warm "${modes[@]}"; do
    grep -q "\"$model-s$K\"" "$final" || return 1
  done
}

machine() {  # what a warm-start copy must match: boot, CPU flags, code commit, vLLM packages
  echo "WARM_BOOT='$(uptime -s)'"
  echo "WARM_FLAGS=$(grep -m1 flags "$CPUINFO" | sha256sum | cut -c1-16)"
  echo "WARM_CODE=$(git log -1 --format=%H -- "${code_paths[@]}")"
  echo "WARM_VENV=$(ls .venv-vllm/lib/python3.11/site-packages | grep dist-info | sha256sum | cut -c1-16)"
}

model_sum() { sha256sum "$1/epoch-1/model/model.safetensors" | cut -d' ' -f1; }

case $what in
start)
  if ((NEED_BF16)) && ! grep -m1 '^flags' "$CPUINFO" | grep -qwE 'avx512_bf16|amx_bf16'; then
    echo "blocks.sh: this CPU has neither avx512_bf16 nor amx_bf16 ($WHY_BF16): no block runs on it" >&2
    exit 1
  fi
  if [[ -f $EXP/summary.md ]] && grep -q 'Stopped, not completed' "$EXP/summary.md"; then
    echo "blocks.sh: the experiment stopped (its summary.md says so): no block runs any more" >&2
    exit 1
  fi
  if pgrep -f "rods experiment " > /dev/null; then
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
check-warm)
  ((K >= 1)) || { echo "blocks.sh: block 0 has no warm start before it to compare with" >&2; exit 2; }
  new=$OUT/warm-start
  [[ -f $new/epoch-1/done.json && ! -e $new/reused.json ]] \
    || { echo "blocks.sh: $new is not a finished, re-trained warm start" >&2; exit 1; }
  src=$OUT/warm-starts/s$((K - 1))
  [[ -f $src/epoch-1/model/model.safetensors ]] \
    || { echo "blocks.sh: $src has no model here to compare with" >&2; exit 1; }
  a=$(model_sum "$src") b=$(model_sum "$new")
  if [[ $a != "$b" ]]; then
    echo "blocks.sh: block $K's re-trained warm start ($b) differs from s$((K - 1))'s ($a): blocks re-train"
    exit 0
  fi
  { machine; echo "WARM_SHA=$a"; echo "WARM_CHECKED_BLOCK=$K"; } > "$CHECK"
  git add "$CHECK"
  echo "block $K's re-trained warm start equals s$((K - 1))'s ($a): $CHECK written and staged"
  ;;
copy-warm)
  ((K >= 1)) || { echo "blocks.sh: block 0 trains its warm start" >&2; exit 2; }
  src=$OUT/warm-starts/s$((K - 1))
  [[ -f $src/done.json && -f $src/epoch-1/model/model.safetensors ]] \
    || { echo "blocks.sh: $src has no warm start with its model here: re-train" >&2; exit 1; }
  [[ ! -e $OUT/warm-start ]] || { echo "blocks.sh: $OUT/warm-start exists already" >&2; exit 1; }
  [[ -f $CHECK ]] || { echo "blocks.sh: no $CHECK: no re-trained warm start has matched yet; re-train" >&2; exit 1; }
  bad=()
  while IFS= read -r line; do  # each of this machine's values must be the recorded one
    grep -qxF -- "$line" "$CHECK" || bad+=("${line%%=*}")
  done < <(machine)
  git diff --quiet HEAD -- "${code_paths[@]}" || bad+=("uncommitted code")
  WARM_SHA=''
  # shellcheck source=/dev/null
  source "$CHECK"
  if ((${#bad[@]})); then
    echo "blocks.sh: not the machine and code of $CHECK (${bad[*]}): block $K re-trains its warm start" >&2
    exit 1
  fi
  sum=$(model_sum "$src")
  [[ $sum == "$WARM_SHA" ]] || { echo "blocks.sh: $src's model is not the checked one ($sum)" >&2; exit 1; }
  cp -a "$src" "$OUT/warm-start"
  rm -f "$OUT/warm-start/reused.json"
  printf '{"from": "s%d", "sha256": "%s", "at": "%s"}\n' $((K - 1)) "$sum" "$(date -u +%FT%TZ)" \
    > "$OUT/warm-start/reused.json"
  echo "block $K's warm start is a copy of s$((K - 1)) ($sum)"
  ;;
commit)
  whole || { echo "blocks.sh: block $K is not whole (every run's done.json, every final evaluation)" >&2; exit 1; }
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
  extra=()
  [[ -f $CHECK ]] && extra+=("$CHECK")
  git commit -q -m "$OUT: block $K, whole; the experiment folder is $size bytes" -- "$OUT" "${extra[@]}"
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
  for mode in "${modes[@]}"; do evals+=("$OUT/final/variants-0/step-$STEPS/$mode-s$K"); done
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
  tag=${4:?usage: blocks.sh EXP save K TAG, e.g. 2026-12-07a}
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
    evals=(final/variants-0/warm-s"$K" final/variants-0/step-"$STEPS"/*-s"$K")
    have=()
    for ev in "${evals[@]}"; do [[ -d $ev ]] && have+=("$ev"); done
    ((${#have[@]} == 0)) || tar czf - "${have[@]}" > "$here/$dest/final-s$K.tar.gz"
    [[ ! -f timings.json ]] || cp timings.json "$here/$dest/timings.json"
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
  echo "blocks.sh: unknown step '$what' (start, check-warm, copy-warm, commit, status, save)" >&2
  exit 2
  ;;
esac
