#!/usr/bin/env bash
# iolearn's ML runtime side by side with KML's own C, on KML's released readahead models and
# the same normalised rows (the micro benchmark's, more of them, and KML's own), in one session,
# pinned to one CPU.
#
#   scripts/peer-kml.sh KERNEL_ML_CHECKOUT [REPEATS]
#
# KERNEL_ML_CHECKOUT is a checkout of https://github.com/sbu-fsl/kernel-ml (none of its code is
# in this repository; its `src/` and `include/` are compiled here with gcc -O3 -march=native,
# without the coverage flags of its CMake build: the peer at its best). Each repeat runs, per
# row set in turn, iolearn's tree and KML's, iolearn's tree on all the rows in one call and KML's
# tree again (it has no such call), iolearn's network and KML's; the two sides must agree on
# every class (a checksum of the predictions). Prints per case the median ns per row with
# [min-max] over the repeats, and the median of the per-repeat ratios with their range. With
# valgrind installed, INSTR=1 adds instructions per call (callgrind, two call counts, the
# difference divided by the extra calls).
set -euo pipefail
cd "$(dirname "$0")/.."
kml_src=${1:?usage: scripts/peer-kml.sh KERNEL_ML_CHECKOUT [REPEATS]}
repeats=${2:-5}
[[ -d $kml_src/src && -d $kml_src/include ]] || { echo "peer-kml: $kml_src has no src/ and include/ (a kernel-ml checkout?)" >&2; exit 2; }
[[ $repeats =~ ^[0-9]+$ ]] && ((repeats >= 1 && repeats <= 100)) || { echo "peer-kml: REPEATS must be 1 to 100" >&2; exit 2; }
models=${KML_MODELS:-../shared/reference/kml/readahead}
[[ -f $models/decision_tree_model/readahead_model.dt ]] || { echo "peer-kml: KML's released models not found in $models (set KML_MODELS)" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "building KML's user-space library from $kml_src (gcc -O3 -march=native)..." >&2
# Two builds: -march=native for the timings, and without AVX-512 for callgrind (valgrind
# cannot run AVX-512 instructions; iolearn's kernels are AVX2 either way).
build_peer() { # $1: output binary, rest: extra gcc flags
    local out=$1 objs=$work/obj-$(basename "$1"); shift
    mkdir -p "$objs"
    for f in $(find "$kml_src/src" -name '*.c' ! -name kml_kernel.c ! -path '*nfs*'); do
        gcc -O3 -march=native "$@" -std=gnu99 -w -I"$kml_src/include" -c "$f" -o "$objs/$(basename "$f" .c).o"
    done
    ar rcs "$objs/libkml_user.a" "$objs"/*.o
    gcc -O3 -march=native "$@" -std=gnu99 -I"$kml_src/include" benches/peers/kml_side_by_side.c "$objs/libkml_user.a" \
        -lm -lpthread -o "$out"
}
build_peer "$work/peer"
[[ ${INSTR:-0} == 1 ]] && build_peer "$work/peer-avx2" -mno-avx512f
cargo build --release --quiet -p iolearn-ml --example side_by_side
ours=target/release/examples/side_by_side
# Three row sets: the micro benchmark's 64 rows (uniform in [-1.5, 1.5]; cycled, a branch
# predictor learns them), 4,096 such rows (too many to learn: a walk on varied input, as a
# tuner's windows are; both sides' rows still fit in L2) and KML's own 422 normalised training
# rows (real feature vectors).
"$ours" "$models" rows > "$work/uniform.txt"
"$ours" "$models" rows 4096 > "$work/varied.txt"
tr -s ' ' < "$models/nn_arch_data/input.csv" > "$work/kml.txt"

pin=()
if command -v taskset >/dev/null && (($(nproc) > 1)); then pin=(taskset -c 1); fi
declare -A calls=([tree]=20000000 [tree-rows]=20000000 [net]=1000000 [peer_net]=100000)
# KML has no call for many rows: its side of `tree-rows` (iolearn's `predict_classes`, every
# row of the set in one call) is its `tree` loop, one call a row, as its module would score them.
declare -A peer_case=([tree]=tree [tree-rows]=tree [net]=net)
results=$work/results.txt
for rows in uniform varied kml; do
    for case in tree tree-rows net; do
        # Both sides decide the same: equal checksums over the same rows in the same order.
        n=$(($(grep -c . "$work/$rows.txt") * 50))
        a=$("$ours" "$models" "$work/$rows.txt" "$case" "$n" | awk '{print $4}')
        b=$("$work/peer" "$models" "$work/$rows.txt" "${peer_case[$case]}" "$n" | awk '{print $4}')
        [[ $a == "$b" ]] || { echo "peer-kml: $case on $rows rows: the two sides predicted different classes" >&2; exit 1; }
    done
done
for ((r = 1; r <= repeats; r++)); do
    for rows in uniform varied kml; do
        for case in tree tree-rows net; do
            o=$("${pin[@]}" "$ours" "$models" "$work/$rows.txt" "$case" "${calls[$case]}" | awk '{print $1}')
            n=${calls[$case]}; [[ $case == net ]] && n=${calls[peer_net]}
            p=$("${pin[@]}" "$work/peer" "$models" "$work/$rows.txt" "${peer_case[$case]}" "$n" | awk '{print $1}')
            echo "$rows $case $o $p" >> "$results"
        done
    done
done

instr=""
if [[ ${INSTR:-0} == 1 ]] && command -v valgrind >/dev/null; then
    count() { # instructions of "$@" with N=$1 calls (last argument)
        valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 | { grep -o 'refs: *[0-9,]*' || echo 0; } | tr -dc 0-9
    }
    # Call counts are multiples of the 64 uniform rows, so tree-rows scores whole passes.
    for case in tree tree-rows net; do
        a=$(count "$ours" "$models" "$work/uniform.txt" "$case" 20480); b=$(count "$ours" "$models" "$work/uniform.txt" "$case" 40960)
        c=$(count "$work/peer-avx2" "$models" "$work/uniform.txt" "${peer_case[$case]}" 20480); d=$(count "$work/peer-avx2" "$models" "$work/uniform.txt" "${peer_case[$case]}" 40960)
        instr+="$case $(((b - a) / 20480)) $(((d - c) / 20480))"$'\n'
    done
fi

python3 - "$results" "$instr" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
instr = {l.split()[0]: l.split()[1:] for l in sys.argv[2].splitlines() if l.strip()}
fmt = lambda v, d: f"{statistics.median(v):.{d}f} [{min(v):.{d}f}-{max(v):.{d}f}]"
print(f"{'rows':<9}{'case':<10}{'iolearn ns':>22}{'KML C ns':>26}{'KML / iolearn':>20}  instructions, uniform rows (iolearn / KML)")
for rs in ("uniform", "varied", "kml"):
    for case in ("tree", "tree-rows", "net"):
        r = [x for x in rows if x[0] == rs and x[1] == case]
        ours, peer = [float(x[2]) for x in r], [float(x[3]) for x in r]
        ratio = [p / o for o, p in zip(ours, peer)]
        i = instr.get(case) if rs == "uniform" else None
        shown = f"{i[0]} / {i[1]}" if i and int(i[1]) > 0 else "-"
        print(f"{rs:<9}{case:<10}{fmt(ours, 2):>22}{fmt(peer, 1):>26}{fmt(ratio, 1) + 'x':>20}  {shown}")
print(f"{len(rows) // 9} repeats, interleaved; both sides predicted the same classes on every row set")
EOF
