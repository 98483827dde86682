# Sourced by the kernel experiments (leap-kernel.sh, ra-change-transient.sh, ra-push-shrink.sh):
# an ext4 file system on a loop device (direct I/O) over an image in a fresh directory under
# /var/tmp, and its removal. Set the caller's EXIT trap (calling loopfs_down) before
# loopfs_up, so that a signal part-way through set-up leaves nothing behind.
#
#   loopfs_up NAME SIZE   sets WORK (the directory; the file system is mounted at $WORK/mnt)
#                         and DEV (the loop device)
#   loopfs_down           stops the caller's background jobs (they may hold the file system),
#                         then unmounts, detaches and removes what loopfs_up made, if anything
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
  if mountpoint -q "$WORK/mnt"; then umount "$WORK/mnt"; fi
  if [ -n "$DEV" ]; then losetup -d "$DEV"; fi
  rm -rf "$WORK"
}
