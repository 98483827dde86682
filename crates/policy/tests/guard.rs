//! The guardrail on a synthetic device whose progress is a known function of readahead.

use iolearn_policy::controller::{PerProcess, ReadaheadController, ReadaheadKnobs, Static, Vanilla};
use iolearn_policy::guard::{Arm, GuardConfig, GuardEvent, GuardEventKind, Guarded};
use iolearn_policy::online::{Online, OnlineConfig};
use iolearn_policy::readahead::{Outcome, WindowFeatures};
use iolearn_policy::steady::Steady;

/// A device: progress per window is `f(read_ahead_kb)`.
struct Device {
    kb: u64,
    sets: u64,
}

impl ReadaheadKnobs for Device {
    fn device_read_ahead_kb(&self) -> u64 {
        self.kb
    }
    fn set_device_read_ahead_kb(&mut self, kb: u64) {
        self.kb = kb;
        self.sets += 1;
    }
    fn file_read_ahead_kb(&self, _: u64) -> u64 {
        self.kb
    }
    fn set_file_read_ahead_kb(&mut self, _: u64, _: u64) {}
}

/// Run `ctl` for `windows` on a device whose progress is `f(kb)`; returns the device's value
/// in each window.
fn run(ctl: &mut Guarded, dev: &mut Device, windows: usize, f: impl Fn(u64) -> f64) -> Vec<u64> {
    let mut seen = Vec::new();
    for _ in 0..windows {
        seen.push(dev.kb);
        let w = WindowFeatures {
            outcome: Outcome {
                seconds: 1.0,
                ops: Some(f(dev.kb)),
                read_ahead_kb: Some(dev.kb),
                pages_accessed: 100,
                pages_added: dev.kb,
                ..Outcome::default()
            },
            ..WindowFeatures::default()
        };
        ctl.decide(&w, dev);
    }
    seen
}

fn guarded(inner: impl ReadaheadController + Send + 'static) -> Guarded {
    Guarded::new(Box::new(inner), Steady::new(1, 0), Some(GuardConfig::default()), 128)
}

/// Mean progress over the windows.
fn mean(seen: &[u64], f: impl Fn(u64) -> f64) -> f64 {
    seen.iter().map(|&kb| f(kb)).sum::<f64>() / seen.len() as f64
}

#[test]
fn a_worse_setting_is_reverted_and_the_reason_logged() {
    // 1024 KiB is 10% worse than vanilla: not below the abort bar, but below every vanilla
    // window by more than they spread (none) and the tolerance, counted by the application.
    // A raise pays only after a second or two: two settled windows tell it.
    let f = |kb: u64| if kb == 1024 { 90.0 } else { 100.0 };
    let mut g = guarded(Static::new(1024));
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run(&mut g, &mut dev, 300, f);
    let ev = g.take_events();
    let first = ev.first().expect("a verdict");
    assert_eq!(first.kind, GuardEventKind::Reverted, "{ev:?}");
    // A loss of progress, logged as one (the value read four times vanilla's pages per page
    // used too: waste is judged only where progress passes).
    assert!(
        first.reason.starts_with("below every vanilla window"),
        "{}",
        first.reason
    );
    assert!(
        first.reason.contains("-10.0%") && first.reason.contains("pages read per page used"),
        "{}",
        first.reason
    );
    // Vanilla first (1 + 3 windows), then 1024 for settle + two windows, then back.
    assert_eq!(seen[..4], [128; 4]);
    assert_eq!(seen[4..7], [1024; 3]);
    assert_eq!(seen[7], 128, "{seen:?}");
    // Retried after doubling backoffs only: never worse than 0.98 of vanilla over the run.
    assert!(mean(&seen, f) >= 0.98 * 100.0, "{}", mean(&seen, f));
    assert!(ev.iter().all(|e| e.kind == GuardEventKind::Reverted));
}

#[test]
fn a_loss_within_the_spread_of_vanilla_s_windows_is_judged_on_a_whole_block() {
    // Vanilla's windows spread by 10% about no line (95, 105, 98 on the block): a value 8%
    // worse stays below none of them by more than twice that spread, and is judged on a block
    // of three, its first window (87.4) alone not being a loss told from noise.
    let mut g = guarded(Static::new(64));
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run_by_window(&mut g, &mut dev, 30, |kb, i| {
        let wobble = [100.0, 95.0, 105.0, 98.0][i % 4];
        if kb == 64 {
            wobble * 0.92
        } else {
            wobble
        }
    });
    assert_eq!(seen[4..8], [64; 4], "{seen:?}");
    assert_eq!(seen[8], 128, "{seen:?}");
    assert_eq!(g.take_events()[0].kind, GuardEventKind::Reverted);
}

/// Run `ctl` for `windows` on a device whose progress in window `i` is `f(kb, i)`, counted by
/// the kernel in pages read (`--progress auto`: resolution one page); returns the device's
/// value in each window.
fn run_by_window(ctl: &mut Guarded, dev: &mut Device, windows: usize, f: impl Fn(u64, usize) -> f64) -> Vec<u64> {
    run_outcomes_by_window(ctl, dev, windows, |kb, i| pages_read(f(kb, i), 1.0))
}

/// 64 KiB asked for over 15 windows of a workload whose progress under vanilla in window `i`
/// is `start + per_window * i` pages, and `share` of that at 64 KiB; the device's value in each
/// window and the guardrail's verdicts.
fn sixty_four_on_a_line(start: f64, per_window: f64, share: f64) -> (Vec<u64>, Vec<GuardEvent>) {
    let mut g = guarded(Static::new(64));
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run_by_window(&mut g, &mut dev, 15, |kb, i| {
        let v = start + per_window * i as f64;
        if kb == 64 {
            v * share
        } else {
            v
        }
    });
    (seen, g.take_events())
}

#[test]
fn a_loss_hidden_by_a_rising_workload_is_caught_after_one_window_and_vanilla_again() {
    // fio's half-sequential half-random job on a throttled device in memory (2026-11-27):
    // vanilla's throughput rises about 1% a window as the cache fills, and 64 KiB is 7% below
    // vanilla at the same time. Against the first vanilla block, 64 KiB showed -3%, and a
    // whole block of it left the cache behind for the rest of the run (0.97x vanilla). One
    // settled window below every vanilla window sends the guardrail back to vanilla at once;
    // the window is below vanilla's next block too, and the value is reverted (A-B-A).
    // 64 KiB lowers readahead: its first window is judged (a lowering has no start-up cost).
    let (seen, ev) = sixty_four_on_a_line(14_000.0, 154.0, 0.93);
    assert_eq!(seen[4], 64, "{seen:?}");
    assert_eq!(seen[5..], [128; 10], "{seen:?}");
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0].kind, GuardEventKind::Reverted);
    assert!(
        ev[0].reason.starts_with("below every vanilla window"),
        "{}",
        ev[0].reason
    );

    // Rising faster (1.8% a window) with a smaller loss (5%): the value's first window is
    // above vanilla's lowest, and its block would pass (+1.7% against the block before), but
    // it is below vanilla's line carried forward; vanilla measured again confirms it.
    // The same value where vanilla is flat is a plain 5% loss, below vanilla's windows.
    for per_window in [60.0, 0.0] {
        let (seen, ev) = sixty_four_on_a_line(3_300.0, per_window, 0.95);
        assert_eq!(seen[4], 64, "{per_window}: {seen:?}");
        assert_eq!(seen[5..], [128; 10], "{per_window}: {seen:?}");
        assert_eq!(ev[0].kind, GuardEventKind::Reverted);
    }

    // A workload that slows on its own (1.5% a window) is no loss of a value that does as
    // well as vanilla would: vanilla's falling line is carried forward, and the value is
    // judged on a whole block.
    let falling = |_: u64, i: usize| 14_000.0 * (1.0 - 0.015 * i as f64);
    let mut g = guarded(Static::new(64));
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run_by_window(&mut g, &mut dev, 8, falling);
    assert_eq!(seen[4..8], [64; 4], "{seen:?}");
}

#[test]
fn a_window_short_by_clock_tick_noise_is_judged_on_a_whole_block() {
    // A light reader: ten ticks of its own code a window under vanilla, eight at 16 KiB (one
    // process, counted in ticks). Two ticks short is within chance (three times the square
    // root of ten): the value is judged on a block, not on its first window.
    let mut g = guarded(Static::new(16));
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run_processes(&mut g, &mut dev, 12, |kb| vec![if kb == 16 { 0.08 } else { 0.10 }]);
    assert_eq!(seen[4..8], [16; 4], "{seen:?}");
    assert_eq!(seen[8], 128, "{seen:?}");
}

#[test]
fn a_first_window_that_vanilla_measured_again_does_not_confirm_is_looked_at_once() {
    // A workload that slows 1.5% a window, and a value 4% below vanilla at the same time:
    // its first window is below vanilla's falling line, vanilla measured again (lower still)
    // does not confirm it, and the decision is then judged on a block of its own, not sent
    // back to vanilla every other window for ever.
    let falling = |kb: u64, i: usize| {
        let v = 14_000.0 * (1.0 - 0.015 * i as f64);
        if kb == 64 {
            v * 0.96
        } else {
            v
        }
    };
    let mut g = guarded(Static::new(64));
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run_by_window(&mut g, &mut dev, 30, falling);
    let ev = g.take_events();
    let resumed = ev.iter().filter(|e| e.reason.starts_with("windows below")).count();
    assert!(resumed <= 1, "{resumed} looks: {ev:?} {seen:?}");
    assert!(
        ev.iter().any(|e| !e.reason.starts_with("windows below")),
        "never judged on a block: {ev:?} {seen:?}"
    );
}

#[test]
fn a_collapse_is_reverted_after_one_settled_window() {
    // The window 512 KiB settles in is not judged (a raise of readahead costs the kernel about
    // a second first); the first settled one is, alone, not a block.
    let f = |kb: u64| if kb == 512 { 5.0 } else { 100.0 };
    let mut g = guarded(Static::new(512));
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run(&mut g, &mut dev, 40, f);
    assert_eq!(seen[4..6], [512; 2]);
    assert_eq!(seen[6], 128, "one settled window of 512, not a block: {seen:?}");
    assert_eq!(g.arm(), Arm::Vanilla);
}

#[test]
fn a_lowering_is_judged_from_its_first_window_and_a_raise_after_it_settles() {
    // KML's per-file model on db_bench's range scans (2026-11-27): 16 KiB for the database's
    // files lost a third of the operations from its first window, and counted as settling that
    // window bought the value a second one in force before the guardrail looked. A lower
    // value costs nothing to start, so its first window is judged; a raise pays a second or
    // two first, so its first is not (both lose a fifth here, beyond noise: reverted at once).
    let f = |kb: u64| if kb == 128 { 450.0 } else { 360.0 };
    for (kb, in_force) in [(16, 1), (64, 1), (512, 3)] {
        let mut g = guarded(Static::new(kb));
        let mut dev = Device { kb: 128, sets: 0 };
        let seen = run(&mut g, &mut dev, 14, f);
        assert_eq!(seen[..4], [128; 4], "{kb}: {seen:?}");
        let windows = seen.iter().filter(|&&v| v == kb).count();
        assert_eq!(windows, in_force, "{kb} KiB: {seen:?}");
        assert_eq!(seen[4..4 + in_force], vec![kb; in_force][..], "{kb}: {seen:?}");
        let ev = g.take_events();
        assert!(ev.iter().any(|e| e.kind == GuardEventKind::Reverted), "{kb}: {ev:?}");
    }
}

#[test]
fn a_better_setting_stays_and_vanilla_is_measured_less_and_less() {
    let f = |kb: u64| if kb == 512 { 150.0 } else { 100.0 };
    let mut g = guarded(Static::new(512));
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run(&mut g, &mut dev, 600, f);
    let ev = g.take_events();
    assert!(ev.iter().all(|e| e.kind == GuardEventKind::Kept), "{ev:?}");
    let vanilla_late = seen[300..].iter().filter(|&&kb| kb == 128).count();
    assert!(vanilla_late <= 12, "{vanilla_late} vanilla windows in the last 300");
    assert!(mean(&seen, f) >= 140.0, "{}", mean(&seen, f));
}

#[test]
fn a_setting_that_turns_bad_is_caught_at_the_next_check() {
    // 512 is better for 200 windows, then the workload changes and it is 20% worse.
    let mut g = guarded(Static::new(512));
    let mut dev = Device { kb: 128, sets: 0 };
    run(&mut g, &mut dev, 200, |kb| if kb == 512 { 150.0 } else { 100.0 });
    let after = run(&mut g, &mut dev, 200, |kb| if kb == 512 { 80.0 } else { 100.0 });
    let bad = after.iter().take_while(|&&kb| kb == 512).count();
    assert!(bad <= 130, "{bad} windows at the bad value");
    assert_eq!(*after.last().unwrap(), 128);
    assert!(g.take_events().iter().any(|e| e.kind == GuardEventKind::Reverted));
}

/// Windows on vanilla after the guardrail's first block, in `seen` (the device's value in
/// each window): where they start, and how many.
fn checks_of_vanilla(seen: &[u64]) -> (Option<usize>, usize) {
    let later = seen
        .iter()
        .enumerate()
        .skip(8)
        .filter(|&(_, &kb)| kb == 128)
        .map(|(i, _)| i);
    (later.clone().next(), later.count())
}

#[test]
fn a_decision_kept_by_a_wide_margin_is_checked_less_often() {
    // 512 KiB at 1.5x vanilla, counted by the application: every vanilla window far below every
    // one of 512's. The first check of vanilla waits 64 windows (four times the first interval;
    // at about 69) and the next the longest interval (about 201): one check in 200 windows
    // where doubling from 16 made three (at about 21, 57 and 125), each settle + block windows
    // of vanilla.
    let mut g = guarded(Static::new(512));
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run(&mut g, &mut dev, 200, |kb| if kb == 512 { 150.0 } else { 100.0 });
    let (first, windows) = checks_of_vanilla(&seen);
    assert!(first.is_some_and(|i| (60..=75).contains(&i)), "{seen:?}");
    assert_eq!(windows, 4, "{seen:?}");
    assert!(g.take_events().iter().all(|e| e.kind == GuardEventKind::Kept));
    // 4% better, vanilla's windows and 512's alike spreading by 6%: kept, but vanilla is
    // within the spread of 512's windows and checked again at the first interval.
    let wobble = |i: usize| [1.0, 0.97, 1.03, 0.99][i % 4];
    let mut g = guarded(Static::new(512));
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run_by_window(&mut g, &mut dev, 200, |kb, i| {
        wobble(i) * if kb == 512 { 5_200.0 } else { 5_000.0 }
    });
    let (first, windows) = checks_of_vanilla(&seen);
    assert!(first.is_some_and(|i| i <= 25), "{seen:?}");
    assert!(windows >= 12, "{seen:?}");
    assert!(g.take_events().iter().all(|e| e.kind == GuardEventKind::Kept));
}

#[test]
fn a_controller_that_keeps_vanilla_costs_nothing() {
    let mut g = guarded(Vanilla);
    let mut dev = Device { kb: 128, sets: 0 };
    run(&mut g, &mut dev, 300, |_| 100.0);
    assert_eq!(dev.sets, 0);
    assert!(g.take_events().is_empty());
}

#[test]
fn requests_below_the_floor_get_the_floor() {
    let mut g = guarded(Static::new(4));
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run(&mut g, &mut dev, 20, |_| 100.0);
    assert!(seen.iter().all(|&kb| kb == 128 || kb == 16), "{seen:?}");
    assert!(seen.contains(&16));
}

#[test]
fn without_a_signal_the_device_stays_on_vanilla() {
    // The workload runs (it touches pages) and its progress is never measured: nothing can be
    // judged, so nothing is changed.
    let mut g = guarded(Static::new(512));
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run(&mut g, &mut dev, 50, |_| f64::NAN);
    assert!(seen.iter().all(|&kb| kb == 128), "{seen:?}");
    assert_eq!(dev.sets, 0);
    assert!(g.take_events().is_empty());
}

/// 512 KiB asked for over `windows` windows on a workload 1.5 times as fast there as at
/// vanilla, whose progress goes unmeasured in the windows `blind` names; the device's value in
/// each window and the guardrail's events.
fn better_at_512_unless_unmeasured(windows: usize, blind: impl Fn(usize) -> bool) -> (Vec<u64>, Vec<GuardEvent>) {
    let mut g = guarded(Static::new(512));
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run_by_window(&mut g, &mut dev, windows, |kb, i| match (blind(i), kb) {
        (true, _) => f64::NAN,
        (false, 512) => 150.0,
        (false, _) => 100.0,
    });
    (seen, g.take_events())
}

#[test]
fn a_signal_lost_for_good_puts_vanilla_back_until_it_returns() {
    // 512 KiB does better and is kept; then the measure fails (a count file gone) from window
    // 40 to 69, and comes back.
    let (seen, ev) = better_at_512_unless_unmeasured(120, |i| (40..70).contains(&i));
    let lost: Vec<_> = ev.iter().filter(|e| e.kind == GuardEventKind::Unmeasured).collect();
    assert_eq!(lost.len(), 1, "logged once: {ev:?}");
    assert!(lost[0].reason.contains("without a measure"), "{:?}", lost[0]);
    assert_eq!(seen[39], 512, "{seen:?}");
    // Unmeasured, the decision stands as long as judging one takes (settle + block windows),
    // then vanilla holds until progress is measured again ...
    let cfg = GuardConfig::default();
    let back = 40 + (cfg.settle + cfg.block) as usize;
    assert!(seen[back..70].iter().all(|&kb| kb == 128), "{seen:?}");
    assert!(seen[40..back].contains(&512), "{seen:?}");
    // ... and is measured afresh (a block) before the decision is back, and kept.
    assert!(
        seen[70..70 + cfg.block as usize].iter().all(|&kb| kb == 128),
        "{seen:?}"
    );
    assert_eq!(*seen.last().unwrap(), 512, "{seen:?}");
    assert!(
        ev.iter().any(|e| e.kind == GuardEventKind::Kept && e.window > 70),
        "{ev:?}"
    );
}

#[test]
fn a_judged_decision_whose_progress_goes_unmeasured_is_watched_every_window() {
    // Kept and judged, the tuner may rest (watch one window in eight); unmeasured, it must
    // not, or putting vanilla back would take eight times the windows.
    let mut g = guarded(Static::new(512));
    let mut dev = Device { kb: 128, sets: 0 };
    run_by_window(&mut g, &mut dev, 20, |kb, _| if kb == 512 { 150.0 } else { 100.0 });
    assert!(g.idle(), "kept and judged");
    run_by_window(&mut g, &mut dev, 1, |_, _| f64::NAN);
    assert!(!g.idle(), "unmeasured");
    assert_eq!(dev.kb, 512, "one window changes nothing");
}

#[test]
fn a_window_or_two_unmeasured_changes_nothing() {
    // A reading that fails now and then (a count read late) costs no decision its place.
    let (seen, ev) = better_at_512_unless_unmeasured(200, |i| i > 20 && i % 10 < 2);
    assert!(ev.iter().all(|e| e.kind == GuardEventKind::Kept), "{ev:?}");
    let vanilla = seen[20..].iter().filter(|&&kb| kb == 128).count();
    assert!(vanilla <= 16, "{vanilla} windows on vanilla: {seen:?}");
}

#[test]
fn the_online_learner_inside_the_guardrail_finds_the_peak() {
    // Progress peaks at 512 KiB: vanilla (128) reaches 70% of it.
    let f = |kb: u64| 100.0 * (1.0 - 0.15 * ((kb as f64).log2() - 9.0).abs()).max(0.05);
    let mut g = guarded(Online::new(OnlineConfig::default()));
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run(&mut g, &mut dev, 300, f);
    let late = &seen[60..];
    let gain = (mean(late, f) - f(128)) / (f(512) - f(128));
    assert!(
        gain >= 0.9,
        "kept {:.0}% of the gain after a minute: {:?}",
        gain * 100.0,
        &seen[..80]
    );
}

#[test]
fn bad_configurations_are_refused_by_name() {
    for (g, field) in [
        (
            GuardConfig {
                block: 0,
                ..GuardConfig::default()
            },
            "block",
        ),
        (
            GuardConfig {
                tolerance: 0.9,
                ..GuardConfig::default()
            },
            "tolerance",
        ),
        (
            GuardConfig {
                abort: 2.0,
                ..GuardConfig::default()
            },
            "abort",
        ),
        (
            GuardConfig {
                harm: f64::NAN,
                ..GuardConfig::default()
            },
            "harm",
        ),
        (
            GuardConfig {
                first_interval: 0,
                ..GuardConfig::default()
            },
            "interval",
        ),
        (
            GuardConfig {
                first_backoff: 9,
                max_backoff: 4,
                ..GuardConfig::default()
            },
            "backoff",
        ),
        (
            GuardConfig {
                min_kb: u64::MAX,
                ..GuardConfig::default()
            },
            "min_kb",
        ),
    ] {
        let e = g.check().unwrap_err();
        assert!(e.contains(field), "{e}");
    }
    assert!(GuardConfig::default().check().is_ok());
}

/// A controller that asks `kb(window)` every window (its own count of windows).
struct Schedule<F: Fn(u64) -> u64> {
    kb: F,
    window: u64,
}

impl<F: Fn(u64) -> u64 + Send> ReadaheadController for Schedule<F> {
    fn name(&self) -> String {
        "schedule".into()
    }
    fn decide(&mut self, _: &WindowFeatures, knobs: &mut dyn ReadaheadKnobs) {
        let kb = (self.kb)(self.window);
        self.window += 1;
        if knobs.device_read_ahead_kb() != kb {
            knobs.set_device_read_ahead_kb(kb);
        }
    }
}

#[test]
fn a_controller_that_changes_its_mind_every_window_and_loses_clearly_is_judged_in_a_block() {
    // KML's per-file model on a range scan (2026-11-27): a new value for one file or another
    // every window, each 25% below vanilla (above the collapse bar), counted in pages. No
    // decision lasts a settled window, and the controller as a whole was judged only after
    // 12 windows; its last block clearly below vanilla takes it back after three.
    let mut g = guarded(Schedule {
        kb: |w| if w % 2 == 0 { 256 } else { 512 },
        window: 0,
    });
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run_by_window(&mut g, &mut dev, 20, |kb, _| if kb == 128 { 10_000.0 } else { 7_500.0 });
    let tuned = seen[4..].iter().take_while(|&&kb| kb != 128).count();
    assert!(tuned <= 3, "{tuned} windows before vanilla: {seen:?}");
    let ev = g.take_events();
    assert_eq!(ev[0].kind, GuardEventKind::Reverted, "{ev:?}");
    // Both values backed off as a whole: vanilla for the rest of these windows.
    assert!(seen[4 + tuned..].iter().all(|&kb| kb == 128), "{seen:?}");
}

#[test]
fn a_new_decision_during_or_around_a_check_is_judged_on_its_own_block() {
    // 512 KiB is better; at window `at` the controller moves to 1024 KiB, 25% worse than
    // vanilla. Whenever the move falls (near a vanilla check too), 1024 is reverted within a
    // check's length and never logged as kept.
    let f = |kb: u64| match kb {
        512 => 150.0,
        1024 => 75.0,
        _ => 100.0,
    };
    for at in 40..75 {
        let mut g = guarded(Schedule {
            kb: move |w| if w < at { 512 } else { 1024 },
            window: 0,
        });
        let mut dev = Device { kb: 128, sets: 0 };
        let seen = run(&mut g, &mut dev, 200, f);
        let bad = seen[at as usize..].iter().take_while(|&&kb| kb != 128).count();
        assert!(
            bad <= 12,
            "switch at {at}: {bad} windows at 1024 before vanilla: {:?}",
            &seen[..100]
        );
        let ev = g.take_events();
        assert!(
            !ev.iter().any(|e| e.kind == GuardEventKind::Kept && e.tuned < 100.0),
            "switch at {at}: a loss was kept: {ev:?}"
        );
    }
}

#[test]
fn a_narrow_pass_against_a_vanilla_block_from_the_warm_up_is_checked_against_vanilla_now() {
    // The kernel's range scan (2026-11-29): vanilla's first block fell in the warm-up (336
    // ops/s against 519 later); a decision with a wide margin stretched the interval; then a
    // new decision at about 340, a third below vanilla's steady rate, passed against that
    // block by a hair and was kept. Here: every value runs at 0.65 of its speed until window
    // 5; 512 KiB doubles vanilla, 64 KiB runs at 0.655 of it (just above the warm-up's vanilla).
    let warm = |i: usize| if i < 5 { 0.65 } else { 1.0 };
    let f = |kb: u64, i: usize| {
        warm(i)
            * match kb {
                512 => 2_000.0,
                64 => 655.0,
                _ => 1_000.0,
            }
    };
    // Past the first interval (16 windows): 64 is judged fresh only because 512's margin
    // stretched it.
    let at = 30;
    let mut g = guarded(Schedule {
        kb: move |w| if w < at { 512 } else { 64 },
        window: 0,
    });
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run_by_window(&mut g, &mut dev, 60, f);
    // 512 was kept clearly above vanilla: no check of vanilla before the switch.
    assert!(seen[5..at as usize].iter().all(|&kb| kb == 512), "{seen:?}");
    // 64 goes into force, is measured for a block, then vanilla (measured now) takes it back.
    let first = seen[at as usize..].iter().take_while(|&&kb| kb != 128).count();
    assert!(first <= 6, "{first} windows at 64 KiB before vanilla: {seen:?}");
    let ev = g.take_events();
    assert!(
        !ev.iter().any(|e| e.kind == GuardEventKind::Kept && e.tuned < 1_000.0),
        "a loss kept against the warm-up's vanilla: {ev:?}"
    );
    assert!(ev.iter().any(|e| e.kind == GuardEventKind::Reverted), "{ev:?}");
}

#[test]
fn a_kept_value_that_collapses_later_is_reverted_at_once() {
    let mut g = guarded(Static::new(512));
    let mut dev = Device { kb: 128, sets: 0 };
    run(&mut g, &mut dev, 60, |kb| if kb == 512 { 150.0 } else { 100.0 });
    let after = run(&mut g, &mut dev, 40, |kb| if kb == 512 { 5.0 } else { 100.0 });
    let bad = after.iter().take_while(|&&kb| kb == 512).count();
    assert!(bad <= 6, "{bad} windows at 5% of vanilla: {after:?}");
}

#[test]
fn a_controller_that_changes_its_mind_every_window_is_held_to_the_collapse_rule() {
    // 512 and 1024 KiB both collapse; asked for in turn (raises, each from the other's value
    // or vanilla's), every window is a settling one. Only the first is spared: the second is
    // judged, and reverted, as a settled window would be.
    let f = |kb: u64| if kb > 256 { 5.0 } else { 100.0 };
    let mut g = guarded(Schedule {
        kb: |w| if w % 2 == 0 { 512 } else { 1024 },
        window: 0,
    });
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run(&mut g, &mut dev, 40, f);
    assert!(seen[4] > 256 && seen[5] > 256, "{seen:?}");
    assert_eq!(seen[6], 128, "two windows of a collapse, not a block: {seen:?}");
    // 32 and 48 KiB, lowerings: no window is spared, the first is judged and reverted.
    let f = |kb: u64| if kb < 64 { 5.0 } else { 100.0 };
    let mut g = guarded(Schedule {
        kb: |w| if w % 2 == 0 { 32 } else { 48 },
        window: 0,
    });
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run(&mut g, &mut dev, 40, f);
    assert!(seen[4] < 64, "{seen:?}");
    assert_eq!(seen[5], 128, "one window of a lowering's collapse: {seen:?}");
}

#[test]
fn a_controller_that_flips_between_two_bad_values_is_held_to_the_tolerance() {
    // 512 and 1024 both lose to vanilla; the controller changes its mind every 3 windows, less
    // than a settle and a block, and its values take turns being backed off.
    let f = |kb: u64| match kb {
        512 => 80.0,
        1024 => 75.0,
        _ => 100.0,
    };
    let mut g = guarded(Schedule {
        kb: |w| if (w / 3) % 2 == 0 { 512 } else { 1024 },
        window: 0,
    });
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run(&mut g, &mut dev, 600, f);
    let kept = mean(&seen, f) / 100.0;
    assert!(kept >= 0.96, "{kept:.3} of vanilla: {:?}", &seen[..120]);
    assert!(!g
        .take_events()
        .iter()
        .any(|e| e.kind == GuardEventKind::Kept && e.tuned < 98.0));
}

#[test]
fn a_paused_workload_is_no_collapse() {
    // Without the application's count, an idle window (no page touched, no CPU) says nothing
    // about the value in force: a pause must not revert a good decision.
    let idle = Outcome {
        seconds: 1.0,
        busy_s: Some(0.0),
        read_ahead_kb: Some(512),
        ..Outcome::default()
    };
    assert_eq!(idle.progress(), None);
    let busy = Outcome {
        pages_accessed: 10,
        busy_s: Some(0.5),
        ..idle.clone()
    };
    assert_eq!(busy.progress(), Some(0.5));
    let mut g = guarded(Static::new(512));
    let mut dev = Device { kb: 128, sets: 0 };
    run(&mut g, &mut dev, 60, |kb| if kb == 512 { 150.0 } else { 100.0 });
    for _ in 0..20 {
        let w = WindowFeatures {
            outcome: Outcome {
                read_ahead_kb: Some(dev.kb),
                ..idle.clone()
            },
            ..WindowFeatures::default()
        };
        g.decide(&w, &mut dev);
    }
    assert_eq!(dev.kb, 512, "{:?}", g.take_events());
}

#[test]
fn a_process_leaving_the_watched_set_is_no_collapse() {
    // Two processes, then one exits: progress halves whatever the value. The guardrail must
    // not take that for the value's collapse; it measures vanilla again and judges by it.
    let f = |kb: u64| if kb == 512 { 120.0 } else { 100.0 };
    let mut g = guarded(Static::new(512));
    let mut dev = Device { kb: 128, sets: 0 };
    let mut seen = Vec::new();
    for w in 0..60u64 {
        seen.push(dev.kb);
        let (share, population) = if w < 12 { (1.0, 1) } else { (0.5, 2) };
        let win = WindowFeatures {
            outcome: Outcome {
                seconds: 1.0,
                busy_s: Some(f(dev.kb) * share / 100.0),
                pages_accessed: 100,
                population: Some(population),
                ..Outcome::default()
            },
            ..WindowFeatures::default()
        };
        g.decide(&win, &mut dev);
    }
    let ev = g.take_events();
    assert!(ev.iter().all(|e| e.kind == GuardEventKind::Kept), "no revert: {ev:?}");
    assert!(
        ev.iter().any(|e| e.window > 12),
        "judged again after the change: {ev:?}"
    );
    assert_eq!(*seen.last().unwrap(), 512);
    // Without the fingerprint the same drop reads as a collapse.
    let mut g = guarded(Static::new(512));
    let mut dev = Device { kb: 128, sets: 0 };
    for w in 0..20u64 {
        let share = if w < 12 { 1.0 } else { 0.5 };
        let win = WindowFeatures {
            outcome: Outcome {
                seconds: 1.0,
                busy_s: Some(f(dev.kb) * share / 100.0),
                pages_accessed: 100,
                ..Outcome::default()
            },
            ..WindowFeatures::default()
        };
        g.decide(&win, &mut dev);
    }
    assert!(g.take_events().iter().any(|e| e.kind == GuardEventKind::Reverted));
}

#[test]
fn processes_that_keep_changing_keep_the_device_on_vanilla() {
    // A new process every third window: no decision can be judged, so none stays in force.
    let f = |kb: u64| if kb == 1024 { 50.0 } else { 100.0 };
    let mut g = guarded(Static::new(1024));
    let mut dev = Device { kb: 128, sets: 0 };
    let mut seen = Vec::new();
    for w in 0..90u64 {
        seen.push(dev.kb);
        let win = WindowFeatures {
            outcome: Outcome {
                seconds: 1.0,
                busy_s: Some(f(dev.kb) / 100.0),
                pages_accessed: 100,
                population: Some(w / 3),
                ..Outcome::default()
            },
            ..WindowFeatures::default()
        };
        g.decide(&win, &mut dev);
    }
    let bad = seen.iter().filter(|&&kb| kb == 1024).count();
    assert!(bad <= 3, "{bad} windows at the bad value: {seen:?}");
}

/// Run `ctl` for `windows` on a device shared by processes whose progress (user seconds per
/// second, no application count: what the tuner sees on the kernel) is `f(kb)`, by process.
fn run_processes(ctl: &mut Guarded, dev: &mut Device, windows: usize, f: impl Fn(u64) -> Vec<f64>) -> Vec<u64> {
    run_processes_by_window(ctl, dev, windows, |kb, _| f(kb))
}

/// [`run_processes`] with progress `f(kb, window)`, measured at the kernel's resolution (one
/// clock tick, 0.01 s).
fn run_processes_by_window(
    ctl: &mut Guarded,
    dev: &mut Device,
    windows: usize,
    f: impl Fn(u64, usize) -> Vec<f64>,
) -> Vec<u64> {
    let mut seen = Vec::new();
    for i in 0..windows {
        seen.push(dev.kb);
        let each = f(dev.kb, i);
        let w = WindowFeatures {
            outcome: Outcome {
                seconds: 1.0,
                busy_s: Some(each.iter().sum()),
                by_process: each.iter().enumerate().map(|(i, &p)| (100 + i as u32, p)).collect(),
                resolution: 0.01,
                read_ahead_kb: Some(dev.kb),
                pages_accessed: 100,
                pages_added: dev.kb,
                ..Outcome::default()
            },
            ..WindowFeatures::default()
        };
        ctl.decide(&w, dev);
    }
    seen
}

#[test]
fn processes_are_judged_each_against_its_own_vanilla() {
    // A CPU-heavy range scan (0.60 s of user time a second) beside a random reader (0.04):
    // 16 KiB costs the scan 10% and doubles the reader. Summed, that is 0.62 against 0.64, a
    // 3% loss; each against its own vanilla it is a 45% gain.
    let f = |kb: u64| if kb == 16 { vec![0.54, 0.08] } else { vec![0.60, 0.04] };
    let mut g = guarded(Static::new(16));
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run_processes(&mut g, &mut dev, 100, f);
    let ev = g.take_events();
    assert!(ev.iter().all(|e| e.kind == GuardEventKind::Kept), "{ev:?}");
    assert!(ev[0].reason.contains("per process +45.0%"), "{}", ev[0].reason);
    assert!(ev[0].reason.contains("pid 101 +100.0%"), "{}", ev[0].reason);
    assert!(seen[20..].iter().filter(|&&kb| kb == 16).count() >= 70, "{seen:?}");

    // The other way round: a light process loses 40% for a heavy one's 20% (0.05 -> 0.03,
    // 0.30 -> 0.36). Summed that is an 11% gain; each against its own, a 10% loss.
    let f = |kb: u64| if kb == 16 { vec![0.03, 0.36] } else { vec![0.05, 0.30] };
    let mut g = guarded(Static::new(16));
    let mut dev = Device { kb: 128, sets: 0 };
    run_processes(&mut g, &mut dev, 20, f);
    let ev = g.take_events();
    assert_eq!(ev.first().map(|e| e.kind), Some(GuardEventKind::Reverted), "{ev:?}");
    assert!(ev[0].reason.contains("per process -10.0%"), "{}", ev[0].reason);
}

#[test]
fn one_watched_process_is_judged_as_before() {
    // A single process split out is the summed comparison: a 10% loss is reverted.
    let f = |kb: u64| if kb == 1024 { vec![0.9] } else { vec![1.0] };
    let mut g = guarded(Static::new(1024));
    let mut dev = Device { kb: 128, sets: 0 };
    run_processes(&mut g, &mut dev, 20, f);
    let ev = g.take_events();
    assert_eq!(ev.first().map(|e| e.kind), Some(GuardEventKind::Reverted), "{ev:?}");
    assert!(!ev[0].reason.contains("per process"), "{}", ev[0].reason);
}

#[test]
fn a_light_process_without_a_tick_in_one_window_is_no_collapse() {
    // A random reader runs a few clock ticks a window: a window in which it got none is 0x its
    // vanilla, and judged process by process one window would read as a collapse (mean 0.5).
    // Collapses are judged on the sum; the block, summed over its windows, passes (+8%).
    let f = |kb: u64, i: usize| match kb {
        16 => vec![0.30, [0.0, 0.08, 0.06][i % 3]],
        _ => vec![0.30, 0.04],
    };
    let mut g = guarded(Static::new(16));
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run_processes_by_window(&mut g, &mut dev, 40, f);
    let ev = g.take_events();
    assert!(ev.iter().all(|e| e.kind == GuardEventKind::Kept), "{ev:?}");
    assert!(seen[10..].iter().filter(|&&kb| kb == 16).count() >= 25, "{seen:?}");
}

#[test]
fn a_process_below_the_resolution_is_not_judged_on_its_own() {
    // An idle shell in the watched cgroup (2 ticks a second) triples its ticks while the
    // database loses 10%: the shell's ratio is noise and does not count; summed, it would have
    // hidden the loss (0.33 against 0.32).
    let f = |kb: u64| if kb == 16 { vec![0.27, 0.06] } else { vec![0.30, 0.02] };
    let mut g = guarded(Static::new(16));
    let mut dev = Device { kb: 128, sets: 0 };
    run_processes(&mut g, &mut dev, 20, f);
    let ev = g.take_events();
    assert_eq!(ev.first().map(|e| e.kind), Some(GuardEventKind::Reverted), "{ev:?}");
    assert!(
        ev[0].reason.contains("per process -10.0% (pid 100 -10.0% of 0.300/s)"),
        "{}",
        ev[0].reason
    );
    assert!((ev[0].relative - 0.9).abs() < 1e-9, "{}", ev[0].relative);
}

#[test]
fn a_helper_with_a_sliver_of_the_pages_is_not_judged_on_its_own() {
    // Counted in pages (`--progress auto`): a scan reads 30,000 pages a second and gains 10%
    // at 512 KiB; a helper beside it read 10 pages a second under vanilla and none since.
    // Ten pages a window clear the resolution's bar (one page), but its ratio of 0 would
    // halve the mean of the two and revert the scan's gain; under 1% of the pages, it does
    // not count on its own.
    let mut g = guarded(Static::new(512));
    let mut dev = Device { kb: 128, sets: 0 };
    for _ in 0..20 {
        let (scan, helper) = if dev.kb == 512 {
            (33_000.0, 0.0)
        } else {
            (30_000.0, 10.0)
        };
        let w = WindowFeatures {
            outcome: Outcome {
                seconds: 1.0,
                ops: Some(scan + helper),
                by_process: std::collections::BTreeMap::from([(100, scan), (101, helper)]),
                resolution: 1.0,
                read_ahead_kb: Some(dev.kb),
                pages_accessed: (scan + helper) as u64,
                pages_added: (scan + helper) as u64,
                pages_used: Some((scan + helper) as u64),
                ..Outcome::default()
            },
            ..WindowFeatures::default()
        };
        g.decide(&w, &mut dev);
    }
    let ev = g.take_events();
    assert_eq!(ev.first().map(|e| e.kind), Some(GuardEventKind::Kept), "{ev:?}");
    assert!(ev[0].reason.contains("+10.0%"), "{}", ev[0].reason);
    assert_eq!(dev.kb, 512);
}

#[test]
fn a_light_process_counted_in_its_own_operations_is_judged_on_its_own() {
    // The same sliver, but operations each process counts in its own unit (the simulator's
    // application signal): a random reader's 10 lookups a second beside a scan's 30,000 rows
    // are no helper's noise, and halving them at 512 KiB while the scan gains 10% is a loss.
    let mut g = guarded(Static::new(512));
    let mut dev = Device { kb: 128, sets: 0 };
    for _ in 0..20 {
        let (scan, reader) = if dev.kb == 512 {
            (33_000.0, 5.0)
        } else {
            (30_000.0, 10.0)
        };
        let w = WindowFeatures {
            outcome: Outcome {
                seconds: 1.0,
                ops: Some(scan + reader),
                by_process: std::collections::BTreeMap::from([(100, scan), (101, reader)]),
                own_units: true,
                read_ahead_kb: Some(dev.kb),
                pages_accessed: 30_000,
                pages_added: 30_000,
                pages_used: Some(30_000),
                ..Outcome::default()
            },
            ..WindowFeatures::default()
        };
        g.decide(&w, &mut dev);
    }
    let ev = g.take_events();
    assert_eq!(ev.first().map(|e| e.kind), Some(GuardEventKind::Reverted), "{ev:?}");
    assert!(ev[0].reason.contains("pid 101 -50.0%"), "{}", ev[0].reason);
}

#[test]
fn a_request_the_floor_raised_to_the_value_in_force_is_not_rewritten() {
    // static:8 under the guardrail gets 16 KiB; asking for 8 again every window must not set
    // 16 again every window.
    let mut g = guarded(Static::new(8));
    let mut dev = Device { kb: 128, sets: 0 };
    run(&mut g, &mut dev, 40, |kb| if kb == 16 { 120.0 } else { 100.0 });
    assert_eq!(dev.kb, 16);
    assert!(dev.sets <= 3, "{} sets", dev.sets);
}

/// Processes' open file descriptions of one file (inode 1), each process's progress a
/// function of its own value.
#[derive(Default)]
struct Processes {
    descriptions: std::collections::BTreeMap<u32, u64>,
    file: Option<u64>,
    sets: u64,
}

impl ReadaheadKnobs for Processes {
    fn device_read_ahead_kb(&self) -> u64 {
        128
    }
    fn set_device_read_ahead_kb(&mut self, _: u64) {}
    fn file_read_ahead_kb(&self, _: u64) -> u64 {
        self.file.unwrap_or(128)
    }
    fn set_file_read_ahead_kb(&mut self, _: u64, kb: u64) {
        self.file = Some(kb);
        self.descriptions.clear(); // a file's value replaces its descriptions'
    }
    fn description_read_ahead_kb(&self, pid: u32, _: u64) -> u64 {
        self.descriptions
            .get(&pid)
            .copied()
            .unwrap_or(self.file_read_ahead_kb(1))
    }
    fn set_description_read_ahead_kb(&mut self, pid: u32, _: u64, kb: u64) {
        self.descriptions.insert(pid, kb);
        self.sets += 1;
    }
}

#[test]
fn a_process_that_loses_alone_is_put_back_alone() {
    // A range scan (pid 100) and a random reader (101) on one file, both given 16 KiB: the
    // reader more than doubles, the scan loses a third. The mean passes (+46%); the scan alone
    // goes back to vanilla and the reader keeps its 16 KiB.
    process_put_back_alone(0.20, "while the mean passed", false);
}

#[test]
fn a_process_put_back_alone_settles_before_it_is_judged() {
    // As above, and each raise of the scan's value (16 KiB back to 128) costs the kernel the
    // window it comes in, for both processes (the sum falls to a fifth of vanilla's): the window
    // a held process's value settles in is spared as any other's, not taken for a collapse of
    // the whole decision.
    process_put_back_alone(0.20, "while the mean passed", true);
}

#[test]
fn a_process_that_collapses_alone_is_put_back_alone() {
    // The scan loses 60%: the sum falls below the collapse bar (0.62x) in the first window,
    // which would revert the reader's gain too; split by process, the scan goes back alone.
    process_put_back_alone(0.12, "collapsed", false);
}

/// Pids 100 (a scan) and 101 (a random reader) given 16 KiB each, the scan at
/// `scan_at_16_progress` there; with `raise_costs`, the window after each raise of the scan's
/// value is a fifth of vanilla's for both.
fn process_put_back_alone(scan_at_16_progress: f64, why: &str, raise_costs: bool) {
    let scan_kb_before = std::cell::Cell::new(128);
    let progress = |k: &Processes, pid: u32| {
        let scan_kb = k.description_read_ahead_kb(100, 1);
        let raised = raise_costs && scan_kb > scan_kb_before.get();
        if pid == 101 {
            scan_kb_before.set(scan_kb); // called for 100, then 101, each window
        }
        match (pid, k.description_read_ahead_kb(pid, 1)) {
            _ if raised => 0.035,
            (100, 16) => scan_at_16_progress,
            (100, _) => 0.30,
            (_, 16) => 0.09,
            _ => 0.04,
        }
    };
    let mut scan_at_16 = 0;
    let ctl = PerProcess {
        kb: [(100, 16), (101, 16)].into(),
    };
    let (ev, k) = run_on_processes(ctl, 120, progress, |i, g, k| {
        if i >= 20 {
            scan_at_16 += u32::from(k.description_read_ahead_kb(100, 1) == 16);
            if g.arm() == Arm::Tuned {
                assert_eq!(
                    k.description_read_ahead_kb(101, 1),
                    16,
                    "window {i}: the reader keeps its value"
                );
            }
            // A process held on vanilla counts its backoff in windows: no rest meanwhile.
            if k.description_read_ahead_kb(100, 1) != 16 && g.arm() == Arm::Tuned {
                assert!(
                    !g.idle(),
                    "window {i}: the scan is held back, the guardrail is not idle"
                );
            }
        }
    });
    let alone: Vec<_> = ev
        .iter()
        .filter(|e| e.kind == GuardEventKind::ProcessReverted)
        .collect();
    assert!(!alone.is_empty() && alone.iter().all(|e| e.pid == Some(100)), "{ev:?}");
    assert!(alone[0].reason.contains(why), "{:?}", alone[0].reason);
    assert!(ev.iter().all(|e| e.kind != GuardEventKind::Reverted), "{ev:?}");
    // Tried again after each backoff (16, 32, 64 windows), judged on a block and put back.
    assert!(alone.len() >= 3, "{alone:?}");
    assert!(scan_at_16 <= 12, "the scan spent {scan_at_16} of 100 windows at 16 KiB");
    assert!(k.sets < 40, "{} sets", k.sets);
}

/// Run `ctl` on [`Processes`] (pids 100 and 101 reading inode 1) for `windows`, progress
/// `f(knobs, pid)`, calling `each(window, guardrail, knobs)` after each decision; returns the
/// guardrail's events and the knobs.
fn run_on_processes(
    ctl: impl ReadaheadController + Send + 'static,
    windows: usize,
    f: impl Fn(&Processes, u32) -> f64,
    mut each: impl FnMut(usize, &Guarded, &Processes),
) -> (Vec<iolearn_policy::guard::GuardEvent>, Processes) {
    let mut g = guarded(ctl);
    let mut k = Processes::default();
    for i in 0..windows {
        let amounts: Vec<(u32, f64)> = [100, 101].iter().map(|&pid| (pid, f(&k, pid))).collect();
        let w = WindowFeatures {
            descriptions: [((100, 1), [0.0; 9]), ((101, 1), [0.0; 9])].into(),
            outcome: Outcome {
                seconds: 1.0,
                busy_s: Some(amounts.iter().map(|e| e.1).sum()),
                by_process: amounts.into_iter().collect(),
                resolution: 0.01,
                pages_accessed: 100,
                pages_added: 100,
                ..Outcome::default()
            },
            ..WindowFeatures::default()
        };
        g.decide(&w, &mut k);
        each(i, &g, &k);
    }
    (g.take_events(), k)
}

#[test]
fn a_wide_margin_summed_over_processes_is_not_one_for_each() {
    // Both processes at 16 KiB, one per open file description: the busy one doubles, the light
    // one loses 10% (under the `harm` bar: not put back alone). The sum is far above vanilla,
    // the light process is not: the check of vanilla comes at the first interval. Where both
    // double, it waits four times as long.
    for (light_at_16, first_check) in [(0.45, 8..=25), (1.0, 60..=80)] {
        let ctl = PerProcess {
            kb: [(100, 16), (101, 16)].into(),
        };
        let progress = |k: &Processes, pid: u32| match (pid, k.description_read_ahead_kb(pid, 1) == 16) {
            (100, true) => 1.8,
            (100, false) => 0.9,
            (_, true) => light_at_16,
            _ => 0.5,
        };
        let mut vanilla_again = None;
        let (ev, _) = run_on_processes(ctl, 100, progress, |i, _, k| {
            if i >= 8 && vanilla_again.is_none() && k.description_read_ahead_kb(100, 1) == 128 {
                vanilla_again = Some(i);
            }
        });
        assert!(ev.iter().all(|e| e.kind == GuardEventKind::Kept), "{ev:?}");
        assert!(
            vanilla_again.is_some_and(|i| first_check.contains(&i)),
            "light process at {light_at_16}: vanilla again at {vanilla_again:?}, wanted {first_check:?}"
        );
    }
}

#[test]
fn a_process_still_down_once_held_brings_the_whole_decision_back() {
    // The scan slows because of the reader's 16 KiB (they share the device), not its own
    // value: held alone it stays down, so the decision as a whole goes, and the scan is not
    // held again window after window.
    let ctl = PerProcess {
        kb: [(100, 16), (101, 16)].into(),
    };
    // Busy enough (a hundred clock ticks a window and more) for one window's collapse to be
    // told from tick noise.
    let progress = |k: &Processes, pid: u32| match (pid, k.description_read_ahead_kb(101, 1) == 16) {
        (100, true) => 0.36,
        (100, false) => 0.90,
        (_, true) => 0.27,
        _ => 0.12,
    };
    let (ev, _) = run_on_processes(ctl, 20, progress, |_, _, _| {});
    let alone = ev.iter().filter(|e| e.kind == GuardEventKind::ProcessReverted).count();
    assert_eq!(alone, 1, "{ev:?}");
    assert!(ev.iter().any(|e| e.kind == GuardEventKind::Reverted), "{ev:?}");
}

/// Per-file decisions: the file's value and each process's next files.
struct PerFile;

impl ReadaheadController for PerFile {
    fn name(&self) -> String {
        "per-file-16".into()
    }
    fn decide(&mut self, _: &WindowFeatures, knobs: &mut dyn ReadaheadKnobs) {
        knobs.set_file_read_ahead_kb(1, 16);
        knobs.set_new_file_read_ahead_kb(100, 16);
        knobs.set_new_file_read_ahead_kb(101, 16);
    }
}

#[test]
fn a_per_file_decision_is_not_taken_back_for_one_process() {
    // A file's value holds for every reader of the file: a process cannot be put back alone,
    // so a collapse of one reverts the decision.
    // Busy enough (a hundred clock ticks a window and more) for one window's collapse to be
    // told from tick noise.
    let progress = |k: &Processes, pid: u32| match (pid, k.file_read_ahead_kb(1) == 16) {
        (100, true) => 0.36,
        (100, false) => 0.90,
        (_, true) => 0.27,
        _ => 0.12,
    };
    let (ev, _) = run_on_processes(PerFile, 20, progress, |_, _, _| {});
    assert!(ev.iter().all(|e| e.kind != GuardEventKind::ProcessReverted), "{ev:?}");
    assert!(ev.iter().any(|e| e.kind == GuardEventKind::Reverted), "{ev:?}");
}

#[test]
fn the_guardrail_is_idle_only_while_a_judged_decision_is_in_force() {
    // A better value: vanilla measured (not idle), the value tried (not idle), kept (idle),
    // vanilla checked again at the interval (not idle), kept again (idle).
    let f = |kb: u64| if kb == 512 { 150.0 } else { 100.0 };
    let mut g = guarded(Static::new(512));
    let mut dev = Device { kb: 128, sets: 0 };
    let mut idle = Vec::new();
    for _ in 0..120 {
        run(&mut g, &mut dev, 1, f);
        idle.push(g.idle());
    }
    // Baseline 4 windows and the trial's settle + block 4: nothing idle before window 8.
    assert!(idle[..7].iter().all(|&i| !i), "{idle:?}");
    let first = idle.iter().position(|&i| i).expect("idle once kept");
    assert!(first <= 8, "{idle:?}");
    // The check of vanilla at the interval (64 windows after a verdict vanilla fell clearly
    // below) is not idle; idle again after it.
    let busy_again = idle[first..].iter().position(|&i| !i).expect("a check") + first;
    assert!(idle[busy_again..].iter().any(|&i| i), "{idle:?}");
    // A worse value is reverted: the backoff on vanilla waits (idle), the vanilla block
    // measured after it does not.
    let mut g = guarded(Static::new(1024));
    let mut dev = Device { kb: 128, sets: 0 };
    run(&mut g, &mut dev, 12, |kb| if kb == 1024 { 90.0 } else { 100.0 });
    assert_eq!(g.arm(), Arm::Vanilla);
    assert!(g.idle());
    let mut after = Vec::new();
    for _ in 0..30 {
        run(&mut g, &mut dev, 1, |kb| if kb == 1024 { 90.0 } else { 100.0 });
        after.push(g.idle());
    }
    assert!(after.iter().any(|&i| !i), "the baseline after the backoff: {after:?}");
    // A controller that asks for vanilla, and no guardrail at all: idle.
    let mut g = guarded(Vanilla);
    run(&mut g, &mut dev, 10, |_| 100.0);
    assert!(g.idle());
    let g = Guarded::new(Box::new(Static::new(512)), Steady::new(1, 0), None, 128);
    assert!(g.idle());
}

#[test]
fn a_learner_measuring_at_vanilla_keeps_the_guardrail_from_going_idle() {
    // Vanilla is best, progress counted in clock ticks (nine a window: the learner's blocks
    // run up to 24 windows). The guardrail, with vanilla asked for, has nothing to judge, but
    // the learner measures home and its neighbours before it holds. Idle (three idle windows
    // in a row and the tuner rests, showing one window in eight) only once it holds; without
    // its say the guardrail went idle at once and on the kernel a block at home took about
    // 170 windows.
    let rate = |kb: u64| if kb == 128 { 1.0 } else { 0.6 };
    let mut g = guarded(Online::new(OnlineConfig::default()));
    let mut dev = Device { kb: 128, sets: 0 };
    let mut idle = Vec::new();
    let mut looked = None;
    let mut kbs = Vec::new();
    for i in 0..200 {
        kbs.push(dev.kb);
        ticks_window(&mut g, &mut dev, i, rate);
        idle.push(g.idle());
        if dev.sets > 0 {
            looked.get_or_insert(i as usize);
        }
    }
    let looked = looked.expect("the learner looked at a neighbour");
    let first = idle
        .windows(3)
        .position(|w| w.iter().all(|&i| i))
        .expect("idle once the learner holds");
    assert!(
        first > looked,
        "idle from window {first}, before the learner looked around at {looked}: {idle:?}"
    );
    let mut runs: Vec<(u64, usize)> = Vec::new();
    for kb in kbs {
        match runs.last_mut() {
            Some((k, n)) if *k == kb => *n += 1,
            _ => runs.push((kb, 1)),
        }
    }
    let n = idle[first..].iter().filter(|&&i| i).count();
    assert!(n >= 70, "{n} idle of {}: {runs:?}", idle.len() - first);
}

/// One window of `ctl` on `dev`, progress counted in clock ticks: nine a window times
/// `rate(kb)`, jittered by one either way with no relation to the value (window `i`).
fn ticks_window(ctl: &mut Guarded, dev: &mut Device, i: u64, rate: impl Fn(u64) -> f64) {
    let jitter = [0.0, 1.0, -1.0, 0.0, 1.0, -1.0, 1.0][(i % 7) as usize];
    run_processes_by_window(ctl, dev, 1, |kb, _| {
        vec![(9.0 * rate(kb) + jitter).round().max(0.0) * 0.01]
    });
}

#[test]
fn a_request_below_the_floor_is_no_change_once_the_floor_is_in_force() {
    // The controller asks for 8 KiB every window and reads back the floor (16): neither a
    // change held back by the hysteresis nor a rewrite, and the guardrail goes idle.
    let mut g = Guarded::new(
        Box::new(Static::new(8)),
        Steady::new(2, 3),
        Some(GuardConfig::default()),
        128,
    );
    let mut dev = Device { kb: 128, sets: 0 };
    run(&mut g, &mut dev, 30, |_| 100.0);
    assert_eq!(dev.kb, 16);
    let (held, sets) = (g.steady.held_back, dev.sets);
    run(&mut g, &mut dev, 10, |_| 100.0);
    assert_eq!((g.steady.held_back, dev.sets), (held, sets), "asked again and again");
    assert!(g.idle());
}

/// Files by inode, each at its own value (128 until set).
#[derive(Default)]
struct Files {
    kb: std::collections::BTreeMap<u64, u64>,
}

impl ReadaheadKnobs for Files {
    fn device_read_ahead_kb(&self) -> u64 {
        128
    }
    fn set_device_read_ahead_kb(&mut self, _: u64) {}
    fn file_read_ahead_kb(&self, ino: u64) -> u64 {
        self.kb.get(&ino).copied().unwrap_or(128)
    }
    fn set_file_read_ahead_kb(&mut self, ino: u64, kb: u64) {
        self.kb.insert(ino, kb);
    }
}

/// Asks 512 KiB for the files open now (`open`, shared with the test).
struct OpenFiles(std::sync::Arc<std::sync::Mutex<Vec<u64>>>);

impl ReadaheadController for OpenFiles {
    fn name(&self) -> String {
        "open-files".into()
    }
    fn decide(&mut self, _: &WindowFeatures, knobs: &mut dyn ReadaheadKnobs) {
        for &ino in self.0.lock().unwrap().iter() {
            if knobs.file_read_ahead_kb(ino) != 512 {
                knobs.set_file_read_ahead_kb(ino, 512);
            }
        }
    }
}

#[test]
fn files_that_closed_are_forgotten_and_a_judged_decision_stays_judged() {
    let open = std::sync::Arc::new(std::sync::Mutex::new(vec![1u64, 2, 3]));
    let mut g = Guarded::new(
        Box::new(OpenFiles(open.clone())),
        Steady::new(1, 0),
        Some(GuardConfig::default()),
        128,
    );
    let mut k = Files::default();
    let window = |g: &mut Guarded, k: &mut Files| {
        let w = WindowFeatures {
            outcome: Outcome {
                seconds: 1.0,
                ops: Some(if k.file_read_ahead_kb(1) == 512 { 150.0 } else { 100.0 }),
                pages_accessed: 100,
                pages_added: 10,
                ..Outcome::default()
            },
            ..WindowFeatures::default()
        };
        g.decide(&w, k);
    };
    for _ in 0..12 {
        window(&mut g, &mut k);
    }
    assert!(g.idle(), "kept");
    let kept = g.take_events();
    assert!(kept.iter().any(|e| e.kind == GuardEventKind::Kept), "{kept:?}");
    // File 3 closes: forgotten, and what remains of the decision is still the one judged (no
    // new block, no vanilla check, still idle).
    open.lock().unwrap().retain(|&i| i != 3);
    g.forget_closed(([1, 2].into(), Default::default()));
    window(&mut g, &mut k);
    assert!(g.idle(), "still judged without the closed file");
    assert_eq!(g.arm(), Arm::Tuned);
    // The controller asks for a file its window saw that closed before the scan: no decision.
    open.lock().unwrap().push(9);
    for _ in 0..5 {
        g.forget_closed(([1, 2].into(), Default::default()));
        window(&mut g, &mut k);
        assert!(g.idle(), "a closed file's value is no new decision");
    }
    // A stream of files each open for one window: the memory stays the size of what is open.
    for ino in 100..1_100u64 {
        *open.lock().unwrap() = vec![1, 2, ino];
        g.forget_closed(([1, 2, ino].into(), Default::default()));
        window(&mut g, &mut k);
    }
    assert!(g.remembered() <= 3 * 4, "{}", g.remembered());
    // A process that left takes its backoff and values with it.
    g.forget_process(7);
    assert!(g.remembered() <= 3 * 4);
}

/// Whether a static 512 KiB behind the guardrail is reverted over 12 windows whose outcome
/// `outcome(short)` gives, `short` for the windows listed in `short`.
fn reverted_over_short_windows(short: &[u64], outcome: impl Fn(bool) -> Outcome) -> bool {
    let mut g = guarded(Static::new(512));
    let mut dev = Device { kb: 128, sets: 0 };
    for i in 0..12u64 {
        let w = WindowFeatures {
            outcome: Outcome {
                read_ahead_kb: Some(dev.kb),
                ..outcome(short.contains(&i))
            },
            ..WindowFeatures::default()
        };
        g.decide(&w, &mut dev);
    }
    g.take_events().iter().any(|e| e.kind == GuardEventKind::Reverted)
}

#[test]
fn one_window_short_of_vanilla_by_clock_tick_noise_is_no_collapse() {
    // Progress counted in clock ticks (0.01 s): a reader running its own code ten ticks a
    // window. Nothing changes with the value; one window of four ticks is chance, not a
    // collapse, two in a row are. Thirty times more ticks and one such window is one.
    // A second short window in a row is a collapse whatever the noise.
    for (scale, short, collapse) in [
        (1.0, &[9][..], false),
        (1.0, &[9, 10][..], true),
        (30.0, &[9][..], true),
    ] {
        let reverted = reverted_over_short_windows(short, |is_short| Outcome {
            seconds: 1.0,
            busy_s: Some(if is_short { 0.04 } else { 0.10 } * scale),
            resolution: 0.01,
            pages_accessed: 100,
            pages_added: 10,
            ..Outcome::default()
        });
        assert_eq!(reverted, collapse, "scale {scale}, short windows {short:?}");
    }
}

/// A one-second window whose progress is `pages` read, counted at `resolution`.
fn pages_read(pages: f64, resolution: f64) -> Outcome {
    Outcome {
        seconds: 1.0,
        ops: Some(pages),
        resolution,
        pages_accessed: 5_000,
        pages_added: 10,
        ..Outcome::default()
    }
}

#[test]
fn one_window_short_of_vanilla_in_pages_read_is_no_collapse_and_two_are() {
    // Progress counted by the kernel in pages read (resolution one page): exact, thousands a
    // window, and still one short window of a real workload is no collapse; two in a row
    // are. Counted by the application (resolution 0), one is.
    for (resolution, short, collapse) in [(1.0, &[9][..], false), (1.0, &[9, 10][..], true), (0.0, &[9][..], true)] {
        let reverted = reverted_over_short_windows(short, |is_short| {
            pages_read(if is_short { 2_000.0 } else { 5_000.0 }, resolution)
        });
        assert_eq!(reverted, collapse, "resolution {resolution}, short windows {short:?}");
    }
}

#[test]
fn the_windows_a_change_settles_in_are_no_collapse() {
    // Raising readahead under a running reader costs the kernel a second or two before the
    // new value pays (fio over eight files, 1024 -> 2048 KiB by sysfs alone: 1,850 MB/s, then
    // 893 and 577, then 2,200 for good; docs/benchmarks.md). The window a change settles in is
    // not judged; from the next on, the collapse rule holds as before. Vanilla is measured on
    // windows 1-3 (0 settles), 512 KiB comes into force at window 4.
    for (resolution, short, collapse) in [
        (1.0, &[4, 5][..], false),
        (1.0, &[5, 6][..], true),
        (0.0, &[4][..], false),
        (0.0, &[5][..], true),
    ] {
        let reverted = reverted_over_short_windows(short, |is_short| {
            pages_read(if is_short { 1_000.0 } else { 5_000.0 }, resolution)
        });
        assert_eq!(reverted, collapse, "resolution {resolution}, short windows {short:?}");
    }
}

/// A window of a workload that runs its own code `ticks` clock ticks (0.01 s) and uses 100
/// pages, reading `read_per_used` pages per page used.
fn ticks_and_waste(ticks: f64, read_per_used: f64) -> Outcome {
    Outcome {
        seconds: 1.0,
        busy_s: Some(ticks * 0.01),
        resolution: 0.01,
        pages_accessed: 100,
        pages_added: (100.0 * read_per_used) as u64,
        ..Outcome::default()
    }
}

/// Run `ctl` over `windows` windows whose outcome at a value is `at(kb)`; returns the device's
/// value in each window.
fn run_outcomes(ctl: &mut Guarded, dev: &mut Device, windows: usize, at: impl Fn(u64) -> Outcome) -> Vec<u64> {
    run_outcomes_by_window(ctl, dev, windows, |kb, _| at(kb))
}

/// [`run_outcomes`] with the outcome at a value in window `i` `at(kb, i)`.
fn run_outcomes_by_window(
    ctl: &mut Guarded,
    dev: &mut Device,
    windows: usize,
    at: impl Fn(u64, usize) -> Outcome,
) -> Vec<u64> {
    let mut seen = Vec::new();
    for i in 0..windows {
        seen.push(dev.kb);
        let w = WindowFeatures {
            outcome: Outcome {
                read_ahead_kb: Some(dev.kb),
                ..at(dev.kb, i)
            },
            ..WindowFeatures::default()
        };
        ctl.decide(&w, dev);
    }
    seen
}

#[test]
fn a_value_that_reads_pages_nobody_uses_for_no_gain_is_reverted_for_waste() {
    // A random reader of a mapped file runs a tick or two of its own code a window, whatever
    // the value: progress cannot tell 1 MiB from vanilla, the pages read per page used can
    // (read-around brings in the whole window for each fault; kernel: 176 against 25).
    // Two ticks against three is +50%, and still within chance.
    for (vanilla_ticks, tuned_ticks) in [(1.0, 1.0), (2.0, 3.0)] {
        let mut g = guarded(Static::new(1024));
        let mut dev = Device { kb: 128, sets: 0 };
        let seen = run_outcomes(&mut g, &mut dev, 60, |kb| {
            let ticks = if kb == 128 { vanilla_ticks } else { tuned_ticks };
            ticks_and_waste(ticks, kb as f64 / 5.0)
        });
        let ev = g.take_events();
        let first = ev.first().expect("a verdict");
        assert_eq!(first.kind, GuardEventKind::Reverted, "{ev:?}");
        assert!(first.reason.starts_with("waste"), "{}", first.reason);
        assert_eq!(seen[4..8], [1024; 4], "judged on a settled block: {seen:?}");
        assert_eq!(seen[8], 128, "{seen:?}");
        let tuned = seen.iter().filter(|&&kb| kb == 1024).count();
        assert!(
            tuned <= 12,
            "retried only after backoffs: {tuned} windows of 60 at 1 MiB"
        );
    }
}

#[test]
fn a_value_is_not_reverted_for_waste_when_it_reads_what_it_uses_or_pays_for_it() {
    // A scan uses every page it reads at any value (pages read per page used 1): no waste to
    // revert for, even where progress cannot tell. A value that reads three times the pages
    // for a gain well beyond noise (40 ticks against 20) pays for them. Reading no more
    // than one page more per page used than vanilla is no waste either (0.1 against 0.4).
    for (vanilla, tuned) in [
        ((1.0, 1.0), (1.0, 1.0)),
        ((20.0, 2.0), (40.0, 6.0)),
        ((5.0, 0.1), (5.0, 0.4)),
    ] {
        let mut g = guarded(Static::new(1024));
        let mut dev = Device { kb: 128, sets: 0 };
        let seen = run_outcomes(&mut g, &mut dev, 60, |kb| {
            let (ticks, waste) = if kb == 128 { vanilla } else { tuned };
            ticks_and_waste(ticks, waste)
        });
        let ev = g.take_events();
        assert!(
            !ev.is_empty() && ev.iter().all(|e| e.kind == GuardEventKind::Kept),
            "{vanilla:?} {tuned:?}: {ev:?}"
        );
        assert!(seen[20..].iter().filter(|&&kb| kb == 1024).count() >= 30, "{seen:?}");
    }
}

#[test]
fn a_light_process_s_gain_pays_for_waste_beside_a_busy_one() {
    // A scan at 100 ticks a window whatever the value, beside a reader that goes from 10 ticks
    // to 25 at 512 KiB, which reads four times vanilla's pages per page used. Summed, the
    // reader's gain (45 ticks a block) is within chance of the scan's 300; on its own count it
    // is well beyond it, and pays for the pages.
    let mut g = guarded(Static::new(512));
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run_processes(&mut g, &mut dev, 60, |kb| {
        vec![1.00, if kb == 128 { 0.10 } else { 0.25 }]
    });
    let ev = g.take_events();
    assert!(
        !ev.is_empty() && ev.iter().all(|e| e.kind == GuardEventKind::Kept),
        "{ev:?}"
    );
    assert!(seen[20..].iter().filter(|&&kb| kb == 512).count() >= 30, "{seen:?}");
}

#[test]
fn a_value_taken_back_sends_the_learner_home_to_vanilla_not_to_its_neighbours() {
    // A scan that gains up to 1024 KiB, then a random mapped reader under which anything
    // above vanilla collapses to a fifth (on the kernel: 1024, then 2048, then 4096 KiB
    // were each asked for and collapsed, the learner climbing on from the value taken back).
    // Told of the revert, it starts again from vanilla with 1024 banned.
    let scan = |kb: u64| 100.0 * (1.0 - 0.15 * ((kb as f64).log2() - 10.0).abs()).max(0.05);
    let random = |kb: u64| if kb <= 128 { 100.0 } else { 20.0 };
    let mut g = guarded(Online::new(OnlineConfig::default()));
    let mut dev = Device { kb: 128, sets: 0 };
    let first = run(&mut g, &mut dev, 150, scan);
    assert!(first[100..].iter().filter(|&&kb| kb >= 512).count() >= 40, "{first:?}");
    let then = run(&mut g, &mut dev, 150, random);
    let above: Vec<u64> = then.iter().copied().filter(|&kb| kb > 128).collect();
    assert!(
        above.len() <= 8,
        "{} windows above vanilla after the change: {then:?}",
        above.len()
    );
    assert!(above.iter().all(|&kb| kb <= 1024), "{then:?}");
}

/// A static value that records what the guardrail told it when taking it back.
struct Told {
    kb: u64,
    told: std::sync::Arc<std::sync::Mutex<Vec<(u64, u64, bool)>>>,
}

impl ReadaheadController for Told {
    fn name(&self) -> String {
        "told".into()
    }
    fn decide(&mut self, _: &WindowFeatures, knobs: &mut dyn ReadaheadKnobs) {
        if knobs.device_read_ahead_kb() != self.kb {
            knobs.set_device_read_ahead_kb(self.kb);
        }
    }
    fn taken_back(&mut self, kb: u64, now_kb: u64, sure: bool) {
        self.told.lock().unwrap().push((kb, now_kb, sure));
    }
}

#[test]
fn a_controller_is_told_of_a_revert_and_whether_its_loss_was_beyond_chance() {
    // One tick against two a window is -50% and chance; operations the application counts,
    // or a hundred ticks against two hundred, are not.
    for (scale, ops, sure) in [(1.0, false, false), (100.0, false, true), (1.0, true, true)] {
        let told = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut g = guarded(Told {
            kb: 256,
            told: told.clone(),
        });
        let mut dev = Device { kb: 128, sets: 0 };
        run_outcomes(&mut g, &mut dev, 12, |kb| {
            let ticks = if kb == 128 { 2.0 } else { 1.0 } * scale;
            let mut o = ticks_and_waste(ticks, 1.0);
            if ops {
                (o.ops, o.resolution) = (Some(ticks), 0.0);
            }
            o
        });
        let told = told.lock().unwrap().clone();
        assert_eq!(
            told.first(),
            Some(&(256, 128, sure)),
            "scale {scale}, ops {ops}: {told:?}"
        );
    }
}

#[test]
fn a_loss_within_the_spread_its_windows_show_is_not_beyond_chance() {
    // Pages the kernel counted (`--progress auto`, one page the unit): 42,000 a second under
    // the controller against 50,000 is -16%, 35 times the counts' square root. Windows that
    // swing by 15% either way make it chance (on the kernel grep's windows at one value
    // spread by 10-30%); windows steady to 1% do not.
    for (swing, sure) in [(0.15, false), (0.01, true)] {
        let told = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut g = guarded(Told {
            kb: 256,
            told: told.clone(),
        });
        let mut dev = Device { kb: 128, sets: 0 };
        let i = std::cell::Cell::new(0usize);
        run_outcomes(&mut g, &mut dev, 16, |kb| {
            // Any three windows in a row hold each of the three swings once.
            let k = [-1.0, 0.0, 1.0][i.replace(i.get() + 1) % 3];
            let pages = if kb == 128 { 50_000.0 } else { 42_000.0 } * (1.0 + swing * k);
            Outcome {
                seconds: 1.0,
                ops: Some(pages),
                resolution: 1.0,
                pages_accessed: pages as u64,
                pages_added: pages as u64,
                ..Outcome::default()
            }
        });
        let told = told.lock().unwrap().clone();
        assert_eq!(told.first(), Some(&(256, 128, sure)), "swing {swing}: {told:?}");
    }
}

#[test]
fn a_gain_within_the_spread_of_a_block_of_ticks_is_measured_until_it_shows() {
    // db_bench's random readers on the kernel, judged by CPU time (about nine clock ticks a
    // window at 128 KiB): 64 KiB ran +30% (the guardrail kept it), which two blocks of about
    // 200 ticks cannot tell from chance; the learner left it for 256 KiB and ended the run at
    // vanilla. A neighbour that looks better runs on until it shows.
    let rate = |kb: u64| -> f64 {
        match kb {
            16 => 1.15,
            32 => 1.25,
            64 => 1.3,
            128 => 1.0,
            256 => 0.67,
            _ => 0.5,
        }
    };
    // Behind hysteresis of every strength: the tuner's defaults (`--hold 2 --min-gap 3`) and
    // a longer hold keep vanilla in force for more windows after a value is taken back, and
    // the neighbour asked for meanwhile was only held back (a learner that took it for a veto
    // banned 64 KiB without ever trying it).
    for (hold, min_gap) in [(1, 0), (2, 3), (3, 3), (4, 6)] {
        let mut g = Guarded::new(
            Box::new(Online::new(OnlineConfig::default())),
            Steady::new(hold, min_gap),
            Some(GuardConfig::default()),
            128,
        );
        let mut dev = Device { kb: 128, sets: 0 };
        let mut seen = Vec::new();
        for i in 0..400u64 {
            seen.push(dev.kb);
            ticks_window(&mut g, &mut dev, i, rate);
        }
        let low = seen[200..].iter().filter(|&&kb| kb <= 64).count();
        assert!(
            low >= 140,
            "hold {hold}: {low} of the last 200 windows at 64 KiB or below: {seen:?}"
        );
        // 256 KiB, taken back, is not tried again before the other side is.
        let first_64 = seen.iter().position(|&kb| kb == 64).expect("64 tried");
        let looks_at_256 = seen[..first_64]
            .windows(2)
            .filter(|w| w[0] != 256 && w[1] == 256)
            .count();
        assert!(
            looks_at_256 <= 1,
            "hold {hold}: 256 KiB tried {looks_at_256} times before 64: {seen:?}"
        );
        assert!(
            first_64 <= 40 + 4 * hold as usize,
            "hold {hold}: 64 KiB first tried at window {first_64}: {seen:?}"
        );
    }
}

/// A model that reads the value in force (input 4, sectors / 1024): at 128 KiB it answers 16;
/// at 16 it answers 128, except one window in four (input 3 moves window to window, as a
/// random reader's inputs do), so no two stints form a clean see-saw.
fn knob_reading_model() -> iolearn_ml::ModelFile {
    use iolearn_ml::{DecisionTree, ModelKind, TreeConfig};
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for (other, ra, class) in [
        (500.0, 0.03, 1.0),
        (100.0, 0.03, 0.0),
        (500.0, 0.25, 0.0),
        (100.0, 0.25, 0.0),
    ] {
        x.extend([1000.0, 10.0, 10.0, other, ra]);
        y.push(class);
    }
    let tree = DecisionTree::fit(&x, &y, 5, &TreeConfig::default()).unwrap();
    iolearn_ml::kml::readahead_model(ModelKind::Tree(tree), &[("small", 16), ("vanilla", 128)])
}

/// [`knob_reading_model`] with its training range recorded: input 3 from 100 to 500 (beyond
/// it, with the margin, a window is out of range).
fn knob_reading_model_with_range() -> iolearn_ml::ModelFile {
    let mut model = knob_reading_model();
    model.meta.push(("feature_min".into(), "1000,10,10,100,0.03".into()));
    model.meta.push(("feature_max".into(), "1000,10,10,500,0.25".into()));
    model
}

/// A window of the reader [`knob_reading_model`] decides: input 3 is `other`, input 4 the
/// value in force, `kb`; `outcome` its progress there.
fn reader_window(kb: u64, other: f64, outcome: Outcome) -> WindowFeatures {
    WindowFeatures {
        device: Some([1000.0, 10.0, 10.0, other, kb as f64 * 2.0 / 1024.0, 0.0, 0.0, 0.0, 0.0]),
        outcome: Outcome {
            read_ahead_kb: Some(kb),
            ..outcome
        },
        ..WindowFeatures::default()
    }
}

#[test]
fn a_value_the_guardrail_measured_better_is_not_left_for_the_value_it_came_from() {
    // A model that reads the value in force (input 4, sectors / 1024) and answers 16 KiB at
    // 128 and 128 at 16, as the scale-free model did for a random mapped reader on the kernel,
    // where 16 KiB ran 3.5 times vanilla's pace and the model took it back the next window.
    use iolearn_policy::controller::{KmlController, Scope};
    let model = knob_reading_model();
    // Progress at a value: 16 KiB far better (the gain beyond chance), or as good as vanilla
    // (kept within the noise: nothing proven); or a tick or two of CPU time a window, three
    // times vanilla's at 16 KiB (no count beyond chance), which reads a ninth of the pages per
    // page used (the gain shown by the pages) or as many (nothing proven).
    let by_ops = |good: f64| {
        move |kb: u64, i: u64| Outcome {
            seconds: 1.0,
            ops: Some(if kb == 16 { good } else { 100.0 } + (i % 3) as f64),
            pages_accessed: 100,
            pages_added: 100,
            ..Outcome::default()
        }
    };
    let by_ticks = |thrifty: bool| {
        move |kb: u64, i: u64| Outcome {
            busy_s: Some(if kb == 16 { 0.03 } else { 0.01 } + (i % 2) as f64 * 0.01),
            pages_added: if kb == 16 && thrifty { 300 } else { 2700 },
            ..ticks_and_waste(0.0, 1.0)
        }
    };
    type Progress = Box<dyn Fn(u64, u64) -> Outcome>;
    let cases: Vec<(Progress, bool)> = vec![
        (Box::new(by_ops(300.0)), true),
        (Box::new(by_ops(100.0)), false),
        (Box::new(by_ticks(true)), true),
        (Box::new(by_ticks(false)), false),
    ];
    for (at, want_16) in cases {
        let mut g = Guarded::new(
            Box::new(KmlController::new(model.clone(), Scope::Device).unwrap()),
            Steady::new(2, 3),
            Some(GuardConfig::default()),
            128,
        );
        let mut dev = Device { kb: 128, sets: 0 };
        let mut seen = Vec::new();
        for i in 0..60u64 {
            seen.push(dev.kb);
            let other = if i % 4 == 0 { 100.0 } else { 500.0 };
            g.decide(&reader_window(dev.kb, other, at(dev.kb, i)), &mut dev);
        }
        let at_16 = seen[20..].iter().filter(|&&kb| kb == 16).count();
        if want_16 {
            assert!(at_16 >= 30, "{at_16} of 40 windows at 16 KiB: {seen:?}");
        } else {
            assert!(at_16 <= 10, "{at_16} of 40 windows at 16 KiB: {seen:?}");
        }
    }
}

#[test]
fn a_held_value_whose_windows_leave_the_models_range_is_not_handed_to_the_learner() {
    // As above, but at 16 KiB the reader's inputs leave the model's training range (as fio's
    // three processes did on the kernel), and out of range the online learner decides
    // (`--fallback-online`). A value the guardrail kept with a gain stands against the
    // learner as against a fallback; the learner only watches those windows.
    use iolearn_policy::controller::{KmlController, Scope};
    let model = knob_reading_model_with_range();
    for learner in [false, true] {
        let mut c = KmlController::new(model.clone(), Scope::Device).unwrap();
        if learner {
            c.learner = Some(Online::default());
        }
        let mut g = Guarded::new(Box::new(c), Steady::new(2, 3), Some(GuardConfig::default()), 128);
        let mut dev = Device { kb: 128, sets: 0 };
        let mut seen = Vec::new();
        for i in 0..60u64 {
            seen.push(dev.kb);
            let other = if dev.kb == 16 { 5000.0 } else { 500.0 };
            let progress = Outcome {
                seconds: 1.0,
                ops: Some(if dev.kb == 16 { 300.0 } else { 100.0 } + (i % 3) as f64),
                pages_accessed: 100,
                pages_added: 100,
                ..Outcome::default()
            };
            g.decide(&reader_window(dev.kb, other, progress), &mut dev);
        }
        let at_16 = seen[20..].iter().filter(|&&kb| kb == 16).count();
        assert!(
            at_16 >= 30,
            "learner {learner}: {at_16} of 40 windows at 16 KiB: {seen:?}"
        );
        // Each overruled answer is counted (the tuner's metrics and stop line report it): the
        // fallbacks to the value it came from; with the learner there is no answer to
        // overrule (it watches those windows).
        assert_eq!(
            g.overruled().held > 0,
            !learner,
            "learner {learner}: {:?}",
            g.overruled()
        );
    }
}

#[test]
fn a_model_out_of_its_range_everywhere_leaves_the_learner_to_climb_unheld() {
    // `--fallback-online` on a workload the model never saw: every window is out of its range,
    // so the learner decides them all. Its steps are no decisions of the model's: it climbs to
    // the peak (512 KiB) as it does alone (the test above), and no window counts as a model
    // answer overruled (a learner's step kept with a gain once held the learner's own later
    // windows and counted each as one).
    use iolearn_policy::controller::{KmlController, Scope};
    let mut c = KmlController::new(knob_reading_model_with_range(), Scope::Device).unwrap();
    c.learner = Some(Online::new(OnlineConfig::default()));
    let mut g = Guarded::new(Box::new(c), Steady::new(1, 0), Some(GuardConfig::default()), 128);
    let f = |kb: u64| 100.0 * (1.0 - 0.15 * ((kb as f64).log2() - 9.0).abs()).max(0.05);
    let mut dev = Device { kb: 128, sets: 0 };
    let mut seen = Vec::new();
    for _ in 0..300 {
        seen.push(dev.kb);
        let progress = Outcome {
            seconds: 1.0,
            ops: Some(f(dev.kb)),
            pages_accessed: 100,
            pages_added: dev.kb,
            ..Outcome::default()
        };
        // Input 3 far outside the model's range at every value.
        g.decide(&reader_window(dev.kb, 5000.0, progress), &mut dev);
    }
    let late = &seen[60..];
    let gain = (mean(late, f) - f(128)) / (f(512) - f(128));
    assert!(
        gain >= 0.9,
        "kept {:.0}% of the gain after a minute: {:?}",
        gain * 100.0,
        &seen[..80]
    );
    assert_eq!(
        g.overruled(),
        Default::default(),
        "no answer of the model's was overruled"
    );
}

/// A device shared by processes, as the kernel's knobs behave: a process given a value of its
/// own (its next files, those already open included) keeps it through the device's changes;
/// the others read at the device's value.
#[derive(Default)]
struct SharedDevice {
    kb: u64,
    own: std::collections::BTreeMap<u32, u64>,
}

impl SharedDevice {
    fn of(&self, pid: u32) -> u64 {
        self.own.get(&pid).copied().unwrap_or(self.kb)
    }
}

/// A window of `each` process's pages read (`--progress auto`, split by process) at `kb`.
fn pages_by_process(each: &[(u32, f64)], kb: u64) -> WindowFeatures {
    let total: f64 = each.iter().map(|e| e.1).sum();
    WindowFeatures {
        outcome: Outcome {
            seconds: 1.0,
            ops: Some(total),
            by_process: each.iter().copied().collect(),
            resolution: 1.0,
            pages_accessed: total as u64,
            pages_added: total as u64,
            read_ahead_kb: Some(kb),
            ..Outcome::default()
        },
        ..WindowFeatures::default()
    }
}

impl ReadaheadKnobs for SharedDevice {
    fn device_read_ahead_kb(&self) -> u64 {
        self.kb
    }
    fn set_device_read_ahead_kb(&mut self, kb: u64) {
        self.kb = kb;
    }
    fn file_read_ahead_kb(&self, _: u64) -> u64 {
        self.kb
    }
    fn set_file_read_ahead_kb(&mut self, _: u64, _: u64) {}
    fn set_new_file_read_ahead_kb(&mut self, pid: u32, kb: u64) {
        self.own.insert(pid, kb);
    }
}

#[test]
fn a_process_a_device_decision_costs_goes_back_to_vanilla_alone() {
    // A sequential reader (pid 100) beside two random readers (101, 102), progress counted in
    // pages: one device value of 16 KiB gives the random readers 10% and costs the sequential
    // one 10%. The mean passes (+3%); the sequential reader goes back to vanilla alone, its
    // files at 128 KiB while the device stays at 16 for the others, and a check of vanilla
    // reaches its files too.
    let pages = |pid: u32, kb: u64| match (pid, kb) {
        (100, 16) => 9000.0,
        (100, _) => 10000.0,
        (_, 16) => 1100.0,
        _ => 1000.0,
    };
    let mut g = guarded(Static::new(16));
    let mut k = SharedDevice {
        kb: 128,
        ..Default::default()
    };
    let (mut sequential, mut random, mut counted) = (0.0, 0.0, 0);
    let mut followed = false;
    for i in 0..120 {
        let each: Vec<(u32, f64)> = [100, 101, 102]
            .iter()
            .map(|&pid| (pid, pages(pid, k.of(pid))))
            .collect();
        if i >= 20 {
            sequential += each[0].1;
            random += each[1].1;
            counted += 1;
        }
        if g.arm() == Arm::Vanilla {
            assert!((k.kb, k.of(100)) == (128, 128), "window {i}: vanilla everywhere");
        }
        g.decide(&pages_by_process(&each, k.kb), &mut k);
        // Back from its backoff, the process follows the device's value again.
        followed |= i > 40 && g.arm() == Arm::Tuned && k.of(100) == 16;
    }
    let ev = g.take_events();
    let alone: Vec<_> = ev
        .iter()
        .filter(|e| e.kind == GuardEventKind::ProcessReverted)
        .collect();
    assert!(!alone.is_empty() && alone.iter().all(|e| e.pid == Some(100)), "{ev:?}");
    assert!(
        alone[0].reason.contains("while the mean passed"),
        "{:?}",
        alone[0].reason
    );
    assert!(ev.iter().all(|e| e.kind != GuardEventKind::Reverted), "{ev:?}");
    assert!(
        followed,
        "the process is tried again at the device's value after its backoff"
    );
    let (sequential, random) = (sequential / counted as f64, random / counted as f64);
    assert!(
        sequential >= 9800.0,
        "the sequential reader at {sequential:.0} pages/s of its 10000"
    );
    assert!(
        random >= 1070.0,
        "the random readers keep the gain: {random:.0} of 1100"
    );
}

#[test]
fn processes_are_compared_only_where_watched_through_both_blocks() {
    // Pages read by process: two long-lived readers, and short-lived ones (a grep's) that
    // come and go. Only the two are compared; one watched throughout that stalled is, at 0.
    let window = |each: &[(u32, f64)]| Outcome {
        seconds: 1.0,
        ops: Some(each.iter().map(|e| e.1).sum()),
        by_process: each.iter().copied().collect(),
        resolution: 1.0,
        ..Outcome::default()
    };
    let vanilla = [
        window(&[(1, 1000.0), (2, 500.0), (3, 400.0)]),
        window(&[(1, 1000.0), (2, 500.0), (4, 400.0)]),
    ];
    let tuned = [
        window(&[(1, 1100.0), (2, 550.0), (5, 10.0)]),
        window(&[(1, 1100.0), (2, 550.0)]),
    ];
    let r = Outcome::relative_progress(&tuned, &vanilla).unwrap();
    assert_eq!(r.ratios.iter().map(|x| x.0).collect::<Vec<_>>(), [1, 2]);
    assert!((r.mean - 1.1).abs() < 1e-9, "{r:?}");
    let stalled = [window(&[(1, 1100.0), (2, 0.0)]), window(&[(1, 1100.0), (2, 0.0)])];
    let r = Outcome::relative_progress(&stalled, &vanilla).unwrap();
    assert!((r.mean - 0.55).abs() < 1e-9, "{r:?}");
    // One process left to compare: the summed comparison's case.
    let one = [window(&[(1, 1100.0)]), window(&[(1, 1100.0), (2, 550.0)])];
    assert!(Outcome::relative_progress(&one, &vanilla).is_none());
}

#[test]
fn a_kept_value_that_falls_clearly_below_vanilla_later_is_checked_at_once() {
    // 16 KiB does as well as vanilla for its first block (kept), then 20% worse from window 10
    // on (a sequential reader's second pass over its file): a whole block clearly below the
    // vanilla block that judged it sends the guardrail to measure vanilla again, which
    // confirms the loss, long before the periodic check (16 windows after vanilla's block).
    let f = |kb: u64, i: usize| if kb == 16 && i >= 10 { 24_000.0 } else { 30_000.0 };
    let mut g = guarded(Static::new(16));
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run_by_window(&mut g, &mut dev, 30, f);
    let ev = g.take_events();
    assert_eq!(ev.first().map(|e| e.kind), Some(GuardEventKind::Kept), "{ev:?}");
    let reverted = ev
        .iter()
        .find(|e| e.kind == GuardEventKind::Reverted)
        .expect("reverted");
    assert!(reverted.window <= 18, "{ev:?}");
    assert!(seen[19..].iter().all(|&kb| kb == 128), "{seen:?}");

    // A workload that slows for every value is no loss: vanilla measured again is as slow,
    // and the value stays.
    let slower = |_: u64, i: usize| if i >= 10 { 24_000.0 } else { 30_000.0 };
    let mut g = guarded(Static::new(16));
    let mut dev = Device { kb: 128, sets: 0 };
    let seen = run_by_window(&mut g, &mut dev, 30, slower);
    let ev = g.take_events();
    assert!(ev.iter().all(|e| e.kind == GuardEventKind::Kept), "{ev:?}");
    assert!(seen[20..].iter().all(|&kb| kb == 16), "{seen:?}");
}

#[test]
fn a_process_still_down_once_held_back_from_a_device_value_brings_the_value_back() {
    // The sequential reader (pid 100) pays for the device's 16 KiB through the others' reads
    // (they share the device's budget), not through its own files' value: held back at vanilla
    // alone it stays 10% down, and the decision goes as a whole, the block after the hold.
    let mut g = guarded(Static::new(16));
    let mut k = SharedDevice {
        kb: 128,
        ..Default::default()
    };
    let mut windows_at_16 = 0;
    let mut after = Vec::new();
    for i in 0..60 {
        let at_16 = k.kb == 16;
        windows_at_16 += usize::from(i >= 4 && at_16);
        let each: Vec<(u32, f64)> = [100, 101, 102]
            .iter()
            .map(|&pid| match (pid, at_16, k.of(pid)) {
                (100, true, _) => (pid, 9000.0),
                (100, false, _) => (pid, 10000.0),
                (_, _, 16) => (pid, 1100.0),
                _ => (pid, 1000.0),
            })
            .collect();
        g.decide(&pages_by_process(&each, k.kb), &mut k);
        after.push(k.kb);
    }
    let ev = g.take_events();
    let alone = ev
        .iter()
        .position(|e| e.kind == GuardEventKind::ProcessReverted)
        .expect("held alone");
    let whole = ev
        .iter()
        .position(|e| e.kind == GuardEventKind::Reverted)
        .expect("reverted");
    assert!(alone < whole, "{ev:?}");
    assert!(
        ev[whole].reason.contains("though held at vanilla"),
        "{}",
        ev[whole].reason
    );
    assert!(ev[whole].window <= ev[alone].window + 6, "{ev:?}");
    // Logged as reverted, and reverted: vanilla from the verdict on.
    assert_eq!(after[ev[whole].window as usize], 128, "{after:?} {ev:?}");
    // Tried again after each backoff, which doubles: the reverts come further and further apart.
    let reverts: Vec<u64> = ev
        .iter()
        .filter(|e| e.kind == GuardEventKind::Reverted)
        .map(|e| e.window)
        .collect();
    assert!(
        reverts.len() >= 2 && reverts.windows(3).all(|w| w[2] - w[1] > w[1] - w[0]),
        "{reverts:?}"
    );
    assert!(windows_at_16 < 40, "16 KiB for {windows_at_16} of 56 windows: {ev:?}");
}

#[test]
fn processes_that_exited_are_no_shortfall_of_a_new_value() {
    // Pages read by process keep no population: the two readers of vanilla's block exit and
    // two others read as much under the new value. They are not compared with each other, and
    // the ones gone did not read nothing: the value is judged on the sum, as good as vanilla.
    let mut g = guarded(Static::new(64));
    let mut dev = Device { kb: 128, sets: 0 };
    let mut seen = Vec::new();
    for i in 0..15u32 {
        seen.push(dev.kb);
        let pids = if i < 5 { [1, 2] } else { [3, 4] };
        let each: Vec<(u32, f64)> = pids.iter().map(|&p| (p, 1000.0)).collect();
        g.decide(&pages_by_process(&each, dev.kb), &mut dev);
    }
    let ev = g.take_events();
    assert!(
        !ev.is_empty() && ev.iter().all(|e| e.kind == GuardEventKind::Kept),
        "{ev:?}"
    );
    // No second look at vanilla either: nothing was below it.
    assert_eq!(seen[5..], [64; 10], "{seen:?}");
}

/// A per-file controller that keeps changing its mind: file 1 at 16 KiB, file 2 at 16 KiB and
/// 1024 in turn, three windows each (KML's per-file model on a workload it never saw).
struct SeeSawFiles(u64);

impl ReadaheadController for SeeSawFiles {
    fn name(&self) -> String {
        "see-saw-files".into()
    }
    fn decide(&mut self, _: &WindowFeatures, knobs: &mut dyn ReadaheadKnobs) {
        self.0 += 1;
        knobs.set_file_read_ahead_kb(1, 16);
        knobs.set_file_read_ahead_kb(2, if (self.0 / 3).is_multiple_of(2) { 16 } else { 1024 });
    }
}

#[test]
fn a_per_file_decision_that_moved_on_during_a_check_and_lost_is_backed_off() {
    // Every window its per-file values differ from the last, so when vanilla measured again
    // confirms the loss of its first windows, "the controller moved on": its values are none
    // of the device's to back off one by one, and the controller as a whole is held back (it
    // went back into force at once, and lost a second time, on the kernel: rangescan).
    let mut g = guarded(SeeSawFiles(0));
    let mut k = Files::default();
    let mut seen = Vec::new();
    for i in 0..30 {
        let tuned = k.file_read_ahead_kb(1) != 128 || k.file_read_ahead_kb(2) != 128;
        seen.push(tuned);
        // A workload whose throughput rises as its cache fills; 7% less off vanilla.
        let v = 14_000.0 + 154.0 * i as f64;
        let w = WindowFeatures {
            outcome: Outcome {
                seconds: 1.0,
                ops: Some(if tuned { 0.93 * v } else { v }),
                pages_accessed: 100,
                pages_added: 10,
                ..Outcome::default()
            },
            ..WindowFeatures::default()
        };
        g.decide(&w, &mut k);
    }
    // In force from window 4; file 2 lowered back to 16 after window 5, and that window below
    // vanilla's rising line: vanilla measured again (windows 7-9) confirms it while the
    // controller has moved on (file 2 at 1024): reverted once, and not put back within the
    // backoff.
    let ev = g.take_events();
    let tuned: Vec<usize> = seen.iter().enumerate().filter(|(_, &t)| t).map(|(i, _)| i).collect();
    assert_eq!(tuned, [4, 5, 6], "{ev:?}");
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!((ev[0].kind, ev[0].window), (GuardEventKind::Reverted, 10), "{ev:?}");
}

/// A device with one file whose own value, where it has one, is what its reads get.
#[derive(Default)]
struct OneFile {
    kb: u64,
    file: Option<u64>,
}

impl ReadaheadKnobs for OneFile {
    fn device_read_ahead_kb(&self) -> u64 {
        self.kb
    }
    fn set_device_read_ahead_kb(&mut self, kb: u64) {
        self.kb = kb;
    }
    fn file_read_ahead_kb(&self, _: u64) -> u64 {
        self.file.unwrap_or(self.kb)
    }
    fn set_file_read_ahead_kb(&mut self, _: u64, kb: u64) {
        self.file = Some(kb);
    }
}

/// Sets the file to 16 or 24 KiB until that is taken back, then asks for 1024 KiB on the device and
/// the file (as a per-file model with the device's controller beside it does).
#[derive(Default)]
struct FileThenDevice {
    taken_back: Vec<u64>,
    window: u64,
}

impl ReadaheadController for FileThenDevice {
    fn name(&self) -> String {
        "file-then-device".into()
    }
    fn decide(&mut self, _: &WindowFeatures, knobs: &mut dyn ReadaheadKnobs) {
        // Before: 16 or 24 KiB in turn (a per-file model answering each new file anew, as on
        // the kernel's range scan: the guardrail judges such values as a whole).
        self.window += 1;
        let kb = if !self.taken_back.is_empty() {
            1024
        } else {
            [16, 24, 32, 48][self.window as usize % 4]
        };
        if self.taken_back.len() == 1 && knobs.device_read_ahead_kb() != kb {
            knobs.set_device_read_ahead_kb(kb);
        }
        if knobs.file_read_ahead_kb(1) != kb {
            knobs.set_file_read_ahead_kb(1, kb);
        }
    }
    fn taken_back(&mut self, kb: u64, _: u64, _: bool) {
        self.taken_back.push(kb);
    }
}

#[test]
fn a_device_value_asked_for_after_a_files_values_were_taken_back_is_not_held_with_them() {
    // The file's values change every window and lose 15%: judged as a whole and taken back
    // (told as the device's vanilla), the controller held back as a whole. A device value it
    // asks for next is another decision: in force after vanilla's block, not after the
    // backoff that holds the files' values (window 38 then).
    let mut g = Guarded::new(
        Box::new(FileThenDevice::default()),
        Steady::new(1, 0),
        Some(GuardConfig::default()),
        128,
    );
    let mut dev = OneFile { kb: 128, file: None };
    let mut at_1024 = None;
    for w in 0..60 {
        let f = dev.file_read_ahead_kb(1);
        // Windows that spread by a tenth either way, so a loss of 15% is not clear in one.
        let base = if w % 2 == 0 { 110.0 } else { 90.0 };
        let ops = base
            * match f {
                1024 => 1.5,
                128 => 1.0,
                _ => 0.85,
            };
        let win = WindowFeatures {
            outcome: Outcome {
                seconds: 1.0,
                ops: Some(ops),
                read_ahead_kb: Some(dev.kb),
                pages_accessed: 100,
                pages_added: f,
                ..Outcome::default()
            },
            ..WindowFeatures::default()
        };
        g.decide(&win, &mut dev);
        if dev.kb == 1024 && at_1024.is_none() {
            at_1024 = Some(w);
        }
    }
    let evs = g.take_events();
    let reverted = evs
        .iter()
        .find(|e| e.kind == GuardEventKind::Reverted)
        .map(|e| e.window);
    let (r, a) = (
        reverted.expect("the file's value taken back"),
        at_1024.expect("1024 KiB in force"),
    );
    assert!(a <= r + 6, "taken back at window {r}, 1024 KiB in force at {a}");
}
