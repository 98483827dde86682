//! Dump the scheduler events of devices for a while (CSV on stdout): `sched_dump SECONDS DEV...`.
use iolearn_probe::sched::SchedWatch;
use iolearn_probe::DeviceId;
use std::io::Write;
use std::sync::{Arc, Mutex};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let secs: f64 = args[1].parse().expect("seconds");
    let devs: Vec<DeviceId> = args[2..]
        .iter()
        .map(|d| DeviceId::from_name(d).expect("device"))
        .collect();
    let out = Arc::new(Mutex::new(Vec::new()));
    let sink = out.clone();
    let w = SchedWatch::start(&devs, move |e| sink.lock().unwrap().push(*e)).expect("watch");
    std::thread::sleep(std::time::Duration::from_secs_f64(secs));
    let lost = w.stop().expect("the watch");
    let mut o = std::io::stdout().lock();
    writeln!(o, "ts_ns,rq,device,kind,offset,len,tid,class,level").unwrap();
    for e in out.lock().unwrap().iter() {
        writeln!(
            o,
            "{},{},{},{},{},{},{},{},{}",
            e.ts_ns, e.rq, e.device, e.kind as u8, e.offset, e.len, e.tid, e.class, e.level
        )
        .unwrap();
    }
    eprintln!("lost {lost}");
}
