//! What the tuner tells the world: structured logs on stderr and Prometheus metrics over HTTP.

use iolearn_policy::controller::Overruled;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

/// How to log: `key=value` text or JSON lines on stderr.
#[derive(Debug, Clone, Copy)]
pub struct Logger {
    /// JSON lines instead of text.
    pub json: bool,
    /// Print debug events (one per window) too.
    pub verbose: bool,
}

impl Logger {
    /// Install this process's log output (`tracing-subscriber` on stderr). Events are
    /// `tracing` events with an `event` field naming what happened; JSON lines carry every
    /// field at the top level. Only the first call in a process takes effect.
    pub fn install(&self) {
        let level = if self.verbose {
            tracing::level_filters::LevelFilter::DEBUG
        } else {
            tracing::level_filters::LevelFilter::INFO
        };
        let b = tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_max_level(level)
            .with_target(false)
            .with_ansi(std::io::stderr().is_terminal());
        let _ = if self.json {
            b.json()
                .flatten_event(true)
                .with_current_span(false)
                .with_span_list(false)
                .try_init()
        } else {
            b.try_init()
        };
    }
}

/// The tuner's counters and gauges.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    /// Windows closed.
    pub windows: u64,
    /// Decisions by class label (`fallback` for out-of-range inputs).
    pub decisions: BTreeMap<String, u64>,
    /// Readahead changes applied (device and files).
    pub changes: u64,
    /// Changes held back by hysteresis or the rate limit.
    pub held_back: u64,
    /// Decisions that fell back to the default (input out of the training range).
    pub fallbacks: u64,
    /// The model's answers the controller overruled on its own, as it counts them.
    pub overruled: Overruled,
    /// Time deciding (features to classes), total and worst, ns.
    pub decide_ns_total: u64,
    /// Worst decision time.
    pub decide_ns_max: u64,
    /// Time acting (sysfs writes, fadvise), total, ns.
    pub act_ns_total: u64,
    /// Events lost by the probes.
    pub lost_events: u64,
    /// Pages inserted over the windows (a sampled window's count scaled to the whole window).
    pub pages_added: u64,
    /// Page accesses over the windows (likewise).
    pub pages_accessed: u64,
    /// Pages the watched processes' reads returned (likewise; only with `--progress auto`).
    pub pages_read: u64,
    /// Windows whose progress was the pages read (`--progress auto`), not user time.
    pub read_progress_windows: u64,
    /// Whole windows measured by the application's own count of operations (`--progress
    /// ops:PATH`).
    pub ops_progress_windows: u64,
    /// Windows observed only in part (all cache hits before them, or the tuner resting),
    /// their counts scaled.
    pub sampled_windows: u64,
    /// Of those, the windows watched in part because the tuner rested (nothing to do for a
    /// while, [`crate::sampling`]).
    pub rested_windows: u64,
    /// Slices that showed the workload changed and woke a resting tuner.
    pub wakes: u64,
    /// Errors (a process gone mid-change...).
    pub errors: u64,
    /// The device's readahead now.
    pub device_read_ahead_kb: u64,
    /// The last window's device features.
    pub features: [f64; 5],
    /// Files seen in the last window.
    pub files: u64,
    /// Decisions the guardrail kept after measuring them against vanilla.
    pub guard_kept: u64,
    /// Decisions the guardrail reverted to vanilla.
    pub guard_reverted: u64,
    /// Windows the guardrail held vanilla (its measurements and backoffs).
    pub guard_vanilla_windows: u64,
    /// Times the guardrail put vanilla back because the workload's progress went unmeasured.
    pub guard_unmeasured: u64,
}

/// KML's feature names, for the `feature` gauge.
pub const FEATURE_NAMES: [&str; 5] = [
    "n_transactions",
    "page_offset_var_pop_over_range",
    "page_offset_var_sample_over_range",
    "mean_abs_page_delta",
    "ra_sectors_over_1024",
];

/// A labelled gauge family of floats.
type FloatGauges = Family<Vec<(String, String)>, Gauge<f64, AtomicU64>>;

impl Metrics {
    /// The metrics in the OpenMetrics text format (`prometheus-client`).
    pub fn render(&self, device: &str) -> String {
        let mut r = Registry::with_prefix("iolearn");
        let d = || vec![("device".to_string(), device.to_string())];
        let with = |k: &str, v: &str| {
            let mut l = d();
            l.push((k.to_string(), v.to_string()));
            l
        };
        let counter = |r: &mut Registry, name: &str, help: &str, v: u64| {
            let f = Family::<Vec<(String, String)>, Counter>::default();
            f.get_or_create(&d()).inc_by(v);
            r.register(name, help, f);
        };
        let gauge = |r: &mut Registry, name: &str, help: &str, v: f64| {
            let f = FloatGauges::default();
            f.get_or_create(&d()).set(v);
            r.register(name, help, f);
        };
        counter(&mut r, "windows", "Decision windows closed", self.windows);
        let decisions = Family::<Vec<(String, String)>, Counter>::default();
        for (class, n) in &self.decisions {
            decisions.get_or_create(&with("class", class)).inc_by(*n);
        }
        r.register("decisions", "Decisions by predicted class", decisions);
        counter(&mut r, "changes", "Readahead changes applied", self.changes);
        counter(
            &mut r,
            "held_back",
            "Changes held back by hysteresis or the rate limit",
            self.held_back,
        );
        counter(
            &mut r,
            "fallbacks",
            "Decisions that fell back to the default (input out of the training range)",
            self.fallbacks,
        );
        counter(
            &mut r,
            "held_answers",
            "Model answers of the value a decision came from, overruled: the guardrail measured the decision better",
            self.overruled.held,
        );
        counter(
            &mut r,
            "settled_seesaws",
            "See-saws settled: the model answered each of two values with the other",
            self.overruled.settled,
        );
        counter(
            &mut r,
            "spared_lowerings",
            "Device values below vanilla not set: sequential streams carried a third of the pages",
            self.overruled.spared_lowerings,
        );
        counter(
            &mut r,
            "spared_raises",
            "Device values above vanilla not set: processes that do not scan shared the device with one that does",
            self.overruled.spared_raises,
        );
        counter(
            &mut r,
            "stayed_alike",
            "Moves not made: the model scored its answer alike with the value in force",
            self.overruled.stayed_alike,
        );
        counter(
            &mut r,
            "tried_alike",
            "Values tried from vanilla that the model scored alike with it",
            self.overruled.tried_alike,
        );
        counter(
            &mut r,
            "refined",
            "Values of the model's the guardrail kept with a gain, handed to the online learner to refine",
            self.overruled.refined,
        );
        counter(
            &mut r,
            "few_event_lowerings",
            "Per-file lowerings not made: the window saw the file (or the process's files, for its next ones) in too few events to judge",
            self.overruled.few_event_lowerings,
        );
        let seconds = |ns: u64| ConstCounter::new(ns as f64 / 1e9);
        r.register(
            "decide_seconds",
            "Time spent deciding (inference)",
            seconds(self.decide_ns_total),
        );
        r.register(
            "act_seconds",
            "Time spent acting (sysfs, fadvise)",
            seconds(self.act_ns_total),
        );
        r.register(
            "decide_seconds_max",
            "Longest decision",
            ConstGauge::new(self.decide_ns_max as f64 / 1e9),
        );
        counter(&mut r, "lost_events", "Probe events lost", self.lost_events);
        counter(
            &mut r,
            "pages_added",
            "Page-cache insertions (estimated from the watched share of sampled windows)",
            self.pages_added,
        );
        counter(
            &mut r,
            "pages_accessed",
            "Page accesses (estimated from the watched share of sampled windows)",
            self.pages_accessed,
        );
        counter(
            &mut r,
            "pages_read",
            "Pages the watched processes' reads returned (with --progress auto; sampled windows estimated)",
            self.pages_read,
        );
        counter(
            &mut r,
            "read_progress_windows",
            "Windows judged by the pages read rather than user CPU time (--progress auto)",
            self.read_progress_windows,
        );
        counter(
            &mut r,
            "ops_progress_windows",
            "Whole windows measured by the application's own count of operations (--progress ops:PATH)",
            self.ops_progress_windows,
        );
        counter(
            &mut r,
            "sampled_windows",
            "Windows observed in part (after a window of cache hits, or resting)",
            self.sampled_windows,
        );
        counter(
            &mut r,
            "rested_windows",
            "Windows observed in part because the tuner had nothing to do",
            self.rested_windows,
        );
        counter(&mut r, "wakes", "Slices whose rates woke a resting tuner", self.wakes);
        counter(&mut r, "errors", "Actions that failed", self.errors);
        counter(&mut r, "guard_kept", "Decisions kept by the guardrail", self.guard_kept);
        counter(
            &mut r,
            "guard_reverted",
            "Decisions the guardrail reverted to vanilla",
            self.guard_reverted,
        );
        counter(
            &mut r,
            "guard_vanilla_windows",
            "Windows the guardrail held vanilla",
            self.guard_vanilla_windows,
        );
        counter(
            &mut r,
            "guard_unmeasured",
            "Times the guardrail put vanilla back because progress went unmeasured",
            self.guard_unmeasured,
        );
        gauge(
            &mut r,
            "read_ahead_kb",
            "The device's readahead",
            self.device_read_ahead_kb as f64,
        );
        gauge(&mut r, "files", "Files seen in the last window", self.files as f64);
        let features = FloatGauges::default();
        for (n, v) in FEATURE_NAMES.iter().zip(self.features) {
            features.get_or_create(&with("name", n)).set(v);
        }
        r.register("feature", "KML's features of the last window (device stream)", features);
        let mut s = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut s, &r);
        s
    }
}

/// The content type of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Serve `page` at `GET /metrics` (and `/`) on `addr` from a background thread (`tiny_http`);
/// returns the bound address (port 0 picks one).
pub fn serve_metrics(addr: &str, page: Arc<Mutex<String>>) -> std::io::Result<SocketAddr> {
    let server = tiny_http::Server::http(addr).map_err(std::io::Error::other)?;
    let local = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| std::io::Error::other("not an IP address"))?;
    let header = tiny_http::Header::from_bytes("Content-Type", CONTENT_TYPE).expect("a valid header");
    std::thread::Builder::new().name("metrics".into()).spawn(move || {
        for req in server.incoming_requests() {
            let path = req.url().split('?').next().unwrap_or("");
            let reply = if *req.method() == tiny_http::Method::Get && (path == "/metrics" || path == "/") {
                let body = page.lock().map(|p| p.clone()).unwrap_or_default();
                tiny_http::Response::from_string(body).with_header(header.clone())
            } else {
                tiny_http::Response::from_string("not found\n").with_status_code(404)
            };
            let _ = req.respond(reply);
        }
    })?;
    Ok(local)
}

#[cfg(test)]
mod tests {
    use super::{Metrics, Overruled};

    #[test]
    fn every_count_of_the_stop_line_is_a_metric_of_the_device() {
        let m = Metrics {
            fallbacks: 3,
            overruled: Overruled {
                held: 5,
                settled: 2,
                spared_lowerings: 4,
                spared_raises: 6,
                stayed_alike: 7,
                tried_alike: 8,
                refined: 9,
                few_event_lowerings: 10,
            },
            ..Metrics::default()
        };
        let page = m.render("loop7");
        for line in [
            "iolearn_fallbacks_total{device=\"loop7\"} 3",
            "iolearn_held_answers_total{device=\"loop7\"} 5",
            "iolearn_settled_seesaws_total{device=\"loop7\"} 2",
            "iolearn_spared_lowerings_total{device=\"loop7\"} 4",
            "iolearn_spared_raises_total{device=\"loop7\"} 6",
            "iolearn_stayed_alike_total{device=\"loop7\"} 7",
            "iolearn_tried_alike_total{device=\"loop7\"} 8",
            "iolearn_refined_total{device=\"loop7\"} 9",
            "iolearn_few_event_lowerings_total{device=\"loop7\"} 10",
        ] {
            assert!(page.lines().any(|l| l == line), "{line} not in:\n{page}");
        }
    }
}
