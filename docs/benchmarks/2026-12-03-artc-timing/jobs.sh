#!/bin/sh
# The three jobs of issue 14's must-show 1, each run in the current directory.
case "$1" in
db) rm -rf db; exec db_bench --benchmarks=fillsync,readrandom --threads=8 --num=4000 --db=db >/dev/null 2>&1 ;;
fio) rm -rf f; mkdir f; exec fio --directory=f --bs=4k --ioengine=psync --size=32m \
        --name=rw --rw=randrw --numjobs=3 --name=seq --rw=write --numjobs=1 --name=rd --rw=randread --numjobs=2 --thread >/dev/null ;;
tree) rm -rf t; mkdir t && tar xf /var/tmp/ms1/src.tar -C t && cp -r t/include t/copy && rm -r t ;;
esac
