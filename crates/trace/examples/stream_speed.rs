//! Time reading a trace record by record (`stream_speed FILE`): records per second.
use std::time::Instant;
fn main() {
    let path = std::env::args().nth(1).expect("usage: stream_speed FILE");
    let t = Instant::now();
    let mut n = 0u64;
    let mut sum = 0u64;
    for io in iolearn_trace::stream::Stream::open(path.as_ref(), None, Default::default()).expect("open") {
        let io = io.expect("record");
        n += 1;
        sum = sum.wrapping_add(io.offset);
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "{n} records in {s:.3} s: {:.0} ns each (checksum {sum})",
        s * 1e9 / n as f64
    );
    let t = Instant::now();
    let whole = iolearn_trace::read_file(path.as_ref(), None, Default::default()).expect("read");
    let s = t.elapsed().as_secs_f64();
    println!(
        "whole: {} records in {s:.3} s: {:.0} ns each",
        whole.ios.len(),
        s * 1e9 / whole.ios.len() as f64
    );
}
