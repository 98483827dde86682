//! Compiles `src/bpf/readahead.bpf.c` with clang and generates its libbpf-rs skeleton.
//! Without clang (or with `IOLEARN_NO_BPF=1`) the crate still builds, and `Probe::start`
//! explains that this build has no eBPF programs.
use libbpf_cargo::SkeletonBuilder;
use std::path::PathBuf;
use std::process::Command;

const SRC: &str = "src/bpf/readahead.bpf.c";

fn main() {
    println!("cargo:rustc-check-cfg=cfg(iolearn_bpf)");
    println!("cargo:rerun-if-changed={SRC}");
    println!("cargo:rerun-if-changed=src/bpf/events.h");
    println!("cargo:rerun-if-changed=src/bpf/vmlinux_min.h");
    println!("cargo:rerun-if-env-changed=IOLEARN_NO_BPF");
    if std::env::var_os("IOLEARN_NO_BPF").is_some_and(|v| v == "1") {
        return;
    }
    if Command::new("clang").arg("--version").output().is_err() {
        println!("cargo:warning=clang not found: iolearn-probe is built without its eBPF programs");
        return;
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("readahead.skel.rs");
    SkeletonBuilder::new()
        .source(SRC)
        .clang_args(["-I", "src/bpf", "-Wall", "-Wno-unused-function"])
        .build_and_generate(&out)
        .expect("compiling src/bpf/readahead.bpf.c");
    println!("cargo:rustc-cfg=iolearn_bpf");
}
