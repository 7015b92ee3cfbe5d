//! The `write` tool: create a file, or replace one whose current tag the agent gives.
//!
//! The tag proves the agent saw the version it replaces; when the agent was shown
//! a version with that tag, its full text must equal the file's, so a 16-bit
//! collision cannot pass. The new bytes keep the replaced file's CRLF endings
//! and BOM ([`nib_text::text::shape_like`]); [`crate::fs::write_atomic`] keeps its
//! mode and owner. A JSON, YAML or TOML file that parsed (or is new) and no
//! longer does is still written, with a warning naming the line.

use std::path::Path;
use std::sync::Arc;

use crate::context::TEXT_LIMIT;
use crate::context::args::{ArgError, Args};
use crate::context::{Ctx, ToolOutput};
use crate::fs::{self, FsError, Kind, Written};
use nib_text::filekind;
use nib_text::hashline::{self, Tag};
use nib_text::outline;
use nib_text::text::{self, Text};
use nib_text::validate;

/// Rows at most in the sparse map of a write's answer.
const MAP_ROWS: usize = 60;
/// Characters at most of one sparse-map row.
const MAP_WIDTH: usize = 200;

/// One `write` call: what the MCP server deserialises its arguments into
/// and what `nib write` parses its flags (and stdin) into. Its arguments
/// are the `write` schema's, taken leniently ([`Args`]): aliases
/// (`file_path`, `filePath`, `file`; `contents`, `text`, `file_text`), a
/// number or boolean as text, each slip noted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteRequest {
    /// The file to write.
    pub path: String,
    /// The whole new content.
    pub content: String,
    /// The file's current tag, required to overwrite it.
    pub tag: Option<String>,
    /// What the lenient parse took or ignored, printed under the answer.
    pub notes: Vec<String>,
}

impl WriteRequest {
    /// Takes a `write` call's arguments apart.
    pub fn from_args(mut args: Args) -> Result<WriteRequest, ArgError> {
        for alias in ["file_path", "filePath", "file"] {
            args.alias(alias, "path");
        }
        for alias in ["contents", "text", "file_text"] {
            args.alias(alias, "content");
        }
        let path = args.required_string("path")?;
        let content = args.required_string("content")?;
        let tag = args.string("tag")?;
        Ok(WriteRequest {
            path,
            content,
            tag,
            notes: args.finish(),
        })
    }
}

impl<'de> serde::Deserialize<'de> for WriteRequest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<WriteRequest, D::Error> {
        let map = serde_json::Map::deserialize(d)?;
        WriteRequest::from_args(Args::new(Some(map))).map_err(serde::de::Error::custom)
    }
}

/// Runs `write`.
pub fn run(request: WriteRequest, ctx: &Ctx) -> Result<ToolOutput, ArgError> {
    let WriteRequest {
        path: path_arg,
        content,
        tag: tag_arg,
        mut notes,
    } = request;

    let ws = ctx.workspace;
    let path = ws.resolve(&path_arg);
    let shown = ws.display(&path);
    let fail = |what: String, hint: &str| {
        ToolOutput::error(format!(
            "write {shown}: {what}. Nothing was written.\nhint: {hint}\n"
        ))
    };
    let given_tag = match parse_tag(tag_arg.as_deref()) {
        Ok(t) => t,
        Err((what, hint)) => return Ok(fail(what, &hint)),
    };
    if content.len() as u64 > TEXT_LIMIT {
        return Ok(fail(
            format!(
                "the content is {} bytes, over the 8 MiB limit",
                content.len()
            ),
            "write smaller files",
        ));
    }

    let old = match read_old(ctx, &path) {
        Ok(o) => o,
        Err((what, hint)) => return Ok(fail(what, &hint)),
    };

    let old_text = old.as_deref().map(Text::decode);
    if let Err((what, hint)) = check_overwrite(
        ctx,
        &path,
        &shown,
        old.as_deref(),
        old_text.as_ref(),
        given_tag,
    ) {
        return Ok(fail(what, &hint));
    }
    if old.is_none() && given_tag.is_some() {
        notes.push("the file did not exist, so the tag was not needed".into());
    }

    let bytes = text::shape_like(&content, old_text.as_ref());
    let warnings = syntax_warnings(&path, old.as_deref(), &bytes);

    let fs_failure = |e: FsError| {
        let hint = match e {
            FsError::Hardlinked(_) => {
                "nib does not write hardlinked files; copy it first, or unlink the other names"
            }
            FsError::OutsideRoots => "write inside the project's roots",
            FsError::Symlink => "write the file the link points to, by its own path",
            _ => "check the path and its permissions",
        };
        fail(e.to_string(), hint)
    };
    let target = match ctx.write_target(&path) {
        Ok(t) => t,
        Err(crate::context::TargetError::NeedsApproval(req)) => {
            return Ok(ToolOutput::needs_approval(req));
        }
        Err(crate::context::TargetError::Fs(e)) => return Ok(fs_failure(e)),
    };
    let written = if target.old.is_some() {
        Written::Replaced
    } else {
        Written::Created
    };
    let undo_files = vec![crate::undo::FileChange {
        path: target.path.clone(),
        before: old.clone(),
        after: Some(bytes.clone()),
    }];
    ctx.about_to_place(&target.path, &bytes);
    let step = crate::tools::edit::journal::Step::Place {
        target,
        bytes: bytes.clone(),
        like: None,
    };
    if let Err(e) =
        crate::tools::edit::journal::commit_all(&ctx.settings.state_dir, vec![step], None)
    {
        return Ok(fail(e.message, "check the path and its permissions"));
    }
    crate::undo::record(
        &ctx.settings.state_dir,
        ctx.workspace.project_dir(),
        &ctx.scope,
        "write",
        undo_files,
    );
    ctx.consume_approvals([path.as_path()]);

    let tag = Tag::of(&bytes);
    let new_text = Arc::new(Text::decode(&bytes));
    if let Ok(canonical) = fs::canonical(&path) {
        ctx.with_seen(|seen| seen.record(&canonical, tag, &new_text, 1..=new_text.len()));
    }
    let mut out = hashline::header(&shown, tag);
    out.push('\n');
    let n = new_text.len();
    let lines_word = if n == 1 { "line" } else { "lines" };
    match (written, old_text.as_ref()) {
        (Written::Created, _) | (_, None) => {
            out.push_str(&format!("[created: {n} {lines_word}]\n"))
        }
        (Written::Replaced, Some(o)) => out.push_str(&format!(
            "[replaced {} lines with {n} {lines_word}]\n",
            o.len()
        )),
    }
    for row in sparse_map(&new_text, filekind::shape(&path)) {
        out.push_str(&row);
        out.push('\n');
    }
    for w in &warnings {
        out.push_str(w);
        out.push('\n');
    }
    crate::context::push_notes(&mut out, &notes);
    let mut answer = ToolOutput::ok(out);
    answer.written = vec![(shown.clone(), tag.to_string())];
    Ok(answer)
}

/// Why a write is refused: what happened, and the next step.
type Refused = (String, String);

/// A `[PATH#TAG]`-ish argument read as a tag (`3C4D`, `#3C4D`, `[a.rs#3C4D]`).
fn parse_tag(raw: Option<&str>) -> Result<Option<Tag>, Refused> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let t = raw.trim().trim_start_matches('[').trim_end_matches(']');
    let t = t.rsplit('#').next().unwrap_or(t);
    match Tag::parse(t) {
        Some(tag) => Ok(Some(tag)),
        None => Err((
            format!("\"{raw}\" is not a tag"),
            "a tag is the 4 hex digits after # in a [PATH#TAG] header, e.g. 3C4D".into(),
        )),
    }
}

/// The file's bytes before the write, or `None` when it does not exist;
/// refused for a folder or a special file.
fn read_old(ctx: &Ctx, path: &Path) -> Result<Option<Vec<u8>>, Refused> {
    match fs::stat(&ctx.scope, path) {
        Ok(st) => match st.kind {
            Kind::Dir => Err((
                "is a folder".into(),
                "give the path of a file inside it, e.g. DIR/name.txt".into(),
            )),
            Kind::Special(k) => Err((
                format!("is a {k}, not a regular file"),
                "write to a regular file".into(),
            )),
            Kind::File => match fs::read_file(&ctx.scope, path, TEXT_LIMIT) {
                Ok(f) => Ok(Some(f.bytes)),
                Err(e) => Err((e.to_string(), "check the path and its permissions".into())),
            },
        },
        Err(FsError::NotFound) => Ok(None),
        Err(e) => Err((e.to_string(), "check the path and its permissions".into())),
    }
}

/// Whether the write may replace what is there: not a binary file, and for
/// an existing file the current tag, naming the version the agent was shown.
fn check_overwrite(
    ctx: &Ctx,
    path: &Path,
    shown: &str,
    old: Option<&[u8]>,
    old_text: Option<&Text>,
    given_tag: Option<Tag>,
) -> Result<(), Refused> {
    // A binary file has no tag to give (read shows none): say so, rather
    // than ask for one.
    if let Some(bytes) = old
        && let Some(kind) = nib_text::filekind::binary_kind(path, &bytes[..bytes.len().min(8192)])
    {
        return Err((
            format!(
                "the file exists and is {kind} ({}); write replaces text files only",
                nib_text::readable::size(bytes.len() as u64)
            ),
            format!(
                "to replace it with text, move it to the trash first (nibash: rm {shown}), then write"
            ),
        ));
    }
    if let (Some(bytes), Some(old_text)) = (old, old_text) {
        let current = Tag::of(bytes);
        let Some(given) = given_tag else {
            return Err((
                "the file exists, and overwriting it needs its current tag".into(),
                format!(
                    "read {shown} and pass the tag from its [{shown}#TAG] header, or use edit to change lines"
                ),
            ));
        };
        if given != current {
            return Err((
                format!("the tag #{given} is stale: the file has changed since that version"),
                format!("read {shown} again and write with its new tag"),
            ));
        }
        if let Ok(canonical) = fs::canonical(path) {
            let collision = ctx.with_seen(|seen| {
                seen.versions(&canonical).any(|v| v.tag == given)
                    && seen.version_matching(&canonical, given, old_text).is_none()
            });
            if collision {
                return Err((
                    format!(
                        "the tag #{given} matches, but the file's text is not the version you were shown (a tag collision)"
                    ),
                    format!("read {shown} again before overwriting it"),
                ));
            }
        }
    }

    Ok(())
}

/// A warning when the write breaks a JSON, YAML or TOML file that parsed.
fn syntax_warnings(path: &Path, old: Option<&[u8]>, bytes: &[u8]) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(syntax) = filekind::syntax(path) {
        let was_sound = old
            .map(|b| validate::check(syntax, &String::from_utf8_lossy(b)).is_none())
            .unwrap_or(true);
        if was_sound && let Some(err) = validate::check(syntax, &String::from_utf8_lossy(bytes)) {
            warnings.push(format!(
                    "[warning: this {} no longer parses: line {}: {}. The file was written; fix it with edit]",
                    validate::name(syntax),
                    err.line,
                    err.message
                ));
        }
    }
    warnings
}

/// `N~TEXT` rows: the outline lines, plus the first and last line.
fn sparse_map(text: &Text, shape: filekind::Shape) -> Vec<String> {
    if text.is_empty() {
        return Vec::new();
    }
    let mut lines = outline::outline(&text.lines, shape);
    lines.push(1);
    lines.push(text.len());
    lines.sort_unstable();
    lines.dedup();
    if lines.len() > MAP_ROWS {
        let last = text.len();
        lines.truncate(MAP_ROWS - 1);
        lines.push(last);
    }
    lines
        .into_iter()
        .map(|n| {
            let line = text.line(n).unwrap_or("");
            let cut: String = line.chars().take(MAP_WIDTH).collect();
            hashline::sparse_row(n, &cut)
        })
        .collect()
}
