#!/usr/bin/env bash
# Run each cargo-fuzz target for FUZZ_SECONDS (libFuzzer needs nightly Rust). Prints a skip
# reason and succeeds when nightly or cargo-fuzz cannot be had here.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-20}
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz: SKIPPED (no nightly Rust toolchain: rustup toolchain install nightly)"
    exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked --quiet || { echo "fuzz: SKIPPED (cargo-fuzz could not be installed)"; exit 0; }
fi
status=0
for target in model_file tree_text trace_parsers kml_texts policy_spec feature_rows syscall_traces; do
    mkdir -p "fuzz/corpus/$target"
    if cargo +nightly fuzz run "$target" "fuzz/corpus/$target" "fuzz/seeds/$target" -- \
        -max_total_time="$secs" -print_final_stats=1 > "fuzz/$target.log" 2>&1; then
        runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "fuzz/$target.log" | grep -o '[0-9]*$' || echo '?')
        echo "fuzz: $target ok ($runs inputs in ${secs}s)"
    else
        echo "fuzz: $target FAILED, see fuzz/$target.log"; tail -30 "fuzz/$target.log"; status=1
    fi
done
exit $status
