//! `strace -f -ttt -T -y` output as a system-call trace (ROOT/ARTC's own input, and the
//! second source beside the eBPF capture).
//!
//! Lines read: `[PID ]SECONDS.FRACTION CALL(ARGS) = RET[<path>] [ERRNO (text)] <DURATION>`,
//! with `<unfinished ...>` / `<... CALL resumed>` pairs joined per thread, and strace's own
//! lines (`+++ exited +++`, `--- SIGNAL ---`, `strace: Process N attached`) skipped. Arguments
//! are decoded by the call table's roles ([`super::calls`]); strings are C-unescaped (strace
//! prints octal or `\x` escapes, `-xx` hex). A data buffer printed in full (`-s` large
//! enough) is kept as its hash; a truncated one (`"..."...`) is not kept. Thread ids become
//! processes by following clone/fork: strace prints thread ids.
//!
//! Written by hand: no crate parses strace's output (its format is strace's own, and ROOT
//! broke when it changed; tests pin the forms strace 6.1 prints).

use super::{flags, Call, Data, Meta, Role, SysRecord, SysTrace, AT_FDCWD};
use crate::{ReadOptions, TraceError};
use std::collections::HashMap;
use std::path::Path;

/// The result of a read: the trace, and how many lines were skipped as bad (with
/// `skip_bad`), the first of them kept.
#[derive(Debug, Clone, Default)]
pub struct Import {
    /// The trace (records in entry order, numbered).
    pub trace: SysTrace,
    /// Lines skipped as bad.
    pub skipped: usize,
    /// The first skipped line's error.
    pub first_error: Option<TraceError>,
}

/// Read strace text held in memory; `path` names it in errors.
pub fn parse(text: &str, path: &Path, opts: ReadOptions) -> Result<Import, TraceError> {
    let mut out = Import::default();
    let mut pending: HashMap<u32, (usize, u64, String)> = HashMap::new(); // tid -> (line, enter, "name(args")
    let mut epoch: Option<u64> = None;
    let mut records = Vec::new();
    // The starting directory: what -y shows of AT_FDCWD before any process changes directory.
    let mut cwd: Option<String> = None;
    let mut moved = false;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        if !moved && cwd.is_none() {
            moved = raw.contains(" chdir(") || raw.contains(" fchdir(");
            if let Some(at) = raw.split_once("AT_FDCWD<").and_then(|(_, rest)| rest.split_once('>')) {
                let dir = at.0;
                if !moved && dir.starts_with('/') && !dir.contains(['\\', '"']) {
                    cwd = Some(dir.to_string());
                }
            }
        }
        let err = |field: &str, message: String| TraceError {
            file: path.to_path_buf(),
            line: line_no,
            field: field.into(),
            message,
        };
        match parse_line(raw, &mut pending, line_no, &mut epoch) {
            Ok(Some(r)) => records.push(r),
            Ok(None) => {}
            Err((field, message)) => {
                let e = err(field, message);
                if !opts.skip_bad {
                    return Err(e);
                }
                out.skipped += 1;
                out.first_error.get_or_insert(e);
            }
        }
    }
    // Calls still unfinished at the end never returned (exit_group, a thread killed).
    let mut left: Vec<_> = pending.into_iter().collect();
    left.sort_by_key(|(_, (line, _, _))| *line);
    for (tid, (line, enter, text)) in left {
        match decode_call(&text, None, tid, enter) {
            Ok(r) => records.push(r),
            Err((field, message)) => {
                let e = TraceError {
                    file: path.to_path_buf(),
                    line,
                    field: field.into(),
                    message,
                };
                if !opts.skip_bad {
                    return Err(e);
                }
                out.skipped += 1;
                out.first_error.get_or_insert(e);
            }
        }
    }
    assign_processes(&mut records);
    out.trace = SysTrace {
        records,
        meta: Meta {
            source: "strace".into(),
            buffers: "hash".into(),
            cwd: cwd.unwrap_or_default(),
            ..Default::default()
        },
    };
    out.trace.renumber();
    Ok(out)
}

type LineError = (&'static str, String);

fn parse_line(
    raw: &str,
    pending: &mut HashMap<u32, (usize, u64, String)>,
    line_no: usize,
    epoch: &mut Option<u64>,
) -> Result<Option<SysRecord>, LineError> {
    let line = raw.trim_end();
    if line.is_empty() || line.starts_with("strace: ") {
        return Ok(None);
    }
    // Optional thread id: "1234 " (strace -o with -f) or "[pid  1234] " (to a terminal).
    let (tid, rest) = if let Some(r) = line.strip_prefix("[pid") {
        let end = r.find(']').ok_or(("pid", "no closing ] after [pid".to_string()))?;
        let tid = r[..end]
            .trim()
            .parse::<u32>()
            .map_err(|_| ("pid", format!("{:?}", &r[..end])))?;
        (tid, r[end + 1..].trim_start())
    } else {
        let first = token(line);
        if !first.is_empty() && first.bytes().all(|b| b.is_ascii_digit()) {
            let tid = first
                .parse::<u32>()
                .map_err(|_| ("pid", format!("{first:?} out of range")))?;
            (tid, line[first.len()..].trim_start())
        } else {
            (0, line)
        }
    };
    let time = token(rest);
    let t_ns = seconds_ns(time).ok_or((
        "time",
        format!("{time:?} is not seconds.fraction: record with `strace -f -ttt -T -y`"),
    ))?;
    let rest = rest[time.len()..].trim_start();
    if rest.starts_with("+++") || rest.starts_with("---") {
        return Ok(None);
    }
    let base = *epoch.get_or_insert(t_ns);
    let t = t_ns.saturating_sub(base);
    if let Some(r) = rest.strip_prefix("<... ") {
        // "<... NAME resumed>REST": the rest of a call this thread began earlier.
        let close = r
            .find(" resumed>")
            .ok_or(("call", "a <... without resumed>".to_string()))?;
        let name = &r[..close];
        let (_, enter, begun) = pending.remove(&tid).ok_or((
            "call",
            format!("{name} resumed, but thread {tid} has no unfinished call"),
        ))?;
        if !begun.starts_with(name) {
            return Err((
                "call",
                format!("{name} resumed, but thread {tid}'s unfinished call is {begun:?}"),
            ));
        }
        let whole = format!("{begun}{}", &r[close + " resumed>".len()..]);
        return decode_call(&whole, Some(t), tid, enter).map(Some);
    }
    if let Some(begun) = rest.strip_suffix("<unfinished ...>") {
        if pending
            .insert(tid, (line_no, t, begun.trim_end().to_string()))
            .is_some()
        {
            return Err((
                "call",
                format!("thread {tid} began a call before its last one finished"),
            ));
        }
        return Ok(None);
    }
    decode_call(rest, Some(t), tid, t).map(Some)
}

/// The first word of `s` up to an ASCII space or tab (strace's separators: slicing after it
/// stays on a character boundary whatever else the line holds).
fn token(s: &str) -> &str {
    s.split([' ', '\t']).next().unwrap_or("")
}

/// `SECONDS.FRACTION` (any number of fraction digits) as ns.
fn seconds_ns(s: &str) -> Option<u64> {
    let (whole, frac) = s.split_once('.')?;
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let w: u64 = whole.parse().ok()?;
    let mut f = 0u64;
    for (i, b) in frac.bytes().take(9).enumerate() {
        f += u64::from(b - b'0') * 10u64.pow(8 - i as u32);
    }
    w.checked_mul(1_000_000_000)?.checked_add(f)
}

/// Decode `NAME(ARGS) = RET ... <DUR>` (or, unfinished, `NAME(ARGS`) for thread `tid`.
/// `seen`: the time on the line that ended the call (`None`: it never returned).
fn decode_call(text: &str, seen: Option<u64>, tid: u32, enter: u64) -> Result<SysRecord, LineError> {
    let open = text.find('(').ok_or(("call", format!("no ( in {text:?}")))?;
    let name = &text[..open];
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(("call", format!("{name:?} is not a call name")));
    }
    let (args, after) = split_args(&text[open + 1..]);
    let mut r = SysRecord {
        tid,
        pid: tid,
        enter_ns: enter,
        call: Call::by_name(name),
        other: Call::by_name(name).is_none().then(|| name.to_string()),
        ..Default::default()
    };
    // "= RET[<annotation>] [ERRNO (text)] [<DURATION>]", or nothing for an unfinished call.
    match after.map(str::trim) {
        None | Some("") => r.exit_ns = None,
        Some(after) => {
            let after = after
                .strip_prefix('=')
                .ok_or(("return", format!("expected = after the arguments, found {after:?}")))?;
            let (ret, returned, dur) = decode_return(after.trim())?;
            r.ret = ret;
            r.exit_ns = if returned {
                Some(match dur {
                    Some(d) => enter
                        .checked_add(d)
                        .ok_or(("duration", format!("a duration of {d} ns past the end of time")))?,
                    None => seen.unwrap_or(enter).max(enter),
                })
            } else {
                None
            };
        }
    }
    if let Some(call) = r.call {
        decode_args(&mut r, call, &args)?;
    }
    Ok(r)
}

/// `RET...`: (return value, whether the call returned, duration ns).
fn decode_return(s: &str) -> Result<(i64, bool, Option<u64>), LineError> {
    let dur = match s.rfind(" <").or_else(|| s.starts_with('<').then_some(0)) {
        Some(i) if s.ends_with('>') => {
            let inner = &s[i..].trim_start()[1..];
            let inner = &inner[..inner.len() - 1];
            match seconds_ns(inner) {
                Some(d) => Some(d),
                None if inner == "unavailable" => None,
                None if inner.contains('/') || inner.contains(':') => None, // an fd's path annotation
                None => return Err(("duration", format!("<{inner}> is not seconds"))),
            }
        }
        _ => None,
    };
    let first = s
        .split_whitespace()
        .next()
        .ok_or(("return", "nothing after =".to_string()))?;
    if first == "?" {
        return Ok((0, false, dur));
    }
    let num = first.split('<').next().unwrap_or("");
    let v = flags::number(num).ok_or(("return", format!("{first:?} is not a number")))? as i64;
    if v == -1 {
        if let Some(name) = s.split_whitespace().nth(1) {
            if let Some(e) = errno(name) {
                return Ok((-i64::from(e), true, dur));
            }
            if name == "(errno" {
                // "-1 (errno 523)": a number strace has no name for.
                let n = s.split_whitespace().nth(2).unwrap_or("").trim_end_matches(')');
                let e = n.parse::<i64>().map_err(|_| ("errno", format!("{n:?}")))?;
                if !(1..4096).contains(&e) {
                    return Err(("errno", format!("errno {e} out of range")));
                }
                return Ok((-e, true, dur));
            }
            if name.starts_with('E') {
                return Err(("errno", format!("unknown errno {name}")));
            }
        }
    }
    Ok((v, true, dur))
}

/// Split `a, "b,c", {d, e})REST` at top-level commas up to the closing parenthesis: the
/// trimmed arguments and what follows `)` (`None` when the list never closes: unfinished).
fn split_args(s: &str) -> (Vec<&str>, Option<&str>) {
    let b = s.as_bytes();
    let (mut depth, mut start, mut i) = (0i32, 0usize, 0usize);
    let mut args = Vec::new();
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = s[i..].find("*/").map_or(b.len(), |j| i + j + 1);
            }
            b'(' | b'[' | b'{' => depth += 1,
            b']' | b'}' => depth -= 1,
            b')' if depth == 0 => {
                let last = s[start..i].trim();
                if !last.is_empty() || !args.is_empty() {
                    args.push(last);
                }
                return (args, Some(&s[i + 1..]));
            }
            b')' => depth -= 1,
            b',' if depth == 0 => {
                args.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    let last = s[start.min(s.len())..].trim();
    if !last.is_empty() {
        args.push(last);
    }
    (args, None)
}

fn decode_args(r: &mut SysRecord, call: Call, args: &[&str]) -> Result<(), LineError> {
    let roles = call.roles();
    for (i, role) in roles.iter().enumerate() {
        let Some(&raw) = args.get(i) else { break };
        // clone's arguments are named and not in the kernel's order: take flags by name.
        let a = if call == Call::Clone && *role == Role::Flags {
            match args.iter().find_map(|a| a.strip_prefix("flags=")) {
                Some(f) => f,
                None => continue,
            }
        } else {
            strip_name(raw)
        };
        decode_arg(r, call, *role, a).map_err(|m| (role_field(*role), format!("{}: {m}", call.name())))?;
    }
    Ok(())
}

/// `name=value` -> `value` (strace names some arguments).
fn strip_name(a: &str) -> &str {
    match a.find('=') {
        Some(i) if !a.starts_with('"') && a[..i].bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') => &a[i + 1..],
        _ => a,
    }
}

fn role_field(role: Role) -> &'static str {
    match role {
        Role::Fd | Role::OutFds => "fd",
        Role::DirFd => "dirfd",
        Role::Path => "path",
        Role::DirFd2 => "dirfd2",
        Role::Path2 => "path2",
        Role::Fd2 => "fd2",
        Role::Buf | Role::Iov => "data",
        Role::Count => "count",
        Role::Offset => "offset",
        Role::Flags => "flags",
        Role::Mode => "mode",
        Role::Cmd => "cmd",
        Role::Addr => "addr",
        Role::Uid => "uid",
        Role::Gid => "gid",
        Role::Name => "name",
        Role::Out => "result",
        Role::Skip => "argument",
    }
}

fn decode_arg(r: &mut SysRecord, call: Call, role: Role, a: &str) -> Result<(), String> {
    match role {
        Role::Fd => r.fd = Some(fd(a)?),
        Role::Fd2 => r.fd2 = Some(fd(a)?),
        Role::DirFd => r.dirfd = Some(fd(a)?),
        Role::DirFd2 => r.dirfd2 = Some(fd(a)?),
        Role::Path => r.path = string(a)?.map(|(s, _)| s),
        Role::Path2 => r.path2 = string(a)?.map(|(s, _)| s),
        Role::Name => r.name = string(a)?.map(|(s, _)| s),
        Role::Buf => {
            // A buffer strace printed whole is kept as its hash; a truncated one is not kept.
            // A read's buffer is only meaningful when the read succeeded.
            let shown = call.writes() || r.ret >= 0;
            if let (true, Some((bytes, whole))) = (shown, string(a).unwrap_or(None)) {
                if whole {
                    r.data = Data::Hash(super::hash(&bytes));
                }
            }
        }
        Role::Iov => {
            let mut total = 0u64;
            for part in a.split("iov_len=").skip(1) {
                let n: String = part.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
                let len = flags::number(&n).ok_or_else(|| format!("iov_len {n:?}"))?;
                total = total.checked_add(len).ok_or("iov_len: the total overflows")?;
            }
            r.count = Some(total);
        }
        Role::Count => r.count = Some(flags::number(a).ok_or_else(|| format!("{a:?} is not a number"))?),
        Role::Offset => r.offset = Some(flags::number(a).ok_or_else(|| format!("{a:?} is not a number"))? as i64),
        Role::Flags => {
            // openat2's and clone3's flags are a field of a struct; fcntl's third argument
            // may be a struct (a lock) with none.
            let v = match struct_field(a, "flags") {
                Some(f) => f,
                None if a.starts_with('{') => return Ok(()),
                None => a,
            };
            r.flags = Some(flags::parse(v)?);
            if call == Call::Openat2 {
                if let Some(m) = struct_field(a, "mode") {
                    r.mode = Some(flags::parse(m)? as u32);
                }
            }
        }
        Role::Mode => r.mode = Some(flags::parse(a)? as u32),
        Role::Cmd => {
            // ioctl requests are open-ended: one strace has no number for is kept as unknown.
            r.cmd = match flags::parse(a) {
                Ok(v) => Some(v),
                Err(_) if call == Call::Ioctl => None,
                Err(e) => return Err(e),
            }
        }
        Role::Addr => r.addr = Some(flags::parse(a)?),
        Role::Uid => r.uid = Some(flags::number(a).ok_or_else(|| format!("{a:?} is not a number"))? as u32),
        Role::Gid => r.gid = Some(flags::number(a).ok_or_else(|| format!("{a:?} is not a number"))? as u32),
        Role::Out => {
            // A target strace cut short (`-s` too small) is not kept.
            if matches!(call, Call::Readlink | Call::Readlinkat) && r.ret >= 0 {
                r.result = string(a)?.filter(|(_, whole)| *whole).map(|(s, _)| s);
            }
            // The stat family: the file's type, permissions and size (`super::stat_result`).
            if matches!(
                call,
                Call::Stat | Call::Lstat | Call::Fstat | Call::Newfstatat | Call::Statx
            ) && r.ret == 0
            {
                let field = |names: &[&str]| names.iter().find_map(|n| struct_field(a, n));
                if let Some(mode) = field(&["st_mode", "stx_mode"]) {
                    let mode = flags::parse(mode)?;
                    let size = match field(&["st_size", "stx_size"]) {
                        Some(v) => Some(flags::number(v).ok_or_else(|| format!("st_size {v:?}"))?),
                        None => None,
                    };
                    r.result = Some(super::stat_result(mode as u32, size));
                }
            }
        }
        Role::OutFds => {
            let inner = a.trim().trim_start_matches('[').trim_end_matches(']');
            let mut it = inner.split(',').map(str::trim).filter(|s| !s.is_empty());
            if let (Some(x), Some(y)) = (it.next(), it.next()) {
                r.fd = Some(fd(x)?);
                r.fd2 = Some(fd(y)?);
            }
        }
        Role::Skip => {}
    }
    Ok(())
}

/// `{flags=O_RDONLY, mode=0, ...}` -> the text of field `name`.
fn struct_field<'a>(a: &'a str, name: &str) -> Option<&'a str> {
    let inner = a.trim().strip_prefix('{')?.strip_suffix('}')?;
    let (args, _) = split_args(inner);
    args.into_iter()
        .find_map(|f| f.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
}

/// A descriptor: `3`, `3</path>` (-y), `AT_FDCWD`.
fn fd(a: &str) -> Result<i32, String> {
    let n = a.split('<').next().unwrap_or("").trim();
    if n == "AT_FDCWD" {
        return Ok(AT_FDCWD);
    }
    n.parse::<i32>().map_err(|_| format!("{a:?} is not a descriptor"))
}

/// A C string as strace prints it -> (bytes, printed whole?). `NULL` -> None.
fn string(a: &str) -> Result<Option<(Vec<u8>, bool)>, String> {
    let a = a.trim();
    if a == "NULL" || a.starts_with("0x") {
        return Ok(None);
    }
    let body = a.strip_prefix('"').ok_or_else(|| format!("{a:?} is not a string"))?;
    let b = body.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let whole = !body[i + 1..].starts_with("...");
                return Ok(Some((out, whole)));
            }
            b'\\' => {
                let c = *b.get(i + 1).ok_or("a string ending in \\")?;
                i += 2;
                match c {
                    b'n' => out.push(b'\n'),
                    b't' => out.push(b'\t'),
                    b'r' => out.push(b'\r'),
                    b'v' => out.push(0x0b),
                    b'f' => out.push(0x0c),
                    b'x' => {
                        let h = body.get(i..i + 2).ok_or("a \\x escape without two hex digits")?;
                        out.push(u8::from_str_radix(h, 16).map_err(|_| format!("\\x{h}"))?);
                        i += 2;
                    }
                    b'0'..=b'7' => {
                        let mut v = u32::from(c - b'0');
                        let mut k = 0;
                        while k < 2 && i < b.len() && (b'0'..=b'7').contains(&b[i]) {
                            v = v * 8 + u32::from(b[i] - b'0');
                            i += 1;
                            k += 1;
                        }
                        out.push(u8::try_from(v).map_err(|_| format!("octal escape {v:o}"))?);
                    }
                    other => out.push(other),
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Err(format!("{a:?}: a string without its closing quote"))
}

/// An errno's name (`ENOENT`, and the kernel's restart codes strace shows) -> its number.
fn errno(name: &str) -> Option<i32> {
    macro_rules! errnos { ($($e:ident),*) => { &[$((stringify!($e), libc::$e)),*] } }
    const NAMES: &[(&str, i32)] = errnos![
        EPERM,
        ENOENT,
        ESRCH,
        EINTR,
        EIO,
        ENXIO,
        E2BIG,
        ENOEXEC,
        EBADF,
        ECHILD,
        EAGAIN,
        ENOMEM,
        EACCES,
        EFAULT,
        ENOTBLK,
        EBUSY,
        EEXIST,
        EXDEV,
        ENODEV,
        ENOTDIR,
        EISDIR,
        EINVAL,
        ENFILE,
        EMFILE,
        ENOTTY,
        ETXTBSY,
        EFBIG,
        ENOSPC,
        ESPIPE,
        EROFS,
        EMLINK,
        EPIPE,
        EDOM,
        ERANGE,
        EDEADLK,
        ENAMETOOLONG,
        ENOLCK,
        ENOSYS,
        ENOTEMPTY,
        ELOOP,
        ENOMSG,
        EIDRM,
        ENOSTR,
        ENODATA,
        ETIME,
        ENOSR,
        EREMOTE,
        ENOLINK,
        EPROTO,
        EBADMSG,
        EOVERFLOW,
        EILSEQ,
        EUSERS,
        ENOTSOCK,
        EDESTADDRREQ,
        EMSGSIZE,
        EPROTOTYPE,
        ENOPROTOOPT,
        EPROTONOSUPPORT,
        EOPNOTSUPP,
        EAFNOSUPPORT,
        EADDRINUSE,
        EADDRNOTAVAIL,
        ENETDOWN,
        ENETUNREACH,
        ECONNABORTED,
        ECONNRESET,
        ENOBUFS,
        EISCONN,
        ENOTCONN,
        ETIMEDOUT,
        ECONNREFUSED,
        EHOSTUNREACH,
        EALREADY,
        EINPROGRESS,
        ESTALE,
        EDQUOT,
        ECANCELED,
        EOWNERDEAD,
        ENOTRECOVERABLE,
        ENOTSUP,
        EWOULDBLOCK,
        EDEADLOCK,
        ENOKEY,
        EKEYEXPIRED,
        EKEYREVOKED,
        EKEYREJECTED,
        ERFKILL,
        EHWPOISON,
        EREMOTEIO,
        EMEDIUMTYPE,
        ENOMEDIUM,
        EBADFD,
        EBADE,
        EBADR,
        EXFULL,
        ENOANO,
        EBADRQC,
        EBADSLT,
        ENOCSI,
        EL2HLT
    ];
    // Kernel-internal codes (include/linux/errno.h) strace prints for interrupted calls.
    const RESTART: &[(&str, i32)] = &[
        ("ERESTARTSYS", 512),
        ("ERESTARTNOINTR", 513),
        ("ERESTARTNOHAND", 514),
        ("ENOIOCTLCMD", 515),
        ("ERESTART_RESTARTBLOCK", 516),
        ("EPROBE_DEFER", 517),
        ("EOPENSTALE", 518),
        ("ENOPARAM", 519),
        ("EBADHANDLE", 521),
        ("ENOTSYNC", 522),
        ("EBADCOOKIE", 523),
        ("ENOTSUPP", 524),
        ("ETOOSMALL", 525),
        ("ESERVERFAULT", 526),
        ("EBADTYPE", 527),
        ("EJUKEBOX", 528),
        ("EIOCBQUEUED", 529),
    ];
    NAMES.iter().chain(RESTART).find(|(n, _)| *n == name).map(|(_, v)| *v)
}

/// Thread ids -> processes: a task started by clone without `CLONE_THREAD` (or fork, vfork)
/// is a process of its own; with it, a thread of its parent's. Threads whose start is not in
/// the trace are their own process.
fn assign_processes(records: &mut [SysRecord]) {
    let mut parent: HashMap<u32, (u32, bool)> = HashMap::new(); // child tid -> (parent tid, thread?)
    for r in records.iter() {
        let thread = match r.call {
            Some(Call::Clone) | Some(Call::Clone3) => r.flags.unwrap_or(0) & libc::CLONE_THREAD as u64 != 0,
            Some(Call::Fork) | Some(Call::Vfork) => false,
            _ => continue,
        };
        if r.ret > 0 {
            parent.insert(r.ret as u32, (r.tid, thread));
        }
    }
    fn pid_of(tid: u32, parent: &HashMap<u32, (u32, bool)>) -> u32 {
        let mut t = tid;
        for _ in 0..parent.len() + 1 {
            match parent.get(&t) {
                Some(&(p, true)) => t = p,
                _ => return t,
            }
        }
        t
    }
    for r in records.iter_mut() {
        r.pid = pid_of(r.tid, &parent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> SysTrace {
        parse(text, Path::new("t.strace"), ReadOptions::default())
            .unwrap()
            .trace
    }

    #[test]
    fn the_forms_strace_prints_decode() {
        let t = read(concat!(
            "100 1700000000.000001 openat(AT_FDCWD</home>, \"/tmp/a b\", O_WRONLY|O_CREAT|O_TRUNC, 0644) = 3</tmp/a b> <0.000010>\n",
            "100 1700000000.000020 write(3</tmp/a b>, \"hi\\n\", 3) = 3 <0.000002>\n",
            "100 1700000000.000030 pread64(3</tmp/a b>, \"\\x68\\x69\"..., 4096, 8192) = 4096 <0.000005>\n",
            "100 1700000000.000040 stat(\"/nope\", 0x7ffd) = -1 ENOENT (No such file or directory) <0.000001>\n",
            "100 1700000000.000050 lseek(3</tmp/a b>, -10, SEEK_END) = 20 <0.000001>\n",
            "100 1700000000.000060 writev(3</tmp/a b>, [{iov_base=\"ab\", iov_len=2}, {iov_base=\"cde\", iov_len=3}], 2) = 5 <0.000002>\n",
            "100 1700000000.000070 renameat2(AT_FDCWD, \"/tmp/a b\", AT_FDCWD, \"/tmp/c\", RENAME_NOREPLACE) = 0 <0.000003>\n",
            "100 1700000000.000080 readlink(\"/tmp/l\", \"/tmp/c\", 4096) = 6 <0.000001>\n",
            "100 1700000000.000090 pipe2([4<pipe:[1]>, 5<pipe:[1]>], O_CLOEXEC) = 0 <0.000001>\n",
            "100 1700000000.000100 close(3</tmp/c>) = 0 <0.000001>\n",
            "100 1700000000.000110 exit_group(0) = ?\n",
            "100 1700000000.000120 +++ exited with 0 +++\n",
        ));
        let r = &t.records;
        assert_eq!(r.len(), 11);
        assert_eq!(t.meta.cwd, "/home", "-y's name for AT_FDCWD: where the trace starts");
        assert_eq!(
            read("1 1.0 chdir(\"/x\") = 0 <0.1>\n1 1.2 openat(AT_FDCWD</x>, \"a\", O_RDONLY) = 3</x/a> <0.1>\n")
                .meta
                .cwd,
            "",
            "after a chdir, AT_FDCWD is not the start"
        );
        assert_eq!(r[0].call, Some(Call::Openat));
        assert_eq!(r[0].dirfd, Some(AT_FDCWD));
        assert_eq!(r[0].path.as_deref(), Some(&b"/tmp/a b"[..]));
        assert_eq!(
            r[0].flags,
            Some((libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC) as u64)
        );
        assert_eq!(r[0].mode, Some(0o644));
        assert_eq!((r[0].ret, r[0].enter_ns, r[0].exit_ns), (3, 0, Some(10_000)));
        assert_eq!(r[0].new_fd(), Some(3));
        assert_eq!(r[1].data, Data::Hash(crate::sys::hash(b"hi\n")));
        assert_eq!((r[1].fd, r[1].count), (Some(3), Some(3)));
        assert_eq!(r[2].data, Data::None, "a truncated buffer is not kept");
        assert_eq!((r[2].count, r[2].offset), (Some(4096), Some(8192)));
        assert_eq!(r[3].errno(), Some(libc::ENOENT));
        assert_eq!((r[4].offset, r[4].cmd), (Some(-10), Some(2)));
        assert_eq!(r[5].count, Some(5));
        assert_eq!(r[6].path2.as_deref(), Some(&b"/tmp/c"[..]));
        assert_eq!(r[6].flags, Some(libc::RENAME_NOREPLACE as u64));
        assert_eq!(r[7].result.as_deref(), Some(&b"/tmp/c"[..]));
        assert_eq!((r[8].fd, r[8].fd2), (Some(4), Some(5)));
        assert_eq!(r[10].exit_ns, None, "exit_group never returns");
        assert!(r.iter().all(|x| x.pid == 100 && x.tid == 100));
        assert_eq!(r.iter().map(|x| x.id).collect::<Vec<_>>(), (0..11).collect::<Vec<_>>());
    }

    #[test]
    fn unfinished_calls_are_joined_and_threads_become_processes() {
        let t = read(concat!(
            "10 5.000000 clone(child_stack=0x7f, flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM|CLONE_SETTLS|CLONE_PARENT_SETTID|CLONE_CHILD_CLEARTID, parent_tid=[11], tls=0x7f, child_tidptr=0x7f) = 11 <0.000050>\n",
            "10 5.000100 read(3</d>,  <unfinished ...>\n",
            "11 5.000110 write(1</dev/null>, \"x\", 1) = 1 <0.000001>\n",
            "11 5.000120 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, child_tidptr=0x7f) = 12 <0.000030>\n",
            "12 5.000200 exit_group(0) = ?\n",
            "10 5.000300 <... read resumed>\"abc\", 10) = 3 <0.000200>\n",
        ));
        let by_tid = |tid| t.records.iter().filter(move |r| r.tid == tid);
        let read = by_tid(10).find(|r| r.call == Some(Call::Read)).unwrap();
        assert_eq!((read.enter_ns, read.exit_ns, read.ret), (100_000, Some(300_000), 3));
        assert_eq!(read.data, Data::Hash(crate::sys::hash(b"abc")));
        assert!(
            by_tid(11).all(|r| r.pid == 10),
            "a CLONE_THREAD child is a thread of 10"
        );
        assert!(by_tid(12).all(|r| r.pid == 12), "a fork-like clone starts a process");
        assert_eq!(t.threads(), vec![(10, 10), (10, 11), (12, 12)]);
    }

    #[test]
    fn bad_lines_name_the_line_and_field() {
        let bad = [
            ("1 12:00:01.000 read(3, \"\", 1) = 0\n", "time"),
            ("1 1.5 read(x, \"\", 1) = 0 <0.1>\n", "fd"),
            ("1 1.5 openat(AT_FDCWD, \"a\", O_WHAT) = 3 <0.1>\n", "flags"),
            ("1 1.5 read(3, \"\", 1) = -1 EWHAT (x) <0.1>\n", "errno"),
            ("1 1.5 <... read resumed>\"\", 1) = 0 <0.1>\n", "call"),
            ("1 1.5 open(\"unterminated, O_RDONLY) = 3 <0.1>\n", "path"),
            ("1 1.5 read(3, \"\", 1) 0\n", "return"),
            ("1 1.5 read(3, \"\", 1) = 0 <18446744073.709551615>\n", "duration"),
            (
                "1 1.5 read(3, \"\", 1) = -1 (errno -9223372036854775808) <0.1>\n",
                "errno",
            ),
            ("1 1.5 read(3, \"\", 1) = -1 (errno 70000) <0.1>\n", "errno"),
            (
                "1 1.5 writev(3, [{iov_len=18446744073709551615}, {iov_len=2}], 2) = 0 <0.1>\n",
                "data",
            ),
            ("\u{a0}7 1.0 close(3) = 0 <0.1>\n", "time"),
        ];
        for (text, field) in bad {
            let e = parse(
                &format!("1 1.0 close(9) = 0 <0.1>\n{text}"),
                Path::new("x.txt"),
                ReadOptions::default(),
            )
            .unwrap_err();
            assert_eq!((e.line, e.field.as_str()), (2, field), "{text}: {e}");
            assert!(e.to_string().starts_with("x.txt: line 2: "), "{e}");
        }
        let skip = ReadOptions { skip_bad: true };
        let imp = parse(
            "1 1.0 close(9) = 0 <0.1>\n1 bad\n1 1.5 close(8) = 0 <0.1>\n",
            Path::new("x"),
            skip,
        )
        .unwrap();
        assert_eq!((imp.trace.records.len(), imp.skipped), (2, 1));
    }

    #[test]
    fn octal_and_hex_escapes_and_unknown_calls() {
        let t = read("7 1.0 mkdir(\"d\\303\\251\\x41\", 0755) = 0 <0.1>\n7 1.1 getrandom(\"\", 0, 0) = 0 <0.1>\n");
        assert_eq!(t.records[0].path.as_deref(), Some(&[b'd', 0xc3, 0xa9, b'A'][..]));
        assert_eq!(t.records[1].call, None);
        assert_eq!(t.records[1].call_name(), "getrandom");
    }
}
