#!/bin/bash
# Does a smaller readahead pushed into an open file shrink a sequential stream already
# running, as the same value set before the open does? One reader (16 KiB reads, told
# POSIX_FADV_SEQUENTIAL as fio's sequential jobs are) over a 256 MiB file on ext4 on a loop
# device (direct I/O) backed by an image in a fresh directory under /var/tmp, the device at
# FROM KiB. After 64 MiB the device goes to TO KiB and the reader's own description is
# advised again (what `iolearn tune` does through pidfd_getfd); it reads on to 192 MiB. The
# kernel's readahead tracepoints (readahead:page_cache_async_ra / _sync_ra, in a tracing
# instance of its own) give each readahead's window (`size`) and limit (`ra_pages`), in pages;
# printed: the windows before and after the push, and those of a second reader opened after
# it (the static setting). With --drop, the push also drops the pages read ahead of the
# reader (POSIX_FADV_DONTNEED over the next 4 x FROM KiB), so that its next read misses and the
# kernel builds the window again from the new limit. Root, python3, tracefs; removes its
# instance, loop device, mount and image on exit and on signals.
#
#   scripts/ra-push-shrink.sh [--drop] [FROM TO]      (default 128 16)
set -euo pipefail
DROP=0
if [ "${1:-}" = --drop ]; then DROP=1; shift; fi
FROM=${1:-128}
TO=${2:-16}
for v in "$FROM" "$TO"; do
  [[ $v =~ ^[0-9]{1,5}$ ]] && ((v >= 4)) || { echo "$0: FROM and TO are KiB, 4 to 99999; got '$v'" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "$0: needs root (loop device, tracefs)" >&2; exit 1; }
TR=/sys/kernel/tracing
mountpoint -q "$TR" || mount -t tracefs nodev "$TR"
[ -d "$TR/events/readahead/page_cache_async_ra" ] || { echo "$0: this kernel has no readahead tracepoints" >&2; exit 1; }
. "$(dirname "$0")/loopfs.sh"
INST=$TR/instances/iolearn-ra-push-$$
cleanup() {
  set +e
  [ -d "$INST" ] && { echo 0 >"$INST/tracing_on"; rmdir "$INST"; }
  loopfs_down
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
loopfs_up ra-push 1G
dd if=/dev/urandom of="$WORK/mnt/big" bs=1M count=256 status=none conv=fsync
RA=/sys/block/$(basename "$DEV")/queue/read_ahead_kb
echo "$FROM" >"$RA"
sync && echo 3 >/proc/sys/vm/drop_caches
mkdir "$INST"
echo 1 >"$INST/events/readahead/page_cache_async_ra/enable"
echo 1 >"$INST/events/readahead/page_cache_sync_ra/enable"
echo 1 >"$INST/tracing_on"
# The reader marks its phases in the trace (trace_marker), so the windows can be told apart.
python3 - "$WORK/mnt/big" "$RA" "$TO" "$INST/trace_marker" "$DROP" "$FROM" <<'EOF'
import os, sys
path, ra, to, marker, drop, old = sys.argv[1:7]
def mark(s):
    with open(marker, "w") as m:
        m.write(s)
def read(fd, start_mib, end_mib):
    for off in range(start_mib << 20, end_mib << 20, 16 << 10):
        os.pread(fd, 16 << 10, off)
fd = os.open(path, os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
mark("phase opened-before")
read(fd, 0, 64)
with open(ra, "w") as f:
    f.write(to)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)  # the push
if drop == "1":
    os.posix_fadvise(fd, 64 << 20, 4 * int(old) << 10, os.POSIX_FADV_DONTNEED)
mark("phase pushed")
read(fd, 64, 192)
g = os.open(path, os.O_RDONLY)
os.posix_fadvise(g, 0, 0, os.POSIX_FADV_SEQUENTIAL)
mark("phase opened-after")
read(g, 192, 256)
EOF
echo 0 >"$INST/tracing_on"
echo "# $(date -u +%FT%TZ) $(uname -r); device $FROM KiB, pushed $TO KiB after 64 MiB$( ((DROP)) && echo ', the pages read ahead dropped'); pages"
awk '
  /phase / { for (i = 1; i <= NF; i++) if ($i == "phase") phase = $(i + 1); next }
  /page_cache_(a)?sync_ra/ {
    kind = ($0 ~ /async_ra/) ? "async" : "sync"
    for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
    key = phase " " kind
    n[key]++; size[key] += v["size"]; if (v["size"] > max[key]) max[key] = v["size"]
    lim[key] = v["ra_pages"]
  }
  END {
    printf "%-14s %-6s %6s %10s %9s %9s\n", "phase", "kind", "calls", "mean size", "max size", "ra_pages"
    split("opened-before pushed opened-after", order, " ")
    for (p = 1; p <= 3; p++) for (k = 0; k < 2; k++) {
      key = order[p] " " (k ? "async" : "sync")
      if (n[key]) printf "%-14s %-6s %6d %10.1f %9d %9d\n", order[p], (k ? "async" : "sync"), n[key], size[key] / n[key], max[key], lim[key]
    }
  }' "$INST/trace"
