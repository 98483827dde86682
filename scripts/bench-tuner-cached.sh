#!/bin/bash
# What the tuner costs a workload served from the page cache: fio's cached 4 KiB random reads
# alone, beside `iolearn tune readahead --dry-run` watching every window (--sample 1), and
# beside it sampling (the default), REPEATS times with the order turned each time. Prints each
# run's reads/s and the ratios to "alone" (median, min, max). Root, fio and a built iolearn.
#
#   scripts/bench-tuner-cached.sh FILE [REPEATS] [IOLEARN]
#
# FILE: a file of a few hundred MiB on a block device the tuner may watch (it changes nothing:
# --dry-run). Pin it for steadier numbers: `taskset -c 1 scripts/bench-tuner-cached.sh ...`.
set -euo pipefail
FILE=${1:?usage: $0 FILE [REPEATS] [IOLEARN]}
REPEATS=${2:-10}
BIN=${3:-$(dirname "$0")/../target/release/iolearn}
[ "$(id -u)" = 0 ] || { echo "$0: needs root (eBPF)" >&2; exit 1; }
command -v fio >/dev/null || { echo "$0: fio not found" >&2; exit 1; }
[ -x "$BIN" ] || { echo "$0: $BIN: not built (cargo build --release)" >&2; exit 1; }
[ -f "$FILE" ] || { echo "$0: $FILE: no such file" >&2; exit 1; }
DEV=$(lsblk -no PKNAME,KNAME "$(df --output=source "$FILE" | tail -1)" | awk '{print ($1 != "" ? $1 : $2); exit}')
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
cat "$FILE" >/dev/null # cached
run() { # CONFIG -> reads/s
  fio --name=r --filename="$FILE" --rw=randread --bs=4k --ioengine=psync --time_based --runtime=8 \
    --ramp_time=1 --invalidate=0 --fadvise_hint=0 --output-format=json --output="$OUT/fio.json" &
  local fio_pid=$! tuner=
  sleep 0.2
  if [ "$1" != alone ]; then
    local share=1
    [ "$1" = sampled ] && share=0.05
    "$BIN" tune readahead --device "$DEV" --controller vanilla --pid "$(pgrep -n -x fio)" --dry-run \
      --duration 8.6 --sample "$share" >/dev/null 2>&1 &
    tuner=$!
  fi
  wait "$fio_pid"
  [ -n "$tuner" ] && wait "$tuner"
  python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['jobs'][0]['read']['iops'])" "$OUT/fio.json"
}
for i in $(seq "$REPEATS"); do
  if ((i % 2)); then order="alone whole sampled"; else order="sampled whole alone"; fi
  for c in $order; do echo "$i $c $(run "$c")"; done
done | tee "$OUT/runs"
python3 - "$OUT/runs" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    i, config, v = line.split()
    runs.setdefault(i, {})[config] = float(v)
for config in ("whole", "sampled"):
    r = [x[config] / x["alone"] for x in runs.values()]
    print(f"{config}: reads/s over alone, median {statistics.median(r):.3f} [{min(r):.3f}, {max(r):.3f}] of {len(r)}")
PY
