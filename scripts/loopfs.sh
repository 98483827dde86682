# Sourced by the kernel experiments (leap-kernel.sh, ra-change-transient.sh, ra-push-shrink.sh):
# an ext4 file system on a loop device (direct I/O) over an image in a fresh directory under
# /var/tmp, and its removal. Set the caller's EXIT trap (calling loopfs_down) before
# loopfs_up, so that a signal part-way through set-up leaves nothing behind.
#
#   loopfs_up NAME SIZE   sets WORK (the directory; the file system is mounted at $WORK/mnt)
#                         and DEV (the loop device)
#   loopfs_running PID... the processes a subshell of the caller runs now (a job started
#                         inside $(...) is not the caller's job); loopfs_running with no PID
#                         once they are done, so a later pid of the same number is left alone
#   loopfs_down           stops the caller's background jobs and the processes running (they
#                         may hold the file system), then unmounts, detaches and removes what
#                         loopfs_up made, if anything
WORK=
DEV=
loopfs_up() {
  WORK=$(mktemp -d "/var/tmp/$1.XXXXXX")
  truncate -s "$2" "$WORK/img"
  DEV=$(losetup --direct-io=on --find --show "$WORK/img")
  mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$DEV"
  mkdir "$WORK/mnt"
  mount "$DEV" "$WORK/mnt"
}
loopfs_running() {
  [ -n "$WORK" ] || return 0
  if [ $# -gt 0 ]; then echo "$@" >> "$WORK/running"; else : > "$WORK/running"; fi
}
loopfs_down() {
  # Nothing made yet: no directory to look in (an empty WORK would make it /mnt).
  [ -n "$WORK" ] || return 0
  # A reader left running on a signal kept the mount busy: the unmount failed and the loop
  # device, the mount and the reader itself outlived the script.
  local jobs
  jobs=$(jobs -p)
  if [ -n "$jobs" ]; then
    kill $jobs 2>/dev/null
    wait $jobs 2>/dev/null
  fi
  # Started inside $(...): a signal ends the caller, not its command substitution's
  # children, which went on reading from the mount. Not the caller's children, so not
  # waited for: polled until gone (a tuner restores what it set on SIGTERM first).
  local running=
  if [ -f "$WORK/running" ]; then running=$(cat "$WORK/running"); fi
  if [ -n "$running" ]; then
    kill $running 2>/dev/null
    for _ in $(seq 100); do kill -0 $running 2>/dev/null || break; sleep 0.05; done
  fi
  if mountpoint -q "$WORK/mnt"; then umount "$WORK/mnt"; fi
  if [ -n "$DEV" ]; then losetup -d "$DEV"; fi
  rm -rf "$WORK"
}
