//! `read`'s typed request: the paths, the options ([`ReadOptions`]) and the
//! limits they stay within, read from a call's lenient arguments. Reading
//! the paths is `paths`'.

use crate::context::args::{ArgError, Args};

use super::versions;

/// Default for `maxLineLength`.
pub const DEFAULT_MAX_LINE: usize = 2000;
/// Upper bound for `maxLineLength`.
pub const MAX_MAX_LINE: usize = 2 * 1024 * 1024;
/// Rows shown of a large flat-data file.
pub const FLAT_HEAD: usize = 100;
/// Entries shown of a folder.
pub const LISTING_LIMIT: usize = 500;

/// Options that apply to every path of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadOptions {
    /// Lines longer than this (in characters) are cut and not anchors.
    pub max_line_length: usize,
    /// Bare lines, no anchors, no cap.
    pub plain: bool,
    /// One line of facts per file.
    pub info: bool,
    /// How lines already seen and unchanged print.
    pub collapse: versions::Collapse,
    /// The outline, whatever the file's size (of the selected lines only,
    /// when lines are selected): how a cut outline is continued.
    pub outline: bool,
}

impl Default for ReadOptions {
    fn default() -> ReadOptions {
        ReadOptions {
            max_line_length: DEFAULT_MAX_LINE,
            plain: false,
            info: false,
            collapse: versions::Collapse::Run,
            outline: false,
        }
    }
}

/// One `read` call: what the MCP server deserialises its arguments into,
/// what `nib read` parses its flags into, and what the worker's own commands
/// and the providers' locations build. Its arguments are the `read` schema's
/// (`paths`, `maxLineLength`, `plain`, `info`, `full`, `outline`,
/// `collapse`), taken leniently ([`Args`]): aliases (`file_path`, `path`,
/// …), `offset`/`limit` as a line selector, numbers and booleans as text,
/// a list as JSON text or one string, each slip noted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadRequest {
    /// Files or folders, each with an optional selector.
    pub paths: Vec<String>,
    /// Options for every path.
    pub options: ReadOptions,
    /// What the lenient parse took or ignored, printed under the answer.
    pub notes: Vec<String>,
}

impl ReadRequest {
    /// A read of these paths with the default options.
    pub fn new(paths: Vec<String>) -> ReadRequest {
        ReadRequest {
            paths,
            ..ReadRequest::default()
        }
    }

    /// Sets `maxLineLength`: 0 is the default, over [`MAX_MAX_LINE`] is cut
    /// to it with a note.
    pub fn max_line_length(&mut self, n: usize) {
        self.options.max_line_length = match n {
            0 => DEFAULT_MAX_LINE,
            n if n > MAX_MAX_LINE => {
                self.notes
                    .push(format!("maxLineLength is at most {MAX_MAX_LINE}"));
                MAX_MAX_LINE
            }
            n => n,
        };
    }

    /// Takes a `read` call's arguments apart.
    pub fn from_args(mut args: Args) -> Result<ReadRequest, ArgError> {
        for alias in ["path", "file_path", "filePath", "file", "files"] {
            args.alias(alias, "paths");
        }
        let mut paths = args
            .string_list("paths")?
            .ok_or_else(|| ArgError("\"paths\" is required: a list of files or folders".into()))?;
        if paths.is_empty() {
            return Err(ArgError(
                "\"paths\" is empty: name at least one file or folder".into(),
            ));
        }
        let offset = args.usize("offset")?;
        let limit = args.usize("limit")?;
        if offset.is_some() || limit.is_some() {
            let start = offset.unwrap_or(1).max(1);
            let range = match limit {
                Some(n) if n > 0 => format!("{start}-{}", start.saturating_add(n - 1)),
                _ => format!("{start}-"),
            };
            args.note(format!("took offset/limit as the selector :{range}"));
            for p in &mut paths {
                if !p.contains(':') {
                    p.push(':');
                    p.push_str(&range);
                }
            }
        }
        let mut request = ReadRequest::new(paths);
        let max_line_length = args.usize("maxLineLength")?;
        request.notes = args.take_notes();
        if let Some(n) = max_line_length {
            request.max_line_length(n);
        }
        let plain = args.bool("plain")?.unwrap_or(false);
        let info = args.bool("info")?.unwrap_or(false);
        let full = args.bool("full")?.unwrap_or(false);
        let collapse_runs = args.bool("collapse")?.unwrap_or(true);
        let outline = args.bool("outline")?.unwrap_or(false);
        request.options.plain = plain;
        request.options.info = info;
        request.options.outline = outline;
        request.options.collapse = if full {
            versions::Collapse::Off
        } else if collapse_runs {
            versions::Collapse::Run
        } else {
            versions::Collapse::Sparse
        };
        request.notes.extend(args.finish());
        Ok(request)
    }
}

impl<'de> serde::Deserialize<'de> for ReadRequest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ReadRequest, D::Error> {
        let map = serde_json::Map::deserialize(d)?;
        ReadRequest::from_args(Args::new(Some(map))).map_err(serde::de::Error::custom)
    }
}
