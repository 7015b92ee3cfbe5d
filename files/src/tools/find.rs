//! The `find` tool: the files grep would search, with line counts, sizes and ages.
//!
//! The walk is [`crate::search::walk`] (the same rules as grep). Filters:
//! `glob`, `minSize` (`20k`, `1.5M`), `newer` (`30m`, `2h`, `3d`). Sorted by
//! path (grouped by folder: each folder printed once, its files indented under
//! it), by size (largest first) or by modification (newest first). Pages hold
//! 200 files; a larger listing asked for without `skip` shows folders with
//! their file counts instead.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use crate::context::args::{ArgError, Args};
use crate::context::{Ctx, ToolOutput};
use crate::fs;
use crate::search::{self, GlobFilter, WalkOptions};
use nib_text::readable;

/// Files per page.
pub const PAGE: usize = 200;

/// The order of the listing (`sort`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sort {
    /// By path, grouped by folder (the default).
    #[default]
    Path,
    /// Largest first.
    Size,
    /// Newest first.
    Modified,
}

impl Sort {
    /// Reads a `sort` value; `name` is what the caller calls it in the
    /// error (`"sort"` in a tool call, `--sort` on the command line).
    pub fn parse(text: &str, name: &str) -> Result<Sort, ArgError> {
        match text {
            "path" => Ok(Sort::Path),
            "size" => Ok(Sort::Size),
            "modified" | "mtime" | "time" => Ok(Sort::Modified),
            other => Err(ArgError(format!(
                "{name} is path, size or modified, not \"{other}\""
            ))),
        }
    }
}

/// Reads a `minSize` value (`20k`, `1.5M`) as bytes; `name` is what the
/// caller calls it in the error.
pub fn min_size_arg(text: &str, name: &str) -> Result<u64, ArgError> {
    parse_size(text).ok_or_else(|| {
        ArgError(format!(
            "{name} is a size such as 20k or 1.5M, not \"{text}\""
        ))
    })
}

/// Reads a `newer` value (`30m`, `2h`, `3d`); `name` is what the caller
/// calls it in the error.
pub fn newer_arg(text: &str, name: &str) -> Result<Duration, ArgError> {
    parse_age(text).ok_or_else(|| {
        ArgError(format!(
            "{name} is an age such as 30m, 2h or 3d, not \"{text}\""
        ))
    })
}

/// One `find` call: what the MCP server deserialises its arguments into
/// and what `nib find` parses its flags into. Its arguments are the `find`
/// schema's, taken leniently ([`Args`]): aliases (`path`, `pattern` for
/// `glob`), numbers and booleans as text, lists as JSON text or one
/// string, each slip noted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FindRequest {
    /// Files or folders to list (empty: the project).
    pub paths: Vec<String>,
    /// File name globs; `!glob` excludes.
    pub globs: Vec<String>,
    /// Only files of at least this many bytes.
    pub min_size: Option<u64>,
    /// Only files modified within this age.
    pub newer: Option<Duration>,
    /// The order.
    pub sort: Sort,
    /// List what ignore rules would skip.
    pub no_ignore: bool,
    /// Files to skip (paging); `None`: a large listing shows folders.
    pub skip: Option<usize>,
    /// What the lenient parse took or ignored, printed under the answer.
    pub notes: Vec<String>,
}

impl FindRequest {
    /// Takes a `find` call's arguments apart.
    pub fn from_args(mut args: Args) -> Result<FindRequest, ArgError> {
        args.alias("path", "paths");
        args.alias("pattern", "glob");
        let paths = args.string_list("paths")?.unwrap_or_default();
        let globs = args.string_list("glob")?.unwrap_or_default();
        let min_size = match args.string("minSize")? {
            None => None,
            Some(s) => Some(min_size_arg(&s, "\"minSize\"")?),
        };
        let newer = match args.string("newer")? {
            None => None,
            Some(s) => Some(newer_arg(&s, "\"newer\"")?),
        };
        let sort = match args.string("sort")? {
            None => Sort::Path,
            Some(s) => Sort::parse(&s, "\"sort\"")?,
        };
        let no_ignore = args.bool("noIgnore")?.unwrap_or(false);
        let skip = args.usize("skip")?;
        Ok(FindRequest {
            paths,
            globs,
            min_size,
            newer,
            sort,
            no_ignore,
            skip,
            notes: args.finish(),
        })
    }
}

impl<'de> serde::Deserialize<'de> for FindRequest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<FindRequest, D::Error> {
        let map = serde_json::Map::deserialize(d)?;
        FindRequest::from_args(Args::new(Some(map))).map_err(serde::de::Error::custom)
    }
}

/// `20k`, `1.5M`, `300`, `2G` → bytes.
pub fn parse_size(s: &str) -> Option<u64> {
    let t = s.trim();
    let (num, mult) = match t.chars().last()?.to_ascii_lowercase() {
        'k' => (&t[..t.len() - 1], 1024.0),
        'm' => (&t[..t.len() - 1], 1024.0 * 1024.0),
        'g' => (&t[..t.len() - 1], 1024.0 * 1024.0 * 1024.0),
        'b' => (&t[..t.len() - 1], 1.0),
        _ => (t, 1.0),
    };
    let n: f64 = num.trim().parse().ok()?;
    (n >= 0.0).then_some((n * mult) as u64)
}

/// `45s`, `30m`, `2h`, `3d`, `1w` → a duration.
pub fn parse_age(s: &str) -> Option<Duration> {
    let t = s.trim();
    let unit = t.chars().last()?;
    let n: f64 = t[..t.len() - unit.len_utf8()].trim().parse().ok()?;
    let secs = match unit {
        's' => 1.0,
        'm' => 60.0,
        'h' => 3600.0,
        'd' => 86400.0,
        'w' => 7.0 * 86400.0,
        _ => return None,
    };
    (n >= 0.0).then(|| Duration::from_secs_f64(n * secs))
}

/// Runs `find`.
pub fn run(request: FindRequest, ctx: &Ctx) -> Result<ToolOutput, ArgError> {
    let FindRequest {
        paths,
        globs,
        min_size,
        newer,
        sort,
        no_ignore,
        skip,
        notes,
    } = request;

    let globs = match GlobFilter::new(&globs) {
        Ok(g) => g,
        Err(e) => return Ok(ToolOutput::error(format!("find: {e}. Nothing was listed."))),
    };
    let ws = ctx.workspace;
    let mut roots = Vec::new();
    for p in if paths.is_empty() {
        vec![".".to_string()]
    } else {
        paths
    } {
        let r = ws.resolve(&p);
        if !fs::exists(&ctx.scope, &r) {
            let hint = ws
                .unknown_name(&p)
                .map(|h| format!("\nhint: {h}"))
                .unwrap_or_default();
            return Ok(ToolOutput::error(format!(
                "find: {}: no such file or folder. Nothing was listed.{hint}",
                ws.display(&r)
            )));
        }
        roots.push(r);
    }
    let now = SystemTime::now();
    // What sorting and the folder summary need of each file, and no more:
    // a walk of a large tree keeps tens of thousands of these.
    let found: Mutex<Walked> = Mutex::default();
    let visit = |path: &Path, _rel: &Path| -> bool {
        if let Ok(st) = fs::stat(&ctx.scope, path) {
            let big_enough = min_size.is_none_or(|m| st.size >= m);
            let recent = newer.is_none_or(|age| {
                st.modified
                    .and_then(|m| now.duration_since(m).ok())
                    .is_some_and(|d| d <= age)
            });
            if big_enough
                && recent
                && let Ok(mut w) = found.lock()
            {
                w.push(path, st.size, st.modified);
            }
        }
        true
    };
    let report = search::walk(
        &roots,
        &WalkOptions {
            no_ignore,
            globs,
            scope: ctx.scope.clone(),
        },
        &visit,
    );
    let Walked { paths, mut files } = found.into_inner().unwrap_or_default();
    let path_of = |f: &Found| -> &Path { f.path(&paths) };
    match sort {
        Sort::Path => files.sort_by(|a, b| path_of(a).cmp(path_of(b))),
        Sort::Size => files.sort_by(|a, b| b.size.cmp(&a.size).then(path_of(a).cmp(path_of(b)))),
        Sort::Modified => {
            files.sort_by(|a, b| b.modified.cmp(&a.modified).then(path_of(a).cmp(path_of(b))))
        }
    }
    let total = files.len();
    let order = match sort {
        Sort::Path => "by path",
        Sort::Size => "largest first",
        Sort::Modified => "newest first",
    };
    let mut out = format!("{}, {order}\n", plural(total, "file", "files"));
    if report.truncated {
        out.push_str(&format!(
            "[the walk stopped after {} files; name narrower paths]\n",
            search::MAX_FILES
        ));
    }
    if total > PAGE && skip.is_none() {
        out.push_str(&folders(&files, &paths, ctx));
        out.push_str(&format!(
            "[{total} files are more than a page of {PAGE}: pass skip: 0 for the files, or narrow with paths, glob, minSize or newer]\n"
        ));
    } else {
        let skip = skip.unwrap_or(0);
        let page = &files[skip.min(total)..(skip + PAGE).min(total)];
        out.push('\n');
        let shown: Vec<(String, String)> = page
            .iter()
            .filter_map(|f| {
                // Stat again for the page's facts (a file removed since the
                // walk drops out).
                let path = path_of(f);
                let st = fs::stat(&ctx.scope, path).ok()?;
                Some((
                    ws.display(path),
                    crate::tools::read::file_facts(&ctx.scope, path, &st, now),
                ))
            })
            .collect();
        out.push_str(&page_rows(&shown, sort == Sort::Path));
        if skip > 0 || skip + page.len() < total {
            out.push_str(&format!(
                "[files {}-{} of {total}",
                skip + 1,
                skip + page.len()
            ));
            if skip + page.len() < total {
                out.push_str(&format!("; skip: {} for the next page", skip + page.len()));
            }
            out.push_str("]\n");
        }
    }
    crate::context::push_notes(&mut out, &notes);
    Ok(ToolOutput::ok(out))
}

/// A page of files, each with its facts; sorted by path, grouped under
/// their folders (`dir/` then indented names).
fn page_rows(shown: &[(String, String)], by_path: bool) -> String {
    let mut out = String::new();
    if !by_path {
        for (path, facts) in shown {
            out.push_str(&format!("{path} ({facts})\n"));
        }
        return out;
    }
    let mut current: Option<String> = None;
    for (path, facts) in shown {
        let (dir, name) = match path.rsplit_once('/') {
            Some((d, n)) => (Some(d.to_string()), n),
            None => (None, path.as_str()),
        };
        match &dir {
            Some(d) => {
                if current.as_deref() != Some(d.as_str()) {
                    out.push_str(&format!("{d}/\n"));
                    current = Some(d.clone());
                }
                out.push_str(&format!("  {name} ({facts})\n"));
            }
            None => {
                current = None;
                out.push_str(&format!("{name} ({facts})\n"));
            }
        }
    }

    out
}

/// The files a walk found: their paths in one buffer (a walk of a large
/// tree keeps tens of thousands; one allocation per path cost a third more
/// memory than the bytes themselves).
#[derive(Default)]
struct Walked {
    paths: Vec<u8>,
    files: Vec<Found>,
}

impl Walked {
    fn push(&mut self, path: &Path, size: u64, modified: Option<SystemTime>) {
        use std::os::unix::ffi::OsStrExt;
        let bytes = path.as_os_str().as_bytes();
        // The walk stops at 200,000 files, far below 4 GiB of paths.
        let (Ok(at), Ok(len)) = (u32::try_from(self.paths.len()), u32::try_from(bytes.len()))
        else {
            return;
        };
        // Nanoseconds since 1970 sort as the times do (0: unknown or earlier).
        let modified = modified
            .and_then(|m| m.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        self.files.push(Found {
            at,
            len,
            size,
            modified,
        });
        self.paths.extend_from_slice(bytes);
    }
}

/// A file the walk found: where its path is in [`Walked::paths`], and the
/// facts sorting and the folder summary need.
struct Found {
    at: u32,
    len: u32,
    size: u64,
    /// Nanoseconds since 1970, for sorting only.
    modified: u64,
}

impl Found {
    fn path<'a>(&self, paths: &'a [u8]) -> &'a Path {
        use std::os::unix::ffi::OsStrExt;
        let (at, len) = (self.at as usize, self.len as usize);
        Path::new(std::ffi::OsStr::from_bytes(
            paths.get(at..at + len).unwrap_or_default(),
        ))
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Folders with their file counts and sizes, coarsened until they fit a page.
fn folders(files: &[Found], paths: &[u8], ctx: &Ctx) -> String {
    // Each folder once (files sum into their folder), then shown.
    let mut by_folder: BTreeMap<&Path, (usize, u64)> = BTreeMap::new();
    for f in files {
        let g = by_folder
            .entry(f.path(paths).parent().unwrap_or(Path::new("")))
            .or_insert((0, 0));
        g.0 += 1;
        g.1 += f.size;
    }
    let shown: Vec<(String, usize, u64)> = by_folder
        .into_iter()
        .map(|(dir, (n, size))| {
            let d = ctx.workspace.display(dir);
            (if d == "." { String::new() } else { d }, n, size)
        })
        .collect();
    let mut depth = 6;
    loop {
        // Keys borrow from the shown folders: a folder's first `depth` components.
        let mut groups: BTreeMap<&str, (usize, u64)> = BTreeMap::new();
        for (dir, n, size) in &shown {
            let key = if dir.is_empty() {
                "."
            } else {
                dir.match_indices('/')
                    .nth(depth - 1)
                    .map_or(dir.as_str(), |(i, _)| &dir[..i])
            };
            let g = groups.entry(key).or_insert((0, 0));
            g.0 += n;
            g.1 += size;
        }
        if groups.len() <= PAGE || depth == 1 {
            let mut out = String::from("\n");
            for (dir, (n, size)) in groups.iter().take(PAGE) {
                out.push_str(&format!(
                    "{dir}/ ({}, {})\n",
                    plural(*n, "file", "files"),
                    readable::size(*size)
                ));
            }
            if groups.len() > PAGE {
                out.push_str(&format!("[{PAGE} of {} folders shown]\n", groups.len()));
            }
            return out;
        }
        depth -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_ages_parse() {
        assert_eq!(parse_size("20k"), Some(20 * 1024));
        assert_eq!(parse_size("1.5M"), Some(1536 * 1024));
        assert_eq!(parse_size("300"), Some(300));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_age("30m"), Some(Duration::from_secs(1800)));
        assert_eq!(parse_age("3d"), Some(Duration::from_secs(3 * 86400)));
        assert_eq!(parse_age("3y"), None);
    }
}
