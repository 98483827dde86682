#!/bin/bash
# What a change of read_ahead_kb costs a running reader: fio-multifile of the readahead family
# (sequential 4 KiB preads over eight 256 MiB files, switching file every 16 reads; fio reopens
# each file when it wraps, about once a second, so open files take the device's value by
# sysfs alone) in a 1 GiB memory cgroup, on ext4 on a loop device (direct I/O) backed by a
# 3 GiB file in a fresh directory under /var/tmp. Each case runs 15 s from a dropped cache; at 5 s the device goes from FROM to
# TO KiB by sysfs (TO = FROM: a write of the same value). Prints fio's MB/s per second, the
# cases interleaved REPEATS times. Root and fio; removes its loop device, mount, cgroup and
# image on exit and on signals.
#
#   scripts/ra-change-transient.sh [REPEATS] [FROM:TO ...]
#   e.g. scripts/ra-change-transient.sh 3 1024:1024 1024:2048 2048:2048 128:1024 1024:128
set -euo pipefail
REPEATS=${1:-3}
shift || true
[ $# -gt 0 ] || set -- 1024:1024 1024:2048 2048:2048
CASES=("$@")
[ "$(id -u)" = 0 ] || { echo "$0: needs root (loop device, cgroup)" >&2; exit 1; }
command -v fio >/dev/null || { echo "$0: fio not found" >&2; exit 1; }
[[ $REPEATS =~ ^[1-9][0-9]?$ ]] || { echo "$0: REPEATS must be 1 to 99, got '$REPEATS'" >&2; exit 1; }
for c in "${CASES[@]}"; do
  [[ $c =~ ^[0-9]{1,7}:[0-9]{1,7}$ ]] || { echo "$0: a case is FROM:TO in KiB, got '$c'" >&2; exit 1; }
done
. "$(dirname "$0")/loopfs.sh"
CG=/sys/fs/cgroup/memory/iolearn-ra-transient-$$
cleanup() {
  set +e
  loopfs_down
  [ -d "$CG" ] && rmdir "$CG"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
loopfs_up ra-transient 3G
FILES=
for i in 0 1 2 3 4 5 6 7; do
  fio --name=layout --filename="$WORK/mnt/small.$i" --rw=write --bs=1M --size=256M --fallocate=none \
    --end_fsync=1 --output=/dev/null
  FILES+="${FILES:+:}$WORK/mnt/small.$i"
done
mkdir "$CG" && echo $((1024 << 20)) >"$CG/memory.limit_in_bytes"
RA=/sys/block/$(basename "$DEV")/queue/read_ahead_kb
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) cores; MB/s per second, change at 5 s"
for ((r = 0; r < REPEATS; r++)); do
  for c in "${CASES[@]}"; do
    echo "${c%:*}" >"$RA"
    sync && echo 3 >/proc/sys/vm/drop_caches
    rm -f "$WORK"/bw_bw.*.log
    sh -c 'echo $$ >"$0/cgroup.procs" && shift && exec "$@"' "$CG" x fio --output=/dev/null --name=mf \
      --filename="$FILES" --ioengine=psync --fadvise_hint=0 --time_based --runtime=15 --randseed=1 \
      --write_bw_log="$WORK/bw" --log_avg_msec=1000 --rw=read --bs=4k --file_service_type=random:16 &
    sleep 5
    echo "${c#*:}" >"$RA"
    wait $!
    printf '%s %-10s' "$r" "$c"
    awk -F, '{printf " %5.0f", $2 / 1024}' "$WORK"/bw_bw.1.log
    echo
  done
done
