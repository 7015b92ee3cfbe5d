//! SQLite databases: tables with columns and row counts, a table's rows
//! (`file.db:TABLE`, the last N with `file.db:TABLE:-N`), or a read-only
//! query (`file.db:SELECT …`). The database is opened read-only and
//! immutable, through the fd [`crate::fs`] opened (so confinement holds), and
//! a statement that could write is refused before it runs.

use std::fs::File;
use std::os::fd::AsRawFd;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

/// Rows shown at most.
pub const MAX_ROWS: usize = 200;
/// Characters of one value shown at most.
const MAX_VALUE: usize = 200;

/// Whether a name looks like a SQLite file.
pub fn is_db_name(path: &str) -> bool {
    let p = path.to_ascii_lowercase();
    p.ends_with(".db") || p.ends_with(".sqlite") || p.ends_with(".sqlite3")
}

/// `file.db:REST` → (`file.db`, `REST`), when the part before the first
/// `:` names a database file.
pub fn split(arg: &str) -> Option<(&str, &str)> {
    let (path, rest) = arg.split_once(':')?;
    (is_db_name(path) && !rest.is_empty()).then_some((path, rest))
}

fn open(file: &File) -> Result<Connection, String> {
    let uri = format!(
        "file:/proc/self/fd/{}?mode=ro&immutable=1",
        file.as_raw_fd()
    );
    Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| format!("the database does not open: {e}"))
}

fn value(v: ValueRef<'_>) -> String {
    let s = match v {
        ValueRef::Null => "NULL".to_string(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(r) => r.to_string(),
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
        ValueRef::Blob(b) => format!("<blob, {} bytes>", b.len()),
    };
    let s = s.replace('\n', "\\n");
    if s.chars().count() > MAX_VALUE {
        let cut: String = s.chars().take(MAX_VALUE).collect();
        format!("{cut}…")
    } else {
        s
    }
}

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The tables, their columns and row counts.
pub fn overview(file: &File) -> Result<Vec<String>, String> {
    let conn = open(file)?;
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .map_err(|e| e.to_string())?;
    let names: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .map_err(|e| e.to_string())?
        .filter_map(Result::ok)
        .collect();
    let mut out = Vec::new();
    for name in names {
        let mut cols = conn
            .prepare(&format!("PRAGMA table_info({})", quote_ident(&name)))
            .map_err(|e| e.to_string())?;
        let columns: Vec<String> = cols
            .query_map([], |r| {
                let n: String = r.get(1)?;
                let t: String = r.get(2)?;
                Ok(if t.is_empty() { n } else { format!("{n} {t}") })
            })
            .map_err(|e| e.to_string())?
            .filter_map(Result::ok)
            .collect();
        let count: i64 = conn
            .query_row(
                &format!("SELECT count(*) FROM {}", quote_ident(&name)),
                [],
                |r| r.get(0),
            )
            .unwrap_or(-1);
        out.push(format!("{name} ({count} rows): {}", columns.join(", ")));
    }
    Ok(out)
}

/// The answer to `file.db:REST`: a header line and rows.
pub fn query(file: &File, rest: &str) -> Result<(String, Vec<String>), String> {
    let conn = open(file)?;
    let trimmed = rest.trim();
    let first = trimmed
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_ascii_uppercase();
    let is_sql = matches!(
        first.as_str(),
        "SELECT"
            | "WITH"
            | "PRAGMA"
            | "EXPLAIN"
            | "VALUES"
            | "INSERT"
            | "UPDATE"
            | "DELETE"
            | "REPLACE"
            | "CREATE"
            | "DROP"
            | "ALTER"
            | "ATTACH"
            | "DETACH"
            | "VACUUM"
            | "REINDEX"
            | "ANALYZE"
            | "BEGIN"
    );
    let (sql, label) = if is_sql {
        (trimmed.to_string(), "query".to_string())
    } else {
        let (table, last) = match trimmed.rsplit_once(":-") {
            Some((t, n)) => (
                t,
                Some(
                    n.trim()
                        .parse::<usize>()
                        .map_err(|_| format!("\"-{n}\" is not a row count; write TABLE:-15"))?,
                ),
            ),
            None => (trimmed, None),
        };
        let t = quote_ident(table);
        match last {
            Some(n) => (
                format!(
                    "SELECT * FROM (SELECT rowid AS \"__nib_rowid\", * FROM {t} ORDER BY rowid DESC LIMIT {n}) ORDER BY \"__nib_rowid\""
                ),
                format!("the last {n} rows of {table}"),
            ),
            None => (
                format!("SELECT * FROM {t} LIMIT {}", MAX_ROWS + 1),
                format!("rows of {table}"),
            ),
        }
    };
    let mut stmt = conn
        .prepare(&sql)
        .map_err(|e| format!("the statement does not prepare: {e}"))?;
    if !stmt.readonly() {
        return Err("that statement would write; nib runs only read-only statements, so nothing was run and the database is unchanged".into());
    }
    let names: Vec<String> = stmt
        .column_names()
        .into_iter()
        .filter(|n| *n != "__nib_rowid")
        .map(str::to_string)
        .collect();
    let skip_first = stmt
        .column_names()
        .first()
        .is_some_and(|n| *n == "__nib_rowid");
    let ncols = stmt.column_count();
    let mut rows = vec![names.join(" | ")];
    let mut q = stmt.query([]).map_err(|e| e.to_string())?;
    let mut shown = 0usize;
    let mut more = false;
    while let Some(r) = q.next().map_err(|e| e.to_string())? {
        if shown == MAX_ROWS {
            more = true;
            break;
        }
        let start = usize::from(skip_first);
        let vals: Vec<String> = (start..ncols)
            .map(|i| r.get_ref(i).map(value).unwrap_or_default())
            .collect();
        rows.push(vals.join(" | "));
        shown += 1;
    }
    if more {
        rows.push(format!(
            "[the first {MAX_ROWS} rows; narrow the query with WHERE or LIMIT]"
        ));
    }
    Ok((
        format!("{label}, {shown} row{}", if shown == 1 { "" } else { "s" }),
        rows,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_selectors_split_at_the_first_colon() {
        assert_eq!(split("app.db:users"), Some(("app.db", "users")));
        assert_eq!(
            split("app.db:SELECT a, b FROM t WHERE x = 'a:b'"),
            Some(("app.db", "SELECT a, b FROM t WHERE x = 'a:b'"))
        );
        assert_eq!(split("src/a.rs:10-20"), None);
        assert_eq!(split("x.sqlite:t:-15"), Some(("x.sqlite", "t:-15")));
    }
}
