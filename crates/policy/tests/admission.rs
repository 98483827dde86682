//! Admission policies (issue 6): heuristics, MittSSD's white-box prediction, learned models
//! loaded from model files (and the errors a bad file gets).

use iolearn_ml::{Activation, DecisionTree, MlpBuilder, ModelFile, ModelKind, Rng, TreeConfig};
use iolearn_policy::admission::{
    Admission, FeatureSet, HeurAdv, IoView, Learned, MittNoop, MittSsd, QueueLimit, Rule, Started, WhiteBox,
    TAIL_BOOKS_FEATURES, TAIL_FEATURES,
};
use iolearn_policy::latency::LatencyHistory;
use iolearn_policy::mittsched::SeekProfile;

fn view(h: &LatencyHistory, pending_pages: u32) -> IoView<'_> {
    IoView {
        now_ns: 1_000_000,
        size: 8192,
        offset: 0,
        pending: pending_pages / 2,
        pending_pages,
        history: h,
        oldest_inflight_ns: 750_000,
        since_completion_ns: 20_000,
        white_box: None,
        true_latency_ns: None,
        cached: false,
        replica: 0,
        planes: None,
        books_ns: None,
        deadline_ns: None,
    }
}

#[test]
fn tail_features_extend_mittos_with_queue_age_and_size() {
    let mut h = LatencyHistory::default();
    h.complete(142, 1);
    h.complete(90, 4);
    let v = view(&h, 3);
    let mut f = [0f32; 13];
    v.tail_features(&mut f);
    assert_eq!(TAIL_FEATURES.len(), 13);
    // pending pages, ios, size pages, oldest us, since us, then (lat, pend) newest first.
    assert_eq!(&f[..9], &[3.0, 1.0, 2.0, 750.0, 20.0, 90.0, 4.0, 142.0, 1.0]);
    assert_eq!(&f[9..], &[0.0; 4]);
    // iolearn-tail-books-v1: the same, then the books' prediction in us (NaN when no books
    // are kept: the tree sends it right, and a caller can see it was missing).
    let set = FeatureSet::from_schema("iolearn-tail-books-v1").unwrap();
    assert_eq!((set.dim(), TAIL_BOOKS_FEATURES[13]), (14, "books_us"));
    assert_eq!(&TAIL_BOOKS_FEATURES[..13], &TAIL_FEATURES);
    let mut g = vec![0f32; 14];
    set.extract(
        &IoView {
            books_ns: Some(1_250_000),
            ..v
        },
        &mut g,
    );
    assert_eq!((&g[..13], g[13]), (&f[..], 1250.0));
    set.extract(&v, &mut g);
    assert!(g[13].is_nan());
}

#[test]
fn heuristics_follow_the_queue_and_the_recent_past() {
    let quiet = LatencyHistory::default();
    let mut q = QueueLimit { max_pages: 8 };
    assert!(q.admit(&view(&quiet, 8)));
    assert!(!q.admit(&view(&quiet, 9)));
    // HeurAdv: a slow completion that arrived to a short queue marks the device internally
    // busy: then only short queues are served.
    let mut adv = HeurAdv {
        max_pages: 8,
        short_pages: 2,
        slow_us: 500,
    };
    assert!(adv.admit(&view(&quiet, 6)));
    let mut busy = LatencyHistory::default();
    busy.complete(3000, 1);
    assert!(!adv.admit(&view(&busy, 6)));
    assert!(adv.admit(&view(&busy, 2)));
    // Slow with a long queue explains itself: not "internally busy".
    let mut queued = LatencyHistory::default();
    queued.complete(3000, 20);
    assert!(adv.admit(&view(&queued, 6)));
}

#[test]
fn mittssd_adds_chip_wait_read_and_transfer() {
    let m = MittSsd {
        deadline_ns: 300_000,
        read_ns: 60_000,
        transfer_ns: 20_000,
        controller_ns: 3_000,
    };
    let w = |plane, channel| WhiteBox {
        plane_wait_ns: plane,
        channel_wait_ns: channel,
        gc_active: false,
    };
    assert_eq!(m.predict_ns(&w(0, 0)), 83_000);
    assert_eq!(m.predict_ns(&w(100_000, 0)), 180_000);
    // The channel is busier than the chip: the transfer waits for it.
    assert_eq!(m.predict_ns(&w(0, 200_000)), 220_000);
    let h = LatencyHistory::default();
    let mut policy = m.clone();
    let mut v = view(&h, 1);
    v.white_box = Some(w(250_000, 0));
    assert!(!policy.admit(&v));
    v.white_box = Some(w(200_000, 0));
    assert!(policy.admit(&v));
}

/// A 4 KiB I/O entering `replica`'s queue.
fn started(replica: usize, id: u64, now_ns: u64, offset: u64, write: bool, planes: &[u32]) -> Started<'_> {
    Started {
        replica,
        id,
        now_ns,
        offset,
        len: 4096,
        write,
        planes,
    }
}

#[test]
fn mittnoop_keeps_the_next_free_time_and_corrects_its_drift() {
    // Its profile: 3 ms for 4 KiB anywhere, 1 ms more per further 4 KiB.
    let profile = SeekProfile::flat(3_000_000, 250_000.0);
    let mut m = MittNoop::new(10_000_000, profile);
    let h = LatencyHistory::default();
    let mut v = view(&h, 1); // an 8 KiB read: 4 ms by the profile
    v.now_ns = 1_000_000;
    assert_eq!(m.service_ns(0, v.offset, v.size as u64), 4_000_000);
    // Idle disk: 4 ms of service.
    assert!(m.admit(&v));
    // Two 4 KiB I/Os (3 ms each) enter the queue at 1 ms: next free at 7 ms; the read waits 6.
    m.started(&started(0, 1, 1_000_000, 1 << 30, false, &[]));
    m.started(&started(0, 2, 1_000_000, 2 << 30, false, &[]));
    assert_eq!(m.wait_ns(0, 1_000_000), 6_000_000);
    assert!(m.admit(&v)); // 6 + 4 = 10 ms: just in time
                          // The first took 1 ms longer than predicted: everything behind it shifts.
    m.finished(0, 1, 5_000_000);
    assert_eq!(m.wait_ns(0, 1_000_000), 7_000_000);
    assert!(!m.admit(&v));
    // Other replicas have their own queue.
    v.replica = 1;
    assert!(m.admit(&v));
    // The second finished early: the queue is empty again at 6 ms.
    m.finished(0, 2, 6_000_000);
    assert_eq!(m.wait_ns(0, 6_000_000), 0);
}

fn linnos_file(quantize: bool) -> ModelFile {
    let net = MlpBuilder::new(31)
        .hidden(256, Activation::ReLU)
        .output(2)
        .seed(5)
        .build();
    let mut f = ModelFile::new(ModelKind::Mlp(net), "linnos-31");
    f.meta = vec![("rule".into(), "class".into())];
    if quantize {
        f.meta.push(("quantize".into(), "x1000".into()));
    }
    f
}

#[test]
fn linnos_integer_inference_decides_like_the_float_network() {
    let mut exact = Learned::from_file(&linnos_file(false), "f32").unwrap();
    let mut x1000 = Learned::from_file(&linnos_file(true), "x1000").unwrap();
    assert_eq!(x1000.features(), FeatureSet::Linnos);
    let mut rng = Rng::new(2);
    let (mut same, n) = (0, 2000);
    for _ in 0..n {
        let mut h = LatencyHistory::default();
        for _ in 0..4 {
            h.complete(rng.below(5000) as u32, rng.below(64) as u32);
        }
        let v = view(&h, rng.below(200) as u32);
        same += (exact.admit(&v) == x1000.admit(&v)) as usize;
        // Margins agree to the quantisation step.
        let (a, b) = (exact.score(&v), x1000.score(&v));
        // Weights rounded to 1/1000 and sums truncated per layer: a few percent on margins.
        assert!((a - b).abs() < 0.05 * (1.0 + a.abs()), "{a} vs {b}");
    }
    assert!(same as f64 >= 0.99 * n as f64, "{same} of {n} decisions agree");
}

#[test]
fn a_regressor_refuses_above_its_threshold_and_a_tree_by_probability() {
    // A tree on the tail features that calls a read slow when the oldest I/O in flight is old.
    let mut rng = Rng::new(9);
    let x: Vec<f32> = (0..13 * 2000).map(|_| rng.below(2000) as f32).collect();
    let y: Vec<f32> = x.chunks(13).map(|r| (r[3] > 1000.0) as u8 as f32).collect();
    let tree = DecisionTree::fit(&x, &y, 13, &TreeConfig::default()).unwrap();
    let mut f = ModelFile::new(ModelKind::Tree(tree), "iolearn-tail-v1");
    f.meta = vec![("rule".into(), "proba=0.5".into())];
    let mut l = Learned::from_file(&f, "tree").unwrap();
    let h = LatencyHistory::default();
    let mut v = view(&h, 1);
    v.oldest_inflight_ns = 1_500_000;
    assert!(!l.admit(&v));
    v.oldest_inflight_ns = 200_000;
    assert!(l.admit(&v));
    // A rule override that does not fit the model is refused.
    assert!(l.set_rule(Rule::AboveUs(100.0)).is_err());
    assert!(l.set_rule(Rule::Proba(0.9)).is_ok());
}

#[test]
fn bad_model_files_get_errors_naming_the_field() {
    let case = |f: ModelFile, says: &str| {
        let e = Learned::from_file(&f, "m").err().expect("an error").to_string();
        assert!(e.contains(says), "{e} (wanted {says:?})");
    };
    let mut f = linnos_file(false);
    f.schema = "kml-readahead-v1".into();
    case(f, "schema");
    let mut f = linnos_file(false);
    f.schema = "mittos-9".into();
    case(f, "inputs");
    let mut f = linnos_file(false);
    f.meta = vec![("rule".into(), "above_us=300".into())];
    case(f, "rule");
    let mut f = linnos_file(false);
    f.meta = vec![("rule".into(), "whenever".into())];
    case(f, "rule");
    let mut f = linnos_file(false);
    f.meta.push(("quantize".into(), "int4".into()));
    case(f, "quantize");
    let reg = MlpBuilder::new(9).hidden(8, Activation::ReLU).output(1).seed(1).build();
    let mut f = ModelFile::new(ModelKind::Mlp(reg), "mittos-9");
    f.meta = vec![
        ("rule".into(), "above_us=300".into()),
        ("output_scale".into(), "-2".into()),
    ];
    case(f, "output_scale");
    assert_eq!(Rule::parse("above_us=250"), Some(Rule::AboveUs(250.0)));
    assert_eq!(Rule::parse("proba=nan"), None);
    assert_eq!(Rule::parse("class"), Some(Rule::Class));
}

#[test]
fn the_model_files_schema_widths_match_the_feature_extractors() {
    // `iolearn-ml` refuses models whose width does not fit a known schema; the widths it
    // knows must be those of the extractors here.
    use iolearn_ml::format::SCHEMA_WIDTHS;
    for f in [FeatureSet::Linnos, FeatureSet::Mittos, FeatureSet::Tail] {
        assert!(SCHEMA_WIDTHS.contains(&(f.schema(), f.dim())), "{}", f.schema());
    }
    assert!(SCHEMA_WIDTHS.contains(&(iolearn_ml::kml::READAHEAD_SCHEMA, 5)));
    // v2 reads the first seven of a stream's features; v3 the scale-free inputs.
    let stream = iolearn_policy::readahead::WindowStats::default().features_v2(0);
    assert_eq!(stream.len(), iolearn_ml::kml::READAHEAD_FEATURES_V2.len() + 2);
    assert!(SCHEMA_WIDTHS.contains(&(iolearn_ml::kml::READAHEAD_SCHEMA_V2, 7)));
    let inputs = iolearn_policy::readahead::scale_free(&stream, &Default::default());
    // v3 reads those its file names, of the scale-free inputs (all when it names none).
    assert_eq!(inputs.len(), iolearn_ml::kml::READAHEAD_FEATURES_V3.len());
}
