#!/bin/sh
# Loop devices with ext4, xfs and btrfs for the timing experiment (undo: teardown.sh).
set -e
for fs in ext4 xfs btrfs; do
  [ -f img.$fs ] || truncate -s 3G img.$fs
  dev=$(losetup --find --show img.$fs)
  echo $dev > dev.$fs
  case $fs in ext4) mkfs.ext4 -q -F $dev ;; xfs) mkfs.xfs -q -f $dev ;; btrfs) mkfs.btrfs -q -f $dev ;; esac
  mkdir -p /mnt/iol-$fs && mount $dev /mnt/iol-$fs
done
