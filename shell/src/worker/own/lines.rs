//! The line commands read as read-tool calls: `cat`, `head`, `tail`,
//! `sed -n 'A,Bp'` become selectors of lines, `cut -c` the columns of each
//! line, `wc` the counts to print. Each returns `None` (the system program
//! runs) on an option it does not know, stdin, or a file nib should not show
//! as rows ([`super::text_file`]). Running the call is `answer`'s; the grep
//! family is `grep`'s.

use std::path::Path;

use super::call::{Call, WcWhat, selector, text_file};

/// `cat [-n] FILE…`.
pub(super) fn plan_cat(args: &[String], cwd: &Path) -> Option<Call> {
    let mut files = Vec::new();
    let mut options_done = false;
    for a in args {
        if !options_done && a == "--" {
            options_done = true;
        } else if !options_done && a.starts_with('-') && a.len() > 1 {
            // -n numbers lines, which the rows do anyway; anything else changes the bytes.
            if a != "-n" {
                return None;
            }
        } else {
            files.push(a.as_str());
        }
    }
    if files.is_empty() {
        return None;
    }
    let mut sels = Vec::new();
    for f in files {
        let (path, n) = text_file(f, cwd)?;
        sels.push(if n == 0 {
            path.display().to_string()
        } else {
            selector(&path, 1, n)
        });
    }
    Some(Call::Read(sels))
}

/// `-n N`, `-nN`, `-N`, `--lines=N` (tail also `+N`).
pub(super) fn plan_head_tail(head: bool, args: &[String], cwd: &Path) -> Option<Call> {
    let mut count: Option<String> = None;
    let mut files = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a == "-n" {
            count = Some(args.get(i + 1)?.clone());
            i += 1;
        } else if let Some(v) = a.strip_prefix("--lines=") {
            count = Some(v.to_string());
        } else if let Some(v) = a.strip_prefix("-n") {
            count = Some(v.to_string());
        } else if a.len() > 1 && a.starts_with('-') && a[1..].bytes().all(|b| b.is_ascii_digit()) {
            count = Some(a[1..].to_string());
        } else if a.starts_with('-') && a.len() > 1 {
            return None;
        } else {
            files.push(a.as_str());
        }
        i += 1;
    }
    if files.is_empty() {
        return None;
    }
    let count = count.unwrap_or_else(|| "10".into());
    let mut sels = Vec::new();
    for f in files {
        let (path, n) = text_file(f, cwd)?;
        let (a, b) = if head {
            if let Some(neg) = count.strip_prefix('-') {
                (1, n.saturating_sub(neg.parse::<usize>().ok()?))
            } else {
                (1, count.parse::<usize>().ok()?.min(n))
            }
        } else if let Some(from) = count.strip_prefix('+') {
            (from.parse::<usize>().ok()?.max(1), n)
        } else {
            let k: usize = count.trim_start_matches('-').parse().ok()?;
            (n.saturating_sub(k) + 1, n)
        };
        sels.push(if a > b || n == 0 {
            // Nothing to print but the header.
            format!("{}:{}-{}", path.display(), 1, 0)
        } else {
            selector(&path, a, b)
        });
    }
    // An empty range prints the file's header only: read the whole file's
    // header by asking for no lines is not possible, so drop such files.
    let sels: Vec<String> = sels.into_iter().filter(|s| !s.ends_with(":1-0")).collect();
    if sels.is_empty() {
        return None;
    }
    Some(Call::Read(sels))
}

/// `sed -n 'Ap'`, `'A,Bp'`, `'A,$p'`, `'$p'` on one file.
pub(super) fn plan_sed(args: &[String], cwd: &Path) -> Option<Call> {
    let mut quiet = false;
    let mut script: Option<&str> = None;
    let mut files = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            "-n" | "--quiet" | "--silent" => quiet = true,
            "-e" => {
                if script.is_some() {
                    return None;
                }
                script = Some(args.get(i + 1)?.as_str());
                i += 1;
            }
            _ if a.starts_with('-') && a.len() > 1 => return None,
            _ if script.is_none() => script = Some(a),
            _ => files.push(a),
        }
        i += 1;
    }
    if !quiet || files.len() != 1 {
        return None;
    }
    let (path, n) = text_file(files[0], cwd)?;
    let body = script?.trim().strip_suffix('p')?.trim();
    let line = |s: &str| -> Option<usize> {
        if s == "$" {
            Some(n)
        } else {
            s.trim().parse().ok()
        }
    };
    let (a, b) = match body.split_once(',') {
        Some((a, b)) => (line(a)?, line(b)?),
        None => {
            let a = line(body)?;
            (a, a)
        }
    };
    let b = b.min(n);
    if a == 0 || a > b {
        return None;
    }
    Some(Call::Read(vec![selector(&path, a, b)]))
}

/// `cut -c LIST FILE`.
pub(super) fn plan_cut(args: &[String], cwd: &Path) -> Option<Call> {
    let mut list: Option<&str> = None;
    let mut files = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "-c" {
            list = Some(args.get(i + 1)?.as_str());
            i += 1;
        } else if let Some(l) = a
            .strip_prefix("-c")
            .or_else(|| a.strip_prefix("--characters="))
        {
            list = Some(l);
        } else if a.starts_with('-') && a.len() > 1 {
            return None;
        } else {
            files.push(a);
        }
        i += 1;
    }
    if files.len() != 1 {
        return None;
    }
    let mut ranges = Vec::new();
    for part in list?.split(',') {
        let r = match part.split_once('-') {
            Some(("", b)) => (1, Some(b.parse().ok()?)),
            Some((a, "")) => (a.parse().ok()?, None),
            Some((a, b)) => (a.parse().ok()?, Some(b.parse().ok()?)),
            None => {
                let a: usize = part.parse().ok()?;
                (a, Some(a))
            }
        };
        if r.0 == 0 {
            return None;
        }
        ranges.push(r);
    }
    let (path, _) = text_file(files[0], cwd)?;
    Some(Call::Columns(path, ranges))
}

/// `wc [-lwcm] FILE…`.
pub(super) fn plan_wc(args: &[String], cwd: &Path) -> Option<Call> {
    let mut what = WcWhat::default();
    let mut files = Vec::new();
    for a in args {
        if let Some(flags) = a.strip_prefix('-').filter(|f| !f.is_empty()) {
            for f in flags.chars() {
                match f {
                    'l' => what.lines = true,
                    'w' => what.words = true,
                    'c' => what.bytes = true,
                    'm' => what.chars = true,
                    _ => return None,
                }
            }
        } else {
            files.push(text_file(a, cwd)?.0);
        }
    }
    if files.is_empty() {
        return None;
    }
    if what == WcWhat::default() {
        what = WcWhat {
            lines: true,
            words: true,
            bytes: true,
            chars: false,
        };
    }
    Some(Call::Count(files, what))
}
