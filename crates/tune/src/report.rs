//! What the tuner tells the world: structured logs on stderr and Prometheus metrics over HTTP.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// Log lines as `key=value` text or JSON objects, one per line.
#[derive(Debug, Clone, Copy)]
pub struct Logger {
    /// JSON lines instead of text.
    pub json: bool,
    /// Print debug events too.
    pub verbose: bool,
}

impl Logger {
    /// Log `event` at `level` with `fields`.
    pub fn log(&self, level: &str, event: &str, fields: &[(&str, String)]) {
        if level == "debug" && !self.verbose {
            return;
        }
        let ts = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let line = if self.json {
            let mut s = format!("{{\"ts\":{ts:.3},\"level\":\"{level}\",\"event\":\"{event}\"");
            for (k, v) in fields {
                let quoted = v.parse::<f64>().is_err();
                if quoted {
                    s += &format!(",\"{k}\":\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""));
                } else {
                    s += &format!(",\"{k}\":{v}");
                }
            }
            s + "}"
        } else {
            let mut s = format!("ts={ts:.3} level={level} event={event}");
            for (k, v) in fields {
                if v.contains(' ') || v.is_empty() {
                    s += &format!(" {k}={v:?}");
                } else {
                    s += &format!(" {k}={v}");
                }
            }
            s
        };
        eprintln!("{line}");
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
    /// Time deciding (features to classes), total and worst, ns.
    pub decide_ns_total: u64,
    /// Worst decision time.
    pub decide_ns_max: u64,
    /// Time acting (sysfs writes, fadvise), total, ns.
    pub act_ns_total: u64,
    /// Events lost by the probes.
    pub lost_events: u64,
    /// Pages inserted, as the probes saw them.
    pub pages_added: u64,
    /// Page accesses, as the probes saw them.
    pub pages_accessed: u64,
    /// Errors (a process gone mid-change...).
    pub errors: u64,
    /// The device's readahead now.
    pub device_read_ahead_kb: u64,
    /// The last window's device features.
    pub features: [f64; 5],
    /// Files seen in the last window.
    pub files: u64,
}

/// KML's feature names, for the `feature` gauge.
pub const FEATURE_NAMES: [&str; 5] = [
    "n_transactions",
    "page_offset_var_pop_over_range",
    "page_offset_var_sample_over_range",
    "mean_abs_page_delta",
    "ra_sectors_over_1024",
];

impl Metrics {
    /// Prometheus text exposition.
    pub fn render(&self, device: &str) -> String {
        let d = format!("device=\"{device}\"");
        let mut s = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, lines: Vec<(String, String)>| {
            s += &format!("# HELP iolearn_{name} {help}\n# TYPE iolearn_{name} {kind}\n");
            for (labels, v) in lines {
                s += &format!("iolearn_{name}{{{labels}}} {v}\n");
            }
        };
        metric(
            "windows_total",
            "counter",
            "Decision windows closed.",
            vec![(d.clone(), self.windows.to_string())],
        );
        metric(
            "decisions_total",
            "counter",
            "Decisions by predicted class.",
            self.decisions
                .iter()
                .map(|(c, n)| (format!("{d},class=\"{c}\""), n.to_string()))
                .collect(),
        );
        metric(
            "changes_total",
            "counter",
            "Readahead changes applied.",
            vec![(d.clone(), self.changes.to_string())],
        );
        metric(
            "held_back_total",
            "counter",
            "Changes held back by hysteresis or the rate limit.",
            vec![(d.clone(), self.held_back.to_string())],
        );
        metric(
            "fallbacks_total",
            "counter",
            "Decisions that fell back to the default (input out of the training range).",
            vec![(d.clone(), self.fallbacks.to_string())],
        );
        metric(
            "decide_seconds_total",
            "counter",
            "Time spent deciding (inference).",
            vec![(d.clone(), format!("{:.9}", self.decide_ns_total as f64 / 1e9))],
        );
        metric(
            "decide_seconds_max",
            "gauge",
            "Longest decision.",
            vec![(d.clone(), format!("{:.9}", self.decide_ns_max as f64 / 1e9))],
        );
        metric(
            "act_seconds_total",
            "counter",
            "Time spent acting (sysfs, fadvise).",
            vec![(d.clone(), format!("{:.9}", self.act_ns_total as f64 / 1e9))],
        );
        metric(
            "lost_events_total",
            "counter",
            "Probe events lost.",
            vec![(d.clone(), self.lost_events.to_string())],
        );
        metric(
            "pages_added_total",
            "counter",
            "Page-cache insertions seen.",
            vec![(d.clone(), self.pages_added.to_string())],
        );
        metric(
            "pages_accessed_total",
            "counter",
            "Page accesses seen.",
            vec![(d.clone(), self.pages_accessed.to_string())],
        );
        metric(
            "errors_total",
            "counter",
            "Actions that failed.",
            vec![(d.clone(), self.errors.to_string())],
        );
        metric(
            "read_ahead_kb",
            "gauge",
            "The device's readahead.",
            vec![(d.clone(), self.device_read_ahead_kb.to_string())],
        );
        metric(
            "files",
            "gauge",
            "Files seen in the last window.",
            vec![(d.clone(), self.files.to_string())],
        );
        metric(
            "feature",
            "gauge",
            "KML's features of the last window (device stream).",
            FEATURE_NAMES
                .iter()
                .zip(self.features)
                .map(|(n, v)| (format!("{d},name=\"{n}\""), format!("{v}")))
                .collect(),
        );
        s
    }
}

/// Serve `page` at `GET /metrics` on `addr` from a background thread; returns the bound
/// address (port 0 picks one).
pub fn serve_metrics(addr: &str, page: Arc<Mutex<String>>) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    std::thread::Builder::new().name("metrics".into()).spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut c) = conn else { continue };
            let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(2)));
            // Read the request head (a scraper sends a few hundred bytes); closing with
            // unread bytes would reset the connection before the client reads the reply.
            let mut buf = Vec::new();
            let mut chunk = [0u8; 1024];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16 << 10 {
                match c.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let req = String::from_utf8_lossy(&buf);
            let reply = if req.starts_with("GET /metrics ") || req.starts_with("GET / ") {
                let body = page.lock().map(|p| p.clone()).unwrap_or_default();
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
            } else {
                "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string()
            };
            let _ = c.write_all(reply.as_bytes());
            let _ = c.shutdown(std::net::Shutdown::Write);
        }
    })?;
    Ok(local)
}
