//! Compiles the eBPF programs (`src/bpf/*.bpf.c`) with clang and generates their libbpf-rs
//! skeletons.
//! Without clang (or with `IOLEARN_NO_BPF=1`) the crate still builds, and `Probe::start`
//! explains that this build has no eBPF programs.
use libbpf_cargo::SkeletonBuilder;
use std::path::PathBuf;
use std::process::Command;

/// The programs and the skeleton each becomes.
const SOURCES: [(&str, &str); 3] = [
    ("src/bpf/readahead.bpf.c", "readahead.skel.rs"),
    ("src/bpf/sched.bpf.c", "sched.skel.rs"),
    ("src/bpf/syscalls.bpf.c", "syscalls.skel.rs"),
];

fn main() {
    println!("cargo:rustc-check-cfg=cfg(iolearn_bpf)");
    for (src, _) in SOURCES {
        println!("cargo:rerun-if-changed={src}");
    }
    println!("cargo:rerun-if-changed=src/bpf/events.h");
    println!("cargo:rerun-if-changed=src/bpf/syscalls.h");
    println!("cargo:rerun-if-changed=src/bpf/vmlinux_min.h");
    println!("cargo:rerun-if-env-changed=IOLEARN_NO_BPF");
    if std::env::var_os("IOLEARN_NO_BPF").is_some_and(|v| v == "1") {
        return;
    }
    if Command::new("clang").arg("--version").output().is_err() {
        println!("cargo:warning=clang not found: iolearn-probe is built without its eBPF programs");
        return;
    }
    for (src, skel) in SOURCES {
        let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join(skel);
        SkeletonBuilder::new()
            .source(src)
            .clang_args(["-I", "src/bpf", "-Wall", "-Wno-unused-function"])
            .build_and_generate(&out)
            .unwrap_or_else(|e| panic!("compiling {src}: {e}"));
    }
    println!("cargo:rustc-cfg=iolearn_bpf");
}
