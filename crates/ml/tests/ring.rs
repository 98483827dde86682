//! The SPSC ring and the asynchronous trainer.

use iolearn_ml::ring::ring;
use iolearn_ml::trainer::{AsyncTrainer, Sample, TrainerConfig};
use iolearn_ml::{datasets, Activation, Loss, MlpBuilder};

#[test]
fn full_ring_drops_and_counts() {
    let (mut tx, mut rx) = ring::<u64>(4);
    for i in 0..10 {
        tx.push(i);
    }
    let s = tx.stats();
    assert_eq!((s.pushed, s.dropped, s.capacity), (4, 6, 4));
    assert_eq!((0..4).map(|_| rx.pop().unwrap()).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    assert_eq!(rx.pop(), None);
    assert!(tx.push(99));
    assert_eq!(rx.pop(), Some(99));
}

#[test]
fn values_cross_threads_in_order_and_none_is_lost_or_duplicated() {
    let (mut tx, mut rx) = ring::<u64>(64);
    let n = 200_000u64;
    let producer = std::thread::spawn(move || {
        let mut accepted = Vec::new();
        for i in 0..n {
            if tx.push(i) {
                accepted.push(i);
            }
        }
        accepted
    });
    let mut got = Vec::new();
    loop {
        match rx.pop() {
            Some(v) => got.push(v),
            None if rx.is_closed() && rx.is_empty() => break,
            None => std::hint::spin_loop(),
        }
    }
    let accepted = producer.join().unwrap();
    assert_eq!(got, accepted);
    let s = rx.stats();
    assert_eq!(s.pushed + s.dropped, n);
}

#[test]
fn dropping_a_ring_with_items_frees_them() {
    let (mut tx, rx) = ring::<String>(8);
    tx.push("a".repeat(100));
    tx.push("b".repeat(100));
    drop(rx);
    drop(tx); // Miri/valgrind would flag a leak or double free here.
}

#[test]
fn async_trainer_learns_from_pushed_samples() {
    let (x, y) = datasets::kml_like(400, 9);
    let net = MlpBuilder::new(5)
        .hidden(15, Activation::Sigmoid)
        .hidden(5, Activation::Sigmoid)
        .output(4)
        .seed(1)
        .build();
    let cfg = TrainerConfig {
        ring_capacity: 1 << 16,
        batch_size: 4,
        ..Default::default()
    };
    let (mut tx, handle) = AsyncTrainer::spawn::<5>(net, Loss::softmax_cross_entropy(), cfg);
    for _ in 0..10 {
        for (r, &c) in x.chunks(5).zip(&y) {
            let mut s = Sample { x: [0.0; 5], y: c };
            s.x.copy_from_slice(r);
            while !tx.push(s) {
                std::thread::yield_now(); // the test wants every sample; a probe would drop
            }
        }
    }
    drop(tx);
    let (net, stats) = handle.join();
    assert_eq!(stats.trained, 16_000 - stats.dropped);
    assert!(stats.steps >= stats.trained / 4);
    // Evaluate with the trainer's final online normaliser snapshot.
    let norm = iolearn_ml::ZScore::fit(&x, 5).unwrap();
    let mut ws = net.workspace();
    let correct = x
        .chunks(5)
        .zip(&y)
        .filter(|(r, &c)| {
            let mut r = r.to_vec();
            norm.transform(&mut r);
            net.predict_class(&r, &mut ws) == c as usize
        })
        .count();
    let acc = correct as f64 / y.len() as f64;
    assert!(acc > 0.9, "online-trained accuracy {acc}");
}
