#!/bin/bash
# Must-show 2, second part: the ext4 captures replayed on the same file system under an I/O
# scheduler change (loop0: none -> bfq) and on a slower device (a blkio throttle of loop0:
# 2000 write IOPS, 2000 read IOPS), against the job really run in each; 3 interleaved repeats.
I=/work/main/target/release/iolearn
J=/var/tmp/ms1/jobs.sh
out=/var/tmp/ms2/timing3.csv
dev=$(cat /var/tmp/ms2/dev.ext4); name=$(basename $dev)
majmin=$(cat /sys/block/$name/dev)
cg=/sys/fs/cgroup/blkio/iolearn-slow
echo job,fs,rep,kind,seconds > $out
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
restore() { echo none > /sys/block/$name/queue/scheduler; [ -d $cg ] && { for p in $(cat $cg/cgroup.procs); do echo $p > /sys/fs/cgroup/blkio/cgroup.procs; done; rmdir $cg; }; }
trap restore EXIT
mkdir -p $cg
echo "$majmin 2000" > $cg/blkio.throttle.write_iops_device
echo "$majmin 2000" > $cg/blkio.throttle.read_iops_device
# run CONFIG CMD...: in the slow group for "slow", else as is
run() { local c=$1; shift; if [ $c = slow ]; then bash -c 'echo $$ > '$cg'/cgroup.procs; exec "$@"' _ "$@"; else "$@"; fi; }
for job in db fio; do
  for rep in 1 2 3; do
    for c in bfq slow; do
      if [ $c = bfq ]; then echo bfq > /sys/block/$name/queue/scheduler; else echo none > /sys/block/$name/queue/scheduler; fi
      rm -rf /mnt/iol-ext4/real_$job; mkdir -p /mnt/iol-ext4/real_$job
      drop
      s=$(cd /mnt/iol-ext4/real_$job && run $c /usr/bin/time -f %e -o /var/tmp/ms2/t.txt $J $job >/dev/null 2>&1; cat /var/tmp/ms2/t.txt)
      echo $job,ext4-$c,$rep,real,$s >> $out
      for mode in artc to st; do
        rm -rf /mnt/iol-ext4/replay && mkdir /mnt/iol-ext4/replay
        drop
        w=$(run $c $I replay syscalls /var/tmp/ms2/$job.parquet --target /mnt/iol-ext4/replay --mode $mode --timing natural 2>/dev/null | head -1 | sed -n 's/.*wall \([0-9.]*\) s.*/\1/p')
        echo $job,ext4-$c,$rep,$mode,$w >> $out
      done
    done
  done
done
echo done >> /var/tmp/ms2/exp2.done
