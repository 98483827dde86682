//! Lines per second of the streamed readers: `stream_rate TRACE [PASSES]` reads the trace
//! PASSES times (default 100) and prints ns per record.
use iolearn_trace::stream::Stream;
use iolearn_trace::ReadOptions;
use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1).map(PathBuf::from) else {
        eprintln!("usage: stream_rate TRACE [PASSES]");
        std::process::exit(2);
    };
    let passes: usize = args.get(2).and_then(|p| p.parse().ok()).unwrap_or(100);
    let (mut n, mut sum) = (0u64, 0u64);
    let t = Instant::now();
    for _ in 0..passes {
        let s = Stream::open(&path, None, ReadOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        for io in s {
            let io = io.unwrap_or_else(|e| panic!("{e}"));
            sum = sum.wrapping_add(io.arrival_ns ^ io.offset ^ io.size as u64);
            n += 1;
        }
    }
    let ns = t.elapsed().as_nanos() as f64 / n as f64;
    println!("{ns:.1} ns/record, {n} records, checksum {sum}");
}
