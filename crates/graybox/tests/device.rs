//! The prober's real path: files and block devices through io_uring with O_DIRECT. What may
//! be probed (never through a link, never a device in use) and that its I/Os land where asked.
//! The loop-device test needs root; elsewhere it prints why it skips.

use iolearn_graybox::{probe, DeviceTarget, Io, Options, Target};
use iolearn_tune::testbed::{skip_without_loop, LoopDev, LoopFs};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

fn scratch(name: &str, bytes: u64) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_file(&p);
    std::fs::File::create(&p).unwrap().set_len(bytes).unwrap();
    p
}

/// Small enough to finish in seconds on a file or a loop device.
fn quick() -> Options {
    Options {
        max_writes: 20_000,
        max_distance: 64,
        pair_repeats: 2,
        gc: false,
        settle_ns: 10_000_000,
        ..Options::default()
    }
}

#[test]
fn a_file_is_written_and_read_in_place_and_bad_ios_are_refused_by_name() {
    let path = scratch("graybox-file.img", 64 << 20);
    let mut t = DeviceTarget::open(&path).expect("a file on ext4 takes O_DIRECT");
    assert_eq!(t.size_bytes(), 64 << 20);
    let mut lat = Vec::new();
    t.run(
        &[
            Io {
                offset: 1 << 20,
                len: 8192,
                write: true,
            },
            Io {
                offset: 0,
                len: 4096,
                write: false,
            },
        ],
        &mut lat,
    )
    .expect("a write and a read");
    assert_eq!(lat.len(), 2);
    assert!(lat.iter().all(|&l| l > 0), "{lat:?}");
    // The write reached the file at its offset (the probes write data that is not zeros).
    let f = std::fs::File::open(&path).unwrap();
    let mut buf = vec![0u8; 8192];
    f.read_exact_at(&mut buf, 1 << 20).unwrap();
    assert!(buf.iter().filter(|&&b| b != 0).count() > 4096, "the written block");
    f.read_exact_at(&mut buf, 2 << 20).unwrap();
    assert!(buf.iter().all(|&b| b == 0), "nothing written elsewhere");
    for bad in [
        Io {
            offset: 100,
            len: 4096,
            write: false,
        },
        Io {
            offset: 0,
            len: 100,
            write: true,
        },
        Io {
            offset: (64 << 20) - 4096,
            len: 8192,
            write: false,
        },
    ] {
        let e = t.run(&[bad], &mut lat).expect_err("refused");
        assert!(e.0.contains("graybox-file.img"), "{e}");
    }
}

#[test]
fn links_directories_missing_and_small_targets_are_refused_by_name() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let file = scratch("graybox-target.img", 64 << 20);
    let link = dir.join("graybox-link.img");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let err = |p: &PathBuf| DeviceTarget::open(p).err().expect("refused").0;
    assert!(err(&link).contains("symbolic link"), "{}", err(&link));
    assert!(
        err(&dir).contains("not a block device or a regular file"),
        "{}",
        err(&dir)
    );
    let missing = dir.join("graybox-missing.img");
    assert!(err(&missing).contains("graybox-missing.img"), "{}", err(&missing));
    let small = scratch("graybox-small.img", 1 << 20);
    let mut t = DeviceTarget::open(&small).unwrap();
    let e = probe(&mut t, &quick(), &mut |_| {}).expect_err("too small");
    assert!(
        e.0.contains("graybox-small.img") && e.0.contains("needs at least"),
        "{e}"
    );
    let mut t = DeviceTarget::open(&file).unwrap();
    let e = probe(
        &mut t,
        &Options {
            queue_depth: 0,
            ..quick()
        },
        &mut |_| {},
    )
    .expect_err("bad option");
    assert!(e.0.starts_with("queue_depth"), "{e}");
}

#[test]
fn a_loop_device_is_probed_and_a_mounted_one_is_refused() {
    let test = "a_loop_device_is_probed_and_a_mounted_one_is_refused";
    if skip_without_loop("iolearn-graybox", test) {
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let lo = LoopDev::create(&dir, "graybox-loop", 256).expect("a loop device");
    let mut t = DeviceTarget::open(&lo.device).expect("an unused loop device opens");
    assert_eq!(t.block_bytes(), 512, "the loop device's logical block size, from sysfs");
    let r = probe(&mut t, &quick(), &mut |_| {}).expect("the probes run");
    assert!(r.read_ns.value.is_some_and(|ns| ns > 0), "{r:?}");
    assert!(r.written_bytes > 0 && r.ios > 20_000, "{r:?}");
    drop(t);
    let fs = LoopFs::create(&dir, "graybox-mounted", 64).expect("a mounted loop device");
    let e = DeviceTarget::open(&PathBuf::from(format!("/dev/{}", fs.device)))
        .err()
        .expect("a mounted device is refused");
    assert!(e.0.contains("in use"), "{e}");
}
