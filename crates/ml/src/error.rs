//! The crate's error type: every variant says which field or line is at fault.

use alloc::string::String;
use core::fmt;

/// Result alias for this crate.
pub type Result<T> = core::result::Result<T, Error>;

/// What went wrong. Context is kept as structure (field names, line numbers) so callers can
/// match on it and messages can name the culprit.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// The input ended while `field` was being read.
    Truncated {
        /// The field that could not be read completely.
        field: &'static str,
    },
    /// The file does not start with the iolearn model magic.
    BadMagic,
    /// The file's format version is not one this build reads.
    UnsupportedVersion {
        /// Version found in the file.
        found: u16,
        /// Highest version this build understands.
        supported: u16,
    },
    /// The stored checksum does not match the contents.
    ChecksumMismatch {
        /// Checksum stored in the file.
        stored: u32,
        /// Checksum computed over the contents.
        computed: u32,
    },
    /// The model was trained for another feature schema.
    SchemaMismatch {
        /// Schema the caller expects.
        expected: String,
        /// Schema stored in the model.
        found: String,
    },
    /// A field holds a value that cannot be right.
    Invalid {
        /// The field at fault.
        field: &'static str,
        /// Why it is wrong.
        reason: String,
    },
    /// A text input could not be parsed.
    Parse {
        /// 1-based line number.
        line: usize,
        /// What was wrong with it.
        reason: String,
    },
    /// Array shapes do not fit together.
    Shape {
        /// What was being checked.
        what: &'static str,
        /// Expected size.
        expected: usize,
        /// Actual size.
        found: usize,
    },
    /// An I/O error, with the path it concerns.
    #[cfg(feature = "std")]
    Io {
        /// The file or directory.
        path: std::path::PathBuf,
        /// The underlying error, as text (so the error stays `Clone` and `PartialEq`).
        reason: String,
    },
    /// An error inside a named file.
    #[cfg(feature = "std")]
    InFile {
        /// The file.
        path: std::path::PathBuf,
        /// The error.
        source: alloc::boxed::Box<Error>,
    },
}

impl Error {
    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Error::Invalid {
            field,
            reason: reason.into(),
        }
    }

    pub(crate) fn parse(line: usize, reason: impl Into<String>) -> Self {
        Error::Parse {
            line,
            reason: reason.into(),
        }
    }

    /// Attach a file path to this error.
    #[cfg(feature = "std")]
    pub fn in_file(self, path: impl Into<std::path::PathBuf>) -> Self {
        match self {
            e @ (Error::Io { .. } | Error::InFile { .. }) => e,
            e => Error::InFile {
                path: path.into(),
                source: alloc::boxed::Box::new(e),
            },
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated { field } => write!(f, "truncated model file: ended while reading {field}"),
            Error::BadMagic => write!(f, "not an iolearn model file (bad magic; expected \"IOLM\")"),
            Error::UnsupportedVersion { found, supported } => write!(
                f,
                "unsupported model format version {found} (this build reads versions 1..={supported})"
            ),
            Error::ChecksumMismatch { stored, computed } => write!(
                f,
                "model file is corrupted: checksum {computed:#010x} does not match stored {stored:#010x}"
            ),
            Error::SchemaMismatch { expected, found } => write!(
                f,
                "model was trained for feature schema \"{found}\", but \"{expected}\" was expected"
            ),
            Error::Invalid { field, reason } => write!(f, "invalid {field}: {reason}"),
            Error::Parse { line, reason } => write!(f, "line {line}: {reason}"),
            Error::Shape { what, expected, found } => {
                write!(f, "{what}: expected {expected}, found {found}")
            }
            #[cfg(feature = "std")]
            Error::Io { path, reason } => write!(f, "{}: {reason}", path.display()),
            #[cfg(feature = "std")]
            Error::InFile { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Error {}

/// Quote untrusted text in an error: at most 40 characters, control characters escaped (the
/// `no_std` twin of `iolearn_safeio::excerpt`, which needs `std`).
pub(crate) fn quote(s: &str) -> String {
    let mut out: String = s.chars().take(40).flat_map(char::escape_debug).collect();
    if s.chars().nth(40).is_some() {
        out.push_str("...");
    }
    alloc::format!("\"{out}\"")
}
