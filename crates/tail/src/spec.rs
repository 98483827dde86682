//! Policies by name: `ADMISSION[+CLIENT]`, the same text on the command line, in Python and
//! in result tables.
//!
//! Admission (at each replica, before the read enters the device queue):
//! `base` (serve all), `random=SHARE`, `heursim=PAGES`, `heuradv=MAX,SHORT,SLOW_US`,
//! `oracle=SLOW_US` (perfect predictor), `mittssd=DEADLINE_US` (MittSSD from its own books:
//! the page map, the NAND commands the FTL issued, the data sheet's times, the completions),
//! `mittssd-wb=DEADLINE_US` (the same rule with the simulator's true clocks: a limit),
//! `mittnoop=DEADLINE_US` (disks),
//! `model=PATH` (a trained model
//! file; its schema and meta say how to use it; `{r}` in PATH: one model per replica, the
//! replica's number in place of `{r}`).
//! Client (what the application does besides): `hedge=AFTER_US[/BUDGET]` (a duplicate to
//! another replica if no answer by then; at most a BUDGET share of reads),
//! `hedge=auto:AFTER_US/BUDGET` (never before AFTER_US, later when more than a BUDGET share of
//! recent reads are slower: at their `1 - BUDGET` quantile), `clone` (two copies
//! at once), `timeout=AFTER_US` (give up and retry elsewhere). `+rank` sends failovers and
//! hedges to the replica the policy scores least slow; `+cache` wraps the admission in
//! MittCache (reads resident in the page cache are always served); `+books=US` also refuses
//! reads MittSSD's books predict slower than US (SSDs that share their page map).

use iolearn_ml::ModelFile;
use iolearn_policy::admission::{
    Admission, AdmitAll, EitherRefuses, FeatureSet, HeurAdv, Learned, MittCache, MittNoop, MittSsd, Oracle, PerReplica,
    QueueLimit, RandomRevoke, Rule,
};
use iolearn_policy::mittsched::SeekProfile;
use iolearn_policy::ssdbooks::{MittSsdBooks, SsdProfile};
use std::path::PathBuf;

/// In a model path, the replica's number: one model per replica.
const REPLICA: &str = "{r}";

/// What the client does besides asking the replicas.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Client {
    /// Send once; fail over on EBUSY.
    Direct,
    /// After `after_ns` without an answer, send a duplicate to another replica; first answer
    /// wins. With a `budget`, at most that share of reads gets a duplicate over time (a token
    /// bucket, like the retry budgets of RPC stacks): hedging cannot run away when the tail
    /// grows.
    Hedge {
        /// Delay, ns (adaptive: the delay until enough reads have completed).
        after_ns: u64,
        /// Largest share of reads hedged (1.0: no limit).
        budget: f64,
        /// `hedge=auto:US/BUDGET`: the delay follows the client's recent read latencies, at
        /// their `1 - budget` quantile when that is later than `after_ns` ([`HedgeDelay`]):
        /// reads slower than `after_ns` are hedged, the slowest first when they outnumber the
        /// budget, where a fixed delay tuned on one half of a trace spends its budget early
        /// on a half with more slow reads and then leaves the slowest unhedged.
        adaptive: bool,
    },
    /// Send to two replicas at once; first answer wins.
    Clone,
    /// After `after_ns` without an answer, abandon the read and retry on another replica.
    Timeout {
        /// Delay, ns.
        after_ns: u64,
    },
}

/// A parsed policy.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicySpec {
    /// The admission part.
    pub admission: AdmissionSpec,
    /// The client part.
    pub client: Client,
    /// A decision-rule override for a model (e.g. a tuned threshold), `model=PATH@above_us=T`.
    pub rule: Option<Rule>,
    /// `+rank`: failovers and hedges go to the replica the policy scores least slow (else a
    /// random other replica).
    pub rank: bool,
    /// `+cache`: MittCache around the admission (reads resident in the replica's page cache are
    /// always served).
    pub cache: bool,
    /// `+books=US`: also refuse reads MittSSD's books predict slower than this (us).
    pub books_us: Option<f64>,
}

/// The admission part of a [`PolicySpec`].
#[derive(Debug, Clone, PartialEq)]
pub enum AdmissionSpec {
    /// Serve everything.
    Base,
    /// Refuse a random share.
    Random(f64),
    /// HeurSim.
    HeurSim(u32),
    /// HeurAdv (max pages, short pages, slow us).
    HeurAdv(u32, u32, u32),
    /// Perfect predictor, slow above (us).
    Oracle(f64),
    /// MittSSD from its own books, deadline (us).
    MittSsd(f64),
    /// MittSSD reading the simulator's clocks, deadline (us).
    MittSsdWhiteBox(f64),
    /// MittNOOP, deadline (us).
    MittNoop(f64),
    /// A model file.
    Model(PathBuf),
}

/// What the white-box predictors know of the drive: MittSSD's timing of an SSD, and
/// MittNOOP's seek profile of a disk (measured by probing it).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DeviceTiming {
    /// A disk's seek profile (MittNOOP); `None` for an SSD.
    pub profile: Option<SeekProfile>,
    /// Page read, ns.
    pub read_ns: u64,
    /// Page transfer, ns.
    pub transfer_ns: u64,
    /// Controller overhead, ns.
    pub controller_ns: u64,
    /// An SSD's data sheet (MittSSD's books); `None` for a disk.
    pub ssd: Option<SsdProfile>,
}

impl DeviceTiming {
    /// The SSDs' data sheet, for `what` (a policy that keeps MittSSD's books); an error naming
    /// it where the replicas do not share their page map and NAND commands.
    fn ssd_for(&self, what: &str) -> Result<SsdProfile, String> {
        self.ssd.ok_or_else(|| {
            format!("{what} needs SSDs that share their page map and NAND commands (the simulator's): these replicas do not")
        })
    }
}

fn num<T: std::str::FromStr>(what: &str, v: &str) -> Result<T, String> {
    v.trim()
        .parse::<T>()
        .map_err(|_| format!("{what}: {} is not a number", q(v)))
}

/// A time in microseconds, 0 to an hour (so that its nanoseconds fit any sum).
fn us(what: &str, v: &str) -> Result<f64, String> {
    let x: f64 = num(what, v)?;
    if x.is_finite() && (0.0..=3.6e9).contains(&x) {
        Ok(x)
    } else {
        Err(format!("{what}: {} must be a time in us from 0 to 3.6e9", q(v)))
    }
}

/// A bounded quotation of part of a policy string.
fn q(v: &str) -> String {
    iolearn_safeio::excerpt(v, 40)
}

impl PolicySpec {
    /// Parse `ADMISSION[+CLIENT]`.
    pub fn parse(text: &str) -> Result<PolicySpec, String> {
        let mut parts = text.split('+').map(str::trim);
        let adm = parts.next().unwrap_or("");
        let (mut client, mut rank, mut cache, mut books_us) = (None, false, false, None);
        for p in parts {
            if p == "rank" {
                rank = true;
            } else if p == "cache" {
                cache = true;
            } else if let Some(v) = p.strip_prefix("books=") {
                if books_us.replace(us("books deadline", v)?).is_some() {
                    return Err(format!("{}: books given twice", q(text)));
                }
            } else if client.replace(p).is_some() {
                return Err(format!("{}: more than one client strategy", q(text)));
            }
        }
        let (key, val) = match adm.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (adm, None),
        };
        let missing = || {
            let key = q(key);
            format!("policy {key} needs a value (NAME=...)")
        };
        let mut rule = None;
        let admission = match key {
            "base" => AdmissionSpec::Base,
            "random" => {
                let s: f64 = num("random share", val.ok_or_else(missing)?)?;
                if !(0.0..=1.0).contains(&s) {
                    return Err(format!("random share {s:e} is not in [0, 1]"));
                }
                AdmissionSpec::Random(s)
            }
            "heursim" => AdmissionSpec::HeurSim(num("heursim pages", val.ok_or_else(missing)?)?),
            "heuradv" => {
                let parts: Vec<&str> = val.ok_or_else(missing)?.split(',').collect();
                let [m, s, l] = parts[..] else {
                    return Err("heuradv=MAX_PAGES,SHORT_PAGES,SLOW_US".into());
                };
                AdmissionSpec::HeurAdv(num("heuradv max", m)?, num("heuradv short", s)?, num("heuradv slow", l)?)
            }
            "oracle" => AdmissionSpec::Oracle(us("oracle slow", val.ok_or_else(missing)?)?),
            "mittssd" => AdmissionSpec::MittSsd(us("mittssd deadline", val.ok_or_else(missing)?)?),
            "mittssd-wb" => AdmissionSpec::MittSsdWhiteBox(us("mittssd-wb deadline", val.ok_or_else(missing)?)?),
            "mittnoop" => AdmissionSpec::MittNoop(us("mittnoop deadline", val.ok_or_else(missing)?)?),
            "model" => {
                let v = val.ok_or_else(missing)?;
                let (path, r) = match v.rsplit_once('@') {
                    Some((p, r)) => (p, Some(r)),
                    None => (v, None),
                };
                if let Some(r) = r {
                    rule = Some(Rule::parse(r).ok_or_else(|| format!("model rule {} (class, proba=P, above_us=T)", q(r)))?);
                }
                AdmissionSpec::Model(PathBuf::from(path))
            }
            other => {
                return Err(format!(
                    "unknown admission {} (base, random=S, heursim=P, heuradv=M,S,US, oracle=US, mittssd=US, mittssd-wb=US, mittnoop=US, model=PATH)",
                    q(other)
                ))
            }
        };
        let client = match client {
            None => Client::Direct,
            Some(c) => match c.split_once('=') {
                Some(("hedge", v)) => {
                    let (adaptive, v) = match v.strip_prefix("auto:") {
                        Some(rest) => (true, rest),
                        None => (false, v),
                    };
                    let (delay, budget) = match v.split_once('/') {
                        Some((d, b)) => {
                            let b: f64 = num("hedge budget", b)?;
                            if !(b > 0.0 && b <= 1.0) {
                                return Err(format!("hedge budget {b:e} is not in (0, 1]"));
                            }
                            (d, b)
                        }
                        None if adaptive => {
                            return Err(format!(
                                "{}: an adaptive hedge needs a budget (hedge=auto:US/BUDGET)",
                                q(c)
                            ))
                        }
                        None => (v, 1.0),
                    };
                    Client::Hedge {
                        after_ns: (us("hedge delay", delay)? * 1e3) as u64,
                        budget,
                        adaptive,
                    }
                }
                Some(("timeout", v)) => Client::Timeout {
                    after_ns: (us("timeout", v)? * 1e3) as u64,
                },
                None if c == "clone" => Client::Clone,
                _ => {
                    return Err(format!(
                        "unknown client {} (hedge=US[/B], hedge=auto:US/B, clone, timeout=US)",
                        q(c)
                    ))
                }
            },
        };
        Ok(PolicySpec {
            admission,
            client,
            rule,
            rank,
            cache,
            books_us,
        })
    }

    /// Build the admission policy for `replicas` replicas (`seed` for the random one, `timing`
    /// for MittSSD). A model path with `{r}` in it names one model per replica
    /// (`model=linnos-r{r}.iolm`: `linnos-r0.iolm` decides at replica 0, ...): every one must
    /// exist.
    pub fn build(&self, seed: u64, timing: DeviceTiming, replicas: usize) -> Result<Box<dyn Admission>, String> {
        let inner = match &self.admission {
            AdmissionSpec::Model(path) if path.to_string_lossy().contains(REPLICA) => {
                let per: Vec<Box<dyn Admission>> = (0..replicas.max(1))
                    .map(|r| {
                        let one = path.to_string_lossy().replace(REPLICA, &r.to_string());
                        self.load_model(&PathBuf::from(one), &timing)
                    })
                    .collect::<Result<_, _>>()?;
                Box::new(PerReplica(per))
            }
            _ => self.build_admission(seed, &timing)?,
        };
        let inner = match self.books_us {
            None => inner,
            Some(u) => {
                let books = MittSsdBooks::new((u * 1e3) as u64, timing.ssd_for("+books")?);
                Box::new(EitherRefuses(Box::new(books), inner))
            }
        };
        Ok(if self.cache { Box::new(MittCache(inner)) } else { inner })
    }

    fn load_model(&self, path: &std::path::Path, timing: &DeviceTiming) -> Result<Box<dyn Admission>, String> {
        let file = ModelFile::load(path).map_err(|e| e.to_string())?;
        let name = path
            .file_stem()
            .map_or("model".into(), |s| s.to_string_lossy().to_string());
        let mut l = Learned::from_file(&file, &name).map_err(|e| format!("{}: {e}", path.display()))?;
        if let Some(r) = self.rule {
            l.set_rule(r).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        if l.features() == FeatureSet::TailBooks {
            let what = format!("{} (iolearn-tail-books-v1)", path.display());
            l.keep_books(timing.ssd_for(&what)?);
        }
        Ok(Box::new(l))
    }

    fn build_admission(&self, seed: u64, timing: &DeviceTiming) -> Result<Box<dyn Admission>, String> {
        Ok(match &self.admission {
            AdmissionSpec::Base => Box::new(AdmitAll),
            AdmissionSpec::Random(s) => Box::new(RandomRevoke::new(*s, seed)),
            AdmissionSpec::HeurSim(p) => Box::new(QueueLimit { max_pages: *p }),
            AdmissionSpec::HeurAdv(m, s, l) => Box::new(HeurAdv {
                max_pages: *m,
                short_pages: *s,
                slow_us: *l,
            }),
            AdmissionSpec::Oracle(u) => Box::new(Oracle {
                slow_ns: (u * 1e3) as u64,
            }),
            AdmissionSpec::MittSsd(u) => Box::new(MittSsdBooks::new((u * 1e3) as u64, timing.ssd_for("mittssd")?)),
            AdmissionSpec::MittSsdWhiteBox(u) => Box::new(MittSsd {
                deadline_ns: (u * 1e3) as u64,
                read_ns: timing.read_ns,
                transfer_ns: timing.transfer_ns,
                controller_ns: timing.controller_ns,
            }),
            AdmissionSpec::MittNoop(u) => {
                let profile = timing
                    .profile
                    .clone()
                    .ok_or("mittnoop needs disks (their seek profile): the replicas are SSDs")?;
                Box::new(MittNoop::new((u * 1e3) as u64, profile))
            }
            AdmissionSpec::Model(path) => self.load_model(path, timing)?,
        })
    }
}

/// A hedge's delay: fixed, or following the client's recent read latencies.
///
/// Adaptive, it is the `1 - budget` quantile of the last [`HedgeDelay::WINDOW`] reads the
/// client saw complete (recomputed every [`HedgeDelay::EVERY`] completions, once
/// [`HedgeDelay::WARM`] have), but never earlier than the hedge's own delay: reads slower than
/// that are hedged while they are fewer than the budget, and when they are more, the delay
/// rises so the budget goes to the slowest (Dean and Barroso's "hedge after the p95", kept
/// current).
#[derive(Debug, Clone)]
pub struct HedgeDelay {
    start_ns: u64,
    quantile: Option<f64>,
    recent: std::collections::VecDeque<u64>,
    since: usize,
    current_ns: u64,
}

impl HedgeDelay {
    /// Completions the quantile is taken over.
    pub const WINDOW: usize = 1024;
    /// Completions before the quantile replaces the starting delay.
    pub const WARM: usize = 100;
    /// Completions between recomputations.
    pub const EVERY: usize = 32;

    /// The delay of `client` (0 when it does not hedge).
    pub fn new(client: Client) -> HedgeDelay {
        let (start_ns, quantile) = match client {
            Client::Hedge {
                after_ns,
                budget,
                adaptive,
            } => (after_ns, adaptive.then_some(1.0 - budget)),
            _ => (0, None),
        };
        HedgeDelay {
            start_ns,
            quantile,
            recent: std::collections::VecDeque::new(),
            since: 0,
            current_ns: start_ns,
        }
    }

    /// A read completed after `latency_ns` (as the client saw it).
    pub fn observe(&mut self, latency_ns: u64) {
        let Some(q) = self.quantile else { return };
        if self.recent.len() == Self::WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back(latency_ns);
        self.since += 1;
        if self.recent.len() >= Self::WARM && self.since >= Self::EVERY {
            self.since = 0;
            let mut v: Vec<u64> = self.recent.iter().copied().collect();
            let k = ((q * v.len() as f64) as usize).min(v.len() - 1);
            self.current_ns = *v.select_nth_unstable(k).1;
        }
    }

    /// The delay now, ns.
    pub fn delay_ns(&self) -> u64 {
        if self.quantile.is_some() {
            self.current_ns.max(self.start_ns)
        } else {
            self.start_ns
        }
    }
}
