#!/bin/bash
# Must-show 2 of issue 14: capture each job on ext4, replay it on ext4, xfs and btrfs (loop
# devices on the same disk) in ARTC, TO and ST order at natural speed, and run the job for real
# on each: wall seconds, 3 interleaved repeats. Output: timing.csv (job,fs,rep,kind,seconds).
I=/work/main/target/release/iolearn
J=/var/tmp/ms1/jobs.sh
out=/var/tmp/ms2/timing2.csv
echo job,fs,rep,kind,seconds > $out
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
for job in db fio tree; do
  mkdir -p /mnt/iol-ext4/w_$job
  (cd /mnt/iol-ext4/w_$job && $I trace record -o /var/tmp/ms2/$job.parquet -- $J $job >/dev/null 2>/var/tmp/ms2/rec_$job.txt)
  for rep in 1 2 3 4 5; do
    for fs in ext4 xfs btrfs; do
      mkdir -p /mnt/iol-$fs/real_$job
      drop
      # The replay's init leaves the archive tree reads in the page cache: so does this.
      [ $job = tree ] && cat /var/tmp/ms1/src.tar > /dev/null
      s=$(cd /mnt/iol-$fs/real_$job && /usr/bin/time -f %e -o /var/tmp/ms2/t.txt $J $job >/dev/null 2>&1; cat /var/tmp/ms2/t.txt)
      echo $job,$fs,$rep,real,$s >> $out
      for mode in artc to st; do
        rm -rf /mnt/iol-$fs/replay && mkdir /mnt/iol-$fs/replay
        drop
        w=$($I replay syscalls /var/tmp/ms2/$job.parquet --target /mnt/iol-$fs/replay --mode $mode --timing natural 2>/dev/null | head -1 | sed -n 's/.*wall \([0-9.]*\) s.*/\1/p')
        echo $job,$fs,$rep,$mode,$w >> $out
      done
    done
  done
done
echo done >> /var/tmp/ms2/timing.done
