//! System-call traces as Parquet: a row per call, a column per [`SysRecord`] field (absent
//! arguments are nulls), the capture's settings in the footer's key-value metadata. Queryable
//! as it is with DuckDB or Polars; the schema is documented in `docs/formats.md`.

use super::{Call, Data, Meta, SysRecord, SysTrace};
use crate::TraceError;
use parquet::basic::Compression;
use parquet::data_type::{ByteArray, ByteArrayType, Int32Type, Int64Type};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::{SerializedColumnWriter, SerializedFileWriter};
use parquet::record::Field;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

/// The format's name and version, in the footer (`iolearn.format`).
pub const FORMAT: &str = "iolearn-syscalls-v1";

/// Rows per row group.
const GROUP: usize = 1 << 16;

/// The schema (unsigned values are stored in their signed physical type bit for bit, as
/// Parquet's unsigned logical types are).
pub const SCHEMA: &str = "message syscall {
    REQUIRED INT64 id (INTEGER(64, false));
    REQUIRED INT32 pid (INTEGER(32, false));
    REQUIRED INT32 tid (INTEGER(32, false));
    REQUIRED INT64 enter_ns (INTEGER(64, false));
    OPTIONAL INT64 exit_ns (INTEGER(64, false));
    REQUIRED BYTE_ARRAY call (STRING);
    REQUIRED INT64 ret;
    OPTIONAL INT32 fd;
    OPTIONAL INT32 dirfd;
    OPTIONAL BYTE_ARRAY path;
    OPTIONAL INT32 fd2;
    OPTIONAL INT32 dirfd2;
    OPTIONAL BYTE_ARRAY path2;
    OPTIONAL INT64 count (INTEGER(64, false));
    OPTIONAL INT64 offset;
    OPTIONAL INT64 flags (INTEGER(64, false));
    OPTIONAL INT32 mode (INTEGER(32, false));
    OPTIONAL INT64 cmd (INTEGER(64, false));
    OPTIONAL INT64 addr (INTEGER(64, false));
    OPTIONAL INT32 uid (INTEGER(32, false));
    OPTIONAL INT32 gid (INTEGER(32, false));
    OPTIONAL BYTE_ARRAY name;
    OPTIONAL BYTE_ARRAY result;
    REQUIRED BYTE_ARRAY data (STRING);
    OPTIONAL INT64 data_hash (INTEGER(64, false));
    OPTIONAL INT64 data_offset (INTEGER(64, false));
    OPTIONAL INT64 data_len (INTEGER(64, false));
}";

/// Write `trace` as Parquet to `w`; returns the rows written.
pub fn write(trace: &SysTrace, w: &mut (dyn Write + Send)) -> Result<u64, String> {
    let pq = |e: parquet::errors::ParquetError| e.to_string();
    let schema = Arc::new(parquet::schema::parser::parse_message_type(SCHEMA).map_err(pq)?);
    let m = &trace.meta;
    let kv = |k: &str, v: String| KeyValue::new(format!("iolearn.{k}"), v);
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_created_by(format!("iolearn {}", env!("CARGO_PKG_VERSION")))
            .set_key_value_metadata(Some(vec![
                kv("format", FORMAT.into()),
                kv("source", m.source.clone()),
                kv("buffers", m.buffers.clone()),
                kv("lost", m.lost.to_string()),
                kv(
                    "lost_by_call",
                    m.lost_by_call
                        .iter()
                        .map(|(c, n)| format!("{c}={n}"))
                        .collect::<Vec<_>>()
                        .join(" "),
                ),
                kv("command", m.command.clone()),
                kv("cwd", m.cwd.clone()),
                kv(
                    "data_file",
                    m.data_file.map(|(n, h)| format!("{n} {h:016x}")).unwrap_or_default(),
                ),
            ]))
            .build(),
    );
    let mut file = SerializedFileWriter::new(w, schema, props).map_err(pq)?;
    for chunk in trace.records.chunks(GROUP) {
        let mut group = file.next_row_group().map_err(pq)?;
        let mut k = 0;
        while let Some(mut col) = group.next_column().map_err(pq)? {
            write_column(&mut col, k, chunk).map_err(pq)?;
            col.close().map_err(pq)?;
            k += 1;
        }
        group.close().map_err(pq)?;
    }
    file.close().map_err(pq)?;
    Ok(trace.records.len() as u64)
}

/// Values and definition levels of an optional column (1 = present, 0 = null).
fn opt<T: Clone>(rs: &[SysRecord], f: impl Fn(&SysRecord) -> Option<T>) -> (Vec<T>, Vec<i16>) {
    let mut vals = Vec::with_capacity(rs.len());
    let levels = rs
        .iter()
        .map(|r| match f(r) {
            Some(v) => {
                vals.push(v);
                1
            }
            None => 0,
        })
        .collect();
    (vals, levels)
}

fn write_column(col: &mut SerializedColumnWriter<'_>, k: usize, rs: &[SysRecord]) -> parquet::errors::Result<()> {
    let bytes = |v: &Option<Vec<u8>>| v.as_ref().map(|b| ByteArray::from(b.clone()));
    macro_rules! req {
        ($ty:ty, $f:expr) => {{
            let v: Vec<_> = rs.iter().map($f).collect();
            col.typed::<$ty>().write_batch(&v, None, None).map(|_| ())
        }};
    }
    macro_rules! opt {
        ($ty:ty, $f:expr) => {{
            let (v, d) = opt(rs, $f);
            col.typed::<$ty>().write_batch(&v, Some(&d), None).map(|_| ())
        }};
    }
    match k {
        0 => req!(Int64Type, |r| r.id as i64),
        1 => req!(Int32Type, |r| r.pid as i32),
        2 => req!(Int32Type, |r| r.tid as i32),
        3 => req!(Int64Type, |r| r.enter_ns as i64),
        4 => opt!(Int64Type, |r| r.exit_ns.map(|x| x as i64)),
        5 => req!(ByteArrayType, |r| ByteArray::from(r.call_name())),
        6 => req!(Int64Type, |r| r.ret),
        7 => opt!(Int32Type, |r| r.fd),
        8 => opt!(Int32Type, |r| r.dirfd),
        9 => opt!(ByteArrayType, |r| bytes(&r.path)),
        10 => opt!(Int32Type, |r| r.fd2),
        11 => opt!(Int32Type, |r| r.dirfd2),
        12 => opt!(ByteArrayType, |r| bytes(&r.path2)),
        13 => opt!(Int64Type, |r| r.count.map(|x| x as i64)),
        14 => opt!(Int64Type, |r| r.offset),
        15 => opt!(Int64Type, |r| r.flags.map(|x| x as i64)),
        16 => opt!(Int32Type, |r| r.mode.map(|x| x as i32)),
        17 => opt!(Int64Type, |r| r.cmd.map(|x| x as i64)),
        18 => opt!(Int64Type, |r| r.addr.map(|x| x as i64)),
        19 => opt!(Int32Type, |r| r.uid.map(|x| x as i32)),
        20 => opt!(Int32Type, |r| r.gid.map(|x| x as i32)),
        21 => opt!(ByteArrayType, |r| bytes(&r.name)),
        22 => opt!(ByteArrayType, |r| bytes(&r.result)),
        23 => req!(ByteArrayType, |r| ByteArray::from(data_kind(&r.data))),
        24 => opt!(Int64Type, |r| match r.data {
            Data::Hash(h) => Some(h as i64),
            _ => None,
        }),
        25 => opt!(Int64Type, |r| match r.data {
            Data::Bytes { offset, .. } => Some(offset as i64),
            _ => None,
        }),
        26 => opt!(Int64Type, |r| match r.data {
            Data::Bytes { len, .. } => Some(len as i64),
            _ => None,
        }),
        _ => unreachable!("the schema has 27 columns"),
    }
}

fn data_kind(d: &Data) -> &'static str {
    match d {
        Data::None => "none",
        Data::Hash(_) => "hash",
        Data::Bytes { .. } => "bytes",
        Data::Unreadable => "unreadable",
    }
}

/// Read a trace written by [`write`]. Every error names the file, and for a bad value the
/// record (its row) and the field.
pub fn read(path: &Path) -> Result<SysTrace, TraceError> {
    let bytes =
        iolearn_safeio::read(path, crate::MAX_TRACE_BYTES).map_err(|e| TraceError::of_file(path, "file", e.reason))?;
    read_bytes(bytes, path)
}

/// Read a trace held in memory; `path` names it in errors.
pub fn read_bytes(bytes: Vec<u8>, path: &Path) -> Result<SysTrace, TraceError> {
    // A bad file must be an error naming it, never a crash: should the parquet crate assert
    // on some malformed input instead of returning an error, the panic is caught here.
    std::panic::catch_unwind(|| decode(bytes, path)).unwrap_or_else(|_| {
        Err(TraceError::of_file(
            path,
            "file",
            "not a valid Parquet file (malformed)",
        ))
    })
}

fn decode(bytes: Vec<u8>, path: &Path) -> Result<SysTrace, TraceError> {
    let file_err = |field: &str, m: String| TraceError::of_file(path, field, m);
    let reader = SerializedFileReader::new(bytes::Bytes::from(bytes))
        .map_err(|e| file_err("file", format!("not Parquet: {e}")))?;
    let md = reader.metadata().file_metadata();
    let kv = |k: &str| -> Option<String> {
        md.key_value_metadata()?
            .iter()
            .find(|x| x.key == format!("iolearn.{k}"))
            .and_then(|x| x.value.clone())
    };
    match kv("format") {
        Some(f) if f == FORMAT => {}
        Some(f) => return Err(file_err("iolearn.format", format!("{f:?}, this build reads {FORMAT}"))),
        None => return Err(file_err("iolearn.format", "missing: not a system-call trace".into())),
    }
    let expected = parquet::schema::parser::parse_message_type(SCHEMA).expect("the schema parses");
    let names: Vec<String> = expected.get_fields().iter().map(|f| f.name().to_string()).collect();
    let have: Vec<String> = md.schema().get_fields().iter().map(|f| f.name().to_string()).collect();
    if have != names {
        return Err(file_err("schema", format!("columns {have:?}, expected {names:?}")));
    }
    let meta = Meta {
        source: kv("source").unwrap_or_default(),
        buffers: kv("buffers").unwrap_or_default(),
        lost: kv("lost")
            .unwrap_or_default()
            .parse()
            .map_err(|_| file_err("iolearn.lost", "not a count".into()))?,
        lost_by_call: kv("lost_by_call")
            .unwrap_or_default()
            .split_whitespace()
            .map(|p| {
                p.split_once('=')
                    .and_then(|(c, n)| Some((c.to_string(), n.parse().ok()?)))
                    .ok_or_else(|| file_err("iolearn.lost_by_call", format!("{:?}: not call=count", p)))
            })
            .collect::<Result<_, _>>()?,
        command: kv("command").unwrap_or_default(),
        data_file: match kv("data_file").unwrap_or_default().split_once(' ') {
            None => None,
            Some((n, h)) => Some(
                n.parse()
                    .ok()
                    .zip(u64::from_str_radix(h, 16).ok())
                    .ok_or_else(|| file_err("iolearn.data_file", "not \"LENGTH XXH3\"".into()))?,
            ),
        },
        cwd: match kv("cwd").unwrap_or_default() {
            c if c.is_empty() || c.starts_with('/') && !c.contains('\0') => c,
            c => return Err(file_err("iolearn.cwd", format!("{:?}: not an absolute path", c))),
        },
    };
    let rows = reader.get_row_iter(None).map_err(|e| file_err("file", e.to_string()))?;
    let mut records = Vec::new();
    for (i, row) in rows.enumerate() {
        let row = row.map_err(|e| file_err("file", format!("record {i}: {e}")))?;
        let bad = |field: &str, m: &str| TraceError {
            file: path.to_path_buf(),
            line: 0,
            field: format!("record {i}: {field}"),
            message: m.to_string(),
        };
        let mut r = SysRecord::default();
        let (mut kind, mut hash, mut off, mut len) = (String::new(), None, None, None);
        for (name, f) in row.get_column_iter() {
            let int = || -> Result<Option<i64>, TraceError> {
                Ok(match f {
                    Field::Null => None,
                    Field::Long(v) => Some(*v),
                    Field::ULong(v) => Some(*v as i64),
                    Field::Int(v) => Some(i64::from(*v)),
                    Field::UInt(v) => Some(i64::from(*v)),
                    _ => return Err(bad(name, "not an integer")),
                })
            };
            let bytes = || -> Result<Option<Vec<u8>>, TraceError> {
                Ok(match f {
                    Field::Null => None,
                    Field::Bytes(b) => Some(b.data().to_vec()),
                    Field::Str(s) => Some(s.as_bytes().to_vec()),
                    _ => return Err(bad(name, "not bytes")),
                })
            };
            let need = |v: Option<i64>| v.ok_or_else(|| bad(name, "missing"));
            let i32_of = |v: Option<i64>| v.map(|x| x as i32);
            match name.as_str() {
                "id" => r.id = need(int()?)? as u64,
                "pid" => r.pid = need(int()?)? as u32,
                "tid" => r.tid = need(int()?)? as u32,
                "enter_ns" => r.enter_ns = need(int()?)? as u64,
                "exit_ns" => r.exit_ns = int()?.map(|x| x as u64),
                "call" => {
                    let b = bytes()?.ok_or_else(|| bad(name, "missing"))?;
                    let s = String::from_utf8(b).map_err(|_| bad(name, "not UTF-8"))?;
                    r.call = Call::by_name(&s);
                    if r.call.is_none() {
                        r.other = Some(s);
                    }
                }
                "ret" => r.ret = need(int()?)?,
                "fd" => r.fd = i32_of(int()?),
                "dirfd" => r.dirfd = i32_of(int()?),
                "path" => r.path = bytes()?,
                "fd2" => r.fd2 = i32_of(int()?),
                "dirfd2" => r.dirfd2 = i32_of(int()?),
                "path2" => r.path2 = bytes()?,
                "count" => r.count = int()?.map(|x| x as u64),
                "offset" => r.offset = int()?,
                "flags" => r.flags = int()?.map(|x| x as u64),
                "mode" => r.mode = int()?.map(|x| x as u32),
                "cmd" => r.cmd = int()?.map(|x| x as u64),
                "addr" => r.addr = int()?.map(|x| x as u64),
                "uid" => r.uid = int()?.map(|x| x as u32),
                "gid" => r.gid = int()?.map(|x| x as u32),
                "name" => r.name = bytes()?,
                "result" => r.result = bytes()?,
                "data" => kind = String::from_utf8(bytes()?.unwrap_or_default()).unwrap_or_default(),
                "data_hash" => hash = int()?.map(|x| x as u64),
                "data_offset" => off = int()?.map(|x| x as u64),
                "data_len" => len = int()?.map(|x| x as u64),
                _ => {}
            }
        }
        r.data = match (kind.as_str(), hash, off, len) {
            ("none", None, None, None) => Data::None,
            ("hash", Some(h), None, None) => Data::Hash(h),
            ("bytes", None, Some(offset), Some(len)) => Data::Bytes { offset, len },
            ("unreadable", None, None, None) => Data::Unreadable,
            _ => {
                return Err(bad(
                    "data",
                    &format!("{kind:?} with hash {hash:?}, offset {off:?}, len {len:?}"),
                ))
            }
        };
        if r.exit_ns.is_some_and(|x| x < r.enter_ns) {
            return Err(bad("exit_ns", "before enter_ns"));
        }
        records.push(r);
    }
    for (i, w) in records.windows(2).enumerate() {
        if (w[1].enter_ns, w[1].id) <= (w[0].enter_ns, w[0].id) {
            return Err(TraceError {
                file: path.to_path_buf(),
                line: 0,
                field: format!("record {}: id", i + 1),
                message: "records not in entry order with increasing ids".into(),
            });
        }
    }
    Ok(SysTrace { records, meta })
}
