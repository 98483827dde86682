#!/bin/sh
for fs in ext4 xfs btrfs; do umount /mnt/iol-$fs 2>/dev/null; [ -f dev.$fs ] && losetup -d $(cat dev.$fs); rm -f dev.$fs; rmdir /mnt/iol-$fs 2>/dev/null; done
