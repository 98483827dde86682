#!/usr/bin/env bash
# Install what the project needs: system packages (when root and missing), the Rust toolchain
# check, and a Python virtualenv with the given packages.
set -euo pipefail
venv=$1; shift

need_apt=()
command -v cc >/dev/null || need_apt+=(build-essential)
python3 -c 'import venv, ensurepip' 2>/dev/null || need_apt+=(python3-venv)
# eBPF probes (crates/probe): clang compiles them, libbpf-sys builds libbpf against libelf and
# zlib. Without clang the probes are left out of the build (with a warning), not the rest.
command -v clang >/dev/null || need_apt+=(clang)
command -v pkg-config >/dev/null || need_apt+=(pkg-config)
[[ -f /usr/include/libelf.h ]] || need_apt+=(libelf-dev)
[[ -f /usr/include/zlib.h ]] || need_apt+=(zlib1g-dev)
# The real readahead benchmark (and its CI smoke test) drives RocksDB's db_bench and, for the
# test family, fio; only root can run it, so only root installs them.
if [[ $(id -u) == 0 ]]; then
    command -v db_bench >/dev/null || need_apt+=(rocksdb-tools)
    command -v fio >/dev/null || need_apt+=(fio)
    # strace: a second source of system-call traces (`iolearn trace import-strace`), and the
    # capture-overhead baseline.
    command -v strace >/dev/null || need_apt+=(strace)
fi
if ((${#need_apt[@]})); then
    if [[ $(id -u) == 0 ]]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
    else
        echo "bootstrap: missing ${need_apt[*]}; install them (apt-get install ${need_apt[*]}) or run as root" >&2
        exit 1
    fi
fi
if ! command -v cargo >/dev/null; then
    echo "bootstrap: cargo not found; install Rust (https://rustup.rs) and re-run" >&2
    exit 1
fi
[[ -x $venv/bin/python ]] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --upgrade pip
"$venv/bin/pip" install --quiet "$@"
