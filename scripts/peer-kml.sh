#!/usr/bin/env bash
# iolearn's ML runtime side by side with KML's own C, on KML's released readahead models and
# the same 64 normalised rows (the micro benchmark's), in one session, pinned to one CPU.
#
#   scripts/peer-kml.sh KERNEL_ML_CHECKOUT [REPEATS]
#
# KERNEL_ML_CHECKOUT is a checkout of https://github.com/sbu-fsl/kernel-ml (none of its code is
# in this repository; its `src/` and `include/` are compiled here with gcc -O3 -march=native,
# without the coverage flags of its CMake build: the peer at its best). Each repeat runs, in
# turn, iolearn's tree, KML's tree, iolearn's network, KML's network; the two sides must agree
# on every class (a checksum of the predictions). Prints per case the median ns per call with
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
for f in $(find "$kml_src/src" -name '*.c' ! -name kml_kernel.c ! -path '*nfs*'); do
    gcc -O3 -march=native -std=gnu99 -w -I"$kml_src/include" -c "$f" -o "$work/$(basename "$f" .c).o"
done
ar rcs "$work/libkml_user.a" "$work"/*.o
gcc -O3 -march=native -std=gnu99 -I"$kml_src/include" benches/peers/kml_side_by_side.c "$work/libkml_user.a" -lm -lpthread -o "$work/peer"
cargo build --release --quiet -p iolearn-ml --example side_by_side
ours=target/release/examples/side_by_side
"$ours" "$models" rows > "$work/rows.txt"

pin=()
if command -v taskset >/dev/null && (($(nproc) > 1)); then pin=(taskset -c 1); fi
# Call counts are multiples of 64 (the rows cycle), so the checksums compare per cycle.
declare -A calls=([tree]=20000000 [net]=1000000 [peer_net]=102400)
results=$work/results.txt
for ((r = 1; r <= repeats; r++)); do
    for case in tree net; do
        o=$("${pin[@]}" "$ours" "$models" "$work/rows.txt" "$case" "${calls[$case]}")
        n=${calls[$case]}; [[ $case == net ]] && n=${calls[peer_net]}
        p=$("${pin[@]}" "$work/peer" "$models" "$work/rows.txt" "$case" "$n")
        echo "$r $case ${calls[$case]} $o $n $p" >> "$results"
    done
done

instr=""
if [[ ${INSTR:-0} == 1 ]] && command -v valgrind >/dev/null; then
    count() { # instructions of "$@" with N=$1 calls (last argument)
        valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 | grep -o 'refs: *[0-9,]*' | tr -dc 0-9
    }
    for case in tree net; do
        a=$(count "$ours" "$models" "$work/rows.txt" "$case" 20000); b=$(count "$ours" "$models" "$work/rows.txt" "$case" 40000)
        c=$(count "$work/peer" "$models" "$work/rows.txt" "$case" 20000); d=$(count "$work/peer" "$models" "$work/rows.txt" "$case" 40000)
        instr+="$case $(((b - a) / 20000)) $(((d - c) / 20000))"$'\n'
    done
fi

python3 - "$results" "$instr" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
instr = {l.split()[0]: l.split()[1:] for l in sys.argv[2].splitlines() if l.strip()}
print(f"{'case':<6}{'iolearn ns':>20}{'KML C ns':>24}{'KML / iolearn':>22}  instructions (iolearn / KML)")
for case in ("tree", "net"):
    r = [x for x in rows if x[1] == case]
    # repeat case N_ours ns "ns/call" "checksum" SUM N_peer ns "ns/call" "checksum" SUM
    ours = [float(x[3]) for x in r]
    peer = [float(x[8]) for x in r]
    if any(int(x[6]) * 64 // int(x[2]) != int(x[11]) * 64 // int(x[7]) for x in r):
        sys.exit(f"peer-kml: {case}: the two sides predicted different classes (checksums differ)")
    ratio = [p / o for o, p in zip(ours, peer)]
    fmt = lambda v, d: f"{statistics.median(v):.{d}f} [{min(v):.{d}f}-{max(v):.{d}f}]"
    i = instr.get(case)
    print(f"{case:<6}{fmt(ours, 2):>20}{fmt(peer, 1):>24}{fmt(ratio, 1) + 'x':>22}  {i[0] + ' / ' + i[1] if i else '-'}")
print(f"{len(rows) // 2} repeats, interleaved; checksums equal")
EOF
