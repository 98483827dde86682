#!/bin/bash
# LEAP on the kernel (iolearn tune readahead --controller leap-prefetch-unmarked) against the
# vanilla kernel (read_ahead_kb 128) on one reader of a 256 MiB file of random bytes: 4 KiB
# preads front to back (seq), back to front (rev), at random offsets (rand) or front to back
# one in eight (stride: 4 KiB read, 28 KiB skipped, as the family's fio-strided), the file
# dropped from the cache at every pass, for SECONDS each run. Ext4 on a loop device (direct
# I/O) backed by a file in a fresh directory under /var/tmp; the two configurations
# interleaved REPEATS times per pattern; prints each run's pages/s, the share of one core
# LEAP's process used (user + system time over the run), and the median ratio with its
# spread. Root; removes its loop device, mount and image on exit and on signals.
#
#   scripts/leap-kernel.sh [REPEATS] [SECONDS] [PATTERN ...]
#   e.g. scripts/leap-kernel.sh 5 5 seq rev rand stride
set -euo pipefail
REPEATS=${1:-3}
SECONDS_EACH=${2:-5}
shift 2 || shift $# || true
[ $# -gt 0 ] || set -- seq rev rand
[ "$(id -u)" = 0 ] || { echo "$0: needs root (loop device, eBPF)" >&2; exit 1; }
[[ $REPEATS =~ ^[1-9][0-9]?$ ]] || { echo "$0: REPEATS must be 1 to 99, got '$REPEATS'" >&2; exit 1; }
[[ $SECONDS_EACH =~ ^[1-9][0-9]?$ ]] || { echo "$0: SECONDS must be 1 to 99, got '$SECONDS_EACH'" >&2; exit 1; }
for p in "$@"; do
  [[ $p =~ ^(seq|rev|rand|stride)$ ]] || { echo "$0: a pattern is seq, rev, rand or stride, got '$p'" >&2; exit 1; }
done
IOLEARN=${IOLEARN:-$(dirname "$0")/../target/release/iolearn}
[ -x "$IOLEARN" ] || { echo "$0: $IOLEARN not built (cargo build --release --bin iolearn)" >&2; exit 1; }
. "$(dirname "$0")/loopfs.sh"
trap 'set +e; loopfs_down' EXIT
trap 'exit 130' INT TERM HUP
loopfs_up leap-kernel 400M
NAME=$(basename "$DEV")
head -c 256M /dev/urandom > "$WORK/mnt/data" && sync
echo 128 > "/sys/block/$NAME/queue/read_ahead_kb"
cat > "$WORK/reader.py" <<'PY'
import os, random, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
n = os.fstat(fd).st_size // 4096
seconds, pattern, go = float(sys.argv[2]), sys.argv[3], sys.argv[4]
while not os.path.exists(go):  # the prefetcher, if any, is watching
    time.sleep(0.01)
rng = random.Random(1)
t0, pages = time.monotonic(), 0
while time.monotonic() - t0 < seconds:
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    order = {"seq": lambda: range(n), "rev": lambda: range(n - 1, -1, -1),
             "rand": lambda: (rng.randrange(n) for _ in range(n)),
             "stride": lambda: range(0, n, 8)}[pattern]()
    for i in order:
        os.pread(fd, 4096, i * 4096)
        pages += 1
        if pages % 1024 == 0 and time.monotonic() - t0 >= seconds:
            break
print(round(pages / (time.monotonic() - t0)))
PY
run() { # pattern config -> pages/s
  rm -f "$WORK/go"
  python3 "$WORK/reader.py" "$WORK/mnt/data" "$SECONDS_EACH" "$1" "$WORK/go" > "$WORK/out" &
  local pid=$! tuner=
  loopfs_running "$pid"
  if [ "$2" = leap ]; then
    "$IOLEARN" tune readahead --device "$NAME" --pid "$pid" --controller leap-prefetch-unmarked \
      --state-dir "$WORK/state" > "$WORK/leap.out" 2> "$WORK/leap.log" &
    tuner=$!
    loopfs_running "$tuner"
    # The reader starts once LEAP watches it (readahead off, in its memory cgroup).
    for _ in $(seq 500); do grep -q charged_to "$WORK/leap.log" && break; sleep 0.02; done
  fi
  touch "$WORK/go"
  local t0=$(date +%s.%N)
  wait "$pid"
  local t1=$(date +%s.%N)
  # Reaped: its number may be another process's from now on.
  loopfs_running
  if [ -n "$tuner" ]; then
    loopfs_running "$tuner"
    # utime + stime (fields 14, 15 of /proc/PID/stat, after the command's parenthesis), ticks.
    local ticks=$(sed 's/^.*) //' "/proc/$tuner/stat" | awk '{print $12 + $13}')
    kill -TERM "$tuner"; wait "$tuner" || true
    loopfs_running
    python3 -c "print(f'{$ticks / $(getconf CLK_TCK) / ($t1 - $t0):.2f}')" > "$WORK/cpu"
  fi
  cat "$WORK/out"
}
for p in "$@"; do
  ratios=()
  for ((i = 0; i < REPEATS; i++)); do
    if ((i % 2)); then l=$(run "$p" leap); v=$(run "$p" vanilla); else v=$(run "$p" vanilla); l=$(run "$p" leap); fi
    ratios+=("$(python3 -c "print(f'{$l / $v:.3f}')")")
    echo "$p repeat $i: vanilla $v pages/s, LEAP $l pages/s (its process $(cat "$WORK/cpu") of a core); $(cat "$WORK/leap.out")"
  done
  python3 -c "import statistics, sys; r = sorted(map(float, sys.argv[2:])); print(f'{sys.argv[1]}: LEAP / vanilla median {statistics.median(r):.2f} [{r[0]:.2f}-{r[-1]:.2f}] over {len(r)} repeats')" "$p" "${ratios[@]}"
done
