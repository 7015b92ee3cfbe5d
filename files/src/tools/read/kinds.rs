//! The blocks of paths that are not a text file's rows: a folder's
//! listing, an image, a SQLite database, a binary refused, and a path that
//! is missing (with the nearest names). Text files are `rows`'.

use std::path::Path;
use std::time::SystemTime;

use crate::context::Ctx;
use crate::fs::{self, FsError, Kind};
use nib_text::blocks::{Block, Row};
use nib_text::filekind;
use nib_text::readable;
use nib_text::text::Text;

use super::request::{LISTING_LIMIT, ReadOptions};
use super::{image, sqlite};

/// An image as image content, scaled to what a model sees.
pub(super) fn image_block(shown: &str, kind: &str, bytes: &[u8]) -> Block {
    match image::scale(bytes) {
        Ok(img) => {
            let (ow, oh) = img.original;
            let (sw, sh) = img.sent;
            let scaled = if (ow, oh) == (sw, sh) {
                String::new()
            } else {
                format!(", sent at {sw}×{sh}")
            };
            Block {
                head: format!(
                    "[{shown}] {} {ow}×{oh}{scaled}",
                    kind.trim_start_matches("a ")
                ),
                image: Some((img.base64, img.mime.to_string())),
                ..Block::default()
            }
        }
        Err(e) => Block::failure(format!("{shown}: {e}. Nothing was read.")),
    }
}

/// A SQLite database: its tables, a table's rows, or a read-only query.
pub(super) fn database(ctx: &Ctx, db: &str, rest: Option<&str>) -> Block {
    let path = ctx.workspace.resolve(db);
    let shown = ctx.workspace.display(&path);
    let file = match fs::open_regular(&ctx.scope, &path) {
        Ok(f) => f,
        Err(e) => {
            return missing(
                &ctx.scope,
                &path,
                &shown,
                &e,
                ctx.workspace.unknown_name(db),
            );
        }
    };
    let answer = match rest {
        None => {
            sqlite::overview(&file).map(|t| (format!("SQLite database, {} tables", t.len()), t))
        }
        Some(q) => sqlite::query(&file, q),
    };
    match answer {
        Ok((what, rows)) => Block {
            head: format!("[{shown}] {what}"),
            rows: rows.into_iter().map(Row::plain).collect(),
            shown_path: shown,
            ..Block::default()
        },
        Err(e) => Block::failure(format!(
            "{shown}: {e}.\nhint: read {shown} to list its tables; {shown}:TABLE shows rows, {shown}:SELECT … runs a read-only query"
        )),
    }
}

pub(super) fn refuse_binary(shown: &str, kind: &str, size: u64) -> Block {
    let hint = match kind {
        "a PDF" => "nib does not read PDFs; use the client's own file viewer for them",
        k if k.ends_with("image") => "images are shown whole, without a selector",
        "a SQLite database" => "read it without a selector for its tables, or PATH:TABLE",
        _ => "nib reads text files only",
    };
    Block::failure(format!(
        "{shown} is {kind} ({}); {hint}. Nothing was read.",
        readable::size(size)
    ))
}

pub(super) fn missing(
    scope: &fs::Scope,
    path: &Path,
    shown: &str,
    e: &FsError,
    unknown: Option<String>,
) -> Block {
    let mut msg = format!("{shown}: {e}. Nothing was read.");
    if let Some(why) = unknown.filter(|_| matches!(e, FsError::NotFound)) {
        msg.push_str(&format!("\nhint: {why}"));
    } else if matches!(e, FsError::NotFound) {
        let parent = path.parent().unwrap_or(path);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let near = fs::list_dir(scope, parent)
            .map(|entries| {
                let names: Vec<String> = entries.into_iter().map(|e| e.name).collect();
                readable::similar(&name, names.iter().map(String::as_str))
            })
            .unwrap_or_default();
        if near.is_empty() {
            msg.push_str("\nhint: check the path; read the folder it should be in to list it");
        } else {
            msg.push_str(&format!("\nhint: did you mean {}?", near.join(", ")));
        }
    }
    Block::failure(msg)
}

pub(super) fn listing(
    scope: &fs::Scope,
    path: &Path,
    shown: &str,
    opts: ReadOptions,
    now: SystemTime,
) -> Block {
    let mut entries = match fs::list_dir(scope, path) {
        Ok(e) => e,
        Err(e) => return Block::failure(format!("{shown}: {e}. Nothing was read.")),
    };
    entries.sort_by(|a, b| {
        let ad = a.stat.as_ref().is_some_and(|s| s.kind == Kind::Dir);
        let bd = b.stat.as_ref().is_some_and(|s| s.kind == Kind::Dir);
        bd.cmp(&ad).then_with(|| a.name.cmp(&b.name))
    });
    let dirs = entries
        .iter()
        .filter(|e| e.stat.as_ref().is_some_and(|s| s.kind == Kind::Dir))
        .count();
    let files = entries.len() - dirs;
    let base = if shown == "." {
        String::new()
    } else {
        format!("{shown}/")
    };
    let head = format!(
        "[{}] {dirs} folder{}, {files} file{}",
        if base.is_empty() { "./" } else { &base },
        if dirs == 1 { "" } else { "s" },
        if files == 1 { "" } else { "s" }
    );
    if opts.info {
        return Block {
            head,
            ..Block::default()
        };
    }
    let total = entries.len();
    let mut rows = Vec::new();
    for e in entries.iter().take(LISTING_LIMIT) {
        let name = nib_text::path_text::escape_control(&e.name);
        let row = match &e.stat {
            Some(s) if s.kind == Kind::Dir => {
                if e.name == ".git" {
                    format!("{name}/")
                } else {
                    let n = fs::list_dir(scope, &e.path).map(|v| v.len()).unwrap_or(0);
                    format!("{name}/ ({n} entr{})", if n == 1 { "y" } else { "ies" })
                }
            }
            Some(s) if s.kind == Kind::File => {
                format!("{name} ({})", file_facts(scope, &e.path, s, now))
            }
            Some(s) => match s.kind {
                Kind::Special(k) => format!("{name} ({k})"),
                _ => name,
            },
            None => format!("{name} (dangling link)"),
        };
        rows.push(Row::plain(row));
    }
    let mut notes = Vec::new();
    if total > LISTING_LIMIT {
        notes.push(format!("[{LISTING_LIMIT} of {total} entries shown]"));
    }
    Block {
        head,
        rows,
        notes,
        shown_path: shown.to_string(),
        ..Block::default()
    }
}

/// `120 lines, 4.1 KiB, 3m ago` or `image/png, 12.0 KiB, 40d ago`.
pub fn file_facts(scope: &fs::Scope, path: &Path, stat: &fs::Stat, now: SystemTime) -> String {
    let age = readable::age(stat.modified, now);
    let size = readable::size(stat.size);
    if stat.size > 1024 * 1024 {
        return format!("{size}, {age}");
    }
    match fs::read_file(scope, path, 1024 * 1024) {
        Ok(f) => {
            let head = &f.bytes[..f.bytes.len().min(8192)];
            if let Some(mime) = filekind::mime_type(path, head) {
                format!("{mime}, {size}, {age}")
            } else {
                let lines = Text::decode(&f.bytes).len();
                format!(
                    "{lines} line{}, {size}, {age}",
                    if lines == 1 { "" } else { "s" }
                )
            }
        }
        Err(_) => format!("{size}, {age}"),
    }
}
