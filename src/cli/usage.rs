//! The usage text and each verb's `--help` page. Which verb a command line
//! names, and what a wrong one gets, is `parse`'s.

/// Usage text.
pub const USAGE: &str = "\
nib: hashline file tools for coding agents, as an MCP server or on the command line

usage:
  nib [--provider NAME=PROGRAM]...    serve MCP on stdio (for a client such as Claude Code),
                                      offering each provider's tools as NAME_TOOL
  nib serve --http HOST:PORT --token-file FILE [OPTIONS]
                                      serve MCP over streamable HTTP to agents, each with a
                                      token of FILE (nib serve --help; docs/http.md)
  nib read [--plain] [--info] [--outline] [--max-line-length N] PATH[:SELECTOR]...
  nib write [--tag TAG] PATH          content on stdin
  nib edit                            a patch on stdin (see the edit tool)
  nib grep [-i] [-F] [-A N] [-B N] [-C N] [--glob G]... [--mode files|count]
           [--no-ignore] [--skip N] [--replace R] PATTERN [PATH[:SELECTOR]...]
  nib find [--glob G]... [--min-size S] [--newer AGE] [--sort path|size|modified]
           [--no-ignore] [--skip N] [PATH...]
  nib sh [--timeout T] [--expect TEXT] 'COMMAND'
                                      run one nibash call; at the timeout the command is
                                      stopped (exit 124): jobs end with this process
  nib skim [--expect TEXT] PATH...    read long logs and reports for what TEXT asks
  nib shape --log PATH --purpose TEXT [--exit N] [--command TEXT]
                                      print what nibash would show of a saved log
  nib undo [--list | --diff] [N]      put back nib's last change in this project (or change N
                                      of the list), file by file, where files still hold it;
                                      --diff shows the newest change as a diff
  nib doctor                          which sandbox layers this machine offers
  nib statusline                      one line about the project's running nibash calls and jobs
  nib setup [--user] [--dry-run] [--no-sandbox] [--provider NAME=PROGRAM] [--decider KIND]
            [--summary LIST] [--opencode PROGRAM] [--http URL]
                                      register nib with Claude Code and OpenCode
  nib hook                            answer a Claude Code hook event (stdin)
  nib --version

The project directory is $NIB_DIRECTORY, else the working directory.
";

/// `nib VERB --help`: the verb's usage, then what it does and what each
/// option means; `None` for a word that is not a verb.
pub fn help_page(verb: &str) -> Option<String> {
    // serve's page is its own usage, every option with its default.
    if verb == "serve" {
        return Some(format!("usage:\n  {}", crate::serve_http::USAGE));
    }
    let usage = verb_usage(verb)?;
    let details = match verb {
        "read" => {
            "\
Prints each file as a [PATH#TAG] header (TAG: 4 hex digits, a hash of the whole file) and
N:TEXT rows; the numbers are what `nib edit` names.

  PATH:SELECTOR   lines: 10, 10-40, 10+5, 100- (to the end), -20 (the last 20), 1-5,30-35;
                  in parsed languages a declaration: PATH:login, PATH:Type.member
  PATH#TAG        what changed since that version; PATH@REV the file at a git revision
  --plain         lines without numbers or tag, no size cap
  --info          one line of facts per file: lines, size, longest line, endings, age
  --outline       the declarations with their line ranges, whatever the size
  --max-line-length N   cut longer lines (the row says so)
  --json          the answer as one JSON object (text, is_error, exit, written)
"
        }
        "write" => {
            "\
Writes stdin to PATH. A new file (and its folders) is created; an existing one is replaced only
with --tag, its current tag from `nib read`, so a file changed since is never overwritten. CRLF
endings, a BOM and the file's mode are kept. Prints the new [PATH#TAG].
"
        }
        "edit" => {
            "\
Applies a patch from stdin. Each file starts with its header as `nib read` printed it,
[PATH#TAG], then hunks that name lines by number:

  PUT N: / PUT N.=M:      replace line N (or N to M) with the + rows below
  PUT <N: / PUT >N:       insert the + rows before / after line N (PUT >$: appends)
  CUT N / CUT N.=M        delete the lines
  SUB N: OLD              replace OLD on line N with the + rows
  REM / MV DEST / CP DEST the file itself: to the trash, moved, copied
  *** Add File: PATH      a new file, its lines as + rows

A stale tag (the file changed since that read) is refused with the current rows (exit 1, nothing
written): each nib command starts afresh, with no earlier version to rebase onto (an MCP session
rebases when the lines named are unchanged). An empty patch exits 2, saying what to send. `REAPPLY TOKEN` on stdin applies a preview `nib grep --replace` printed.
--json prints the answer as JSON, `written` naming each file with its new tag.
"
        }
        "grep" => {
            "\
Searches file contents (ripgrep's engine) under PATHs (default: the project) and prints
[PATH#TAG] blocks: *N:TEXT for a match, N:TEXT for context. Exit 0 when something matched, 1 when
nothing did, 2 on an error (a pattern that does not compile, a usage error), as grep and rg.

  -i / -F             ignore case / the pattern is plain text
  -A N / -B N / -C N  context rows after / before / around each match (default 1)
  --glob G            only files whose names match G (*.rs); !G leaves them out; repeatable
  --mode files|count  list the matching files, or count matches per file
  --no-ignore         search files .gitignore would skip
  --skip N            the next page (20 files a page)
  --replace R         preview replacing each match with R ($1, ${name}); writes nothing and
                      prints a REAPPLY token that `nib edit` applies
  PATH:SELECTOR       search only those lines (app.log:1100-1250)
"
        }
        "find" => {
            "\
Lists the files grep would search, with line counts, sizes and ages.

  --glob G            only names matching G; repeatable
  --min-size S        at least S bytes (20k, 1.5M)
  --newer AGE         changed within AGE (30m, 2h, 3d)
  --sort path|size|modified
  --no-ignore         list files .gitignore would skip
  --skip N            the next page (200 files a page)
"
        }
        "sh" => {
            "\
Runs COMMAND as one nibash call (a bash interpreter whose own cat, grep, head … print anchored
rows), in the project folder, confined as the server's calls are (NIB_SANDBOX=1 for the sandbox).
Exits with the command's status. Nothing outlives it: at --timeout (default 120s) the command is
stopped and nib sh exits 124.

  --timeout T         30s, 5m …
  --expect TEXT       what you look for in a long output; it steers which rows are kept
"
        }
        "skim" => {
            "\
Reads long logs and reports (test runs, builds) and prints what answers --expect: the failures,
their messages and where they are, with the rest counted.
"
        }
        "shape" => {
            "\
Prints what nibash would show of a saved log of a command (for tuning and tests): --purpose says
what the reader wants, --exit the command's status, --command the command line.
"
        }
        "undo" => {
            "\
Puts back nib's last change in this project (or change N of --list), file by file, only where a
file still holds what nib wrote; a file changed since is named and left alone, a file nib made goes
to the trash. Exit 0 when it was put back or nothing is recorded (it says so), 1 when a file was
left. --diff prints the newest change as a diff (exit 2 when there is none).
"
        }
        "doctor" => {
            "\
Says which sandbox layers this machine offers (bubblewrap, Landlock, seccomp, namespaces,
cgroups) and what the sandbox applies. The sandbox is on unless nib runs with NIB_SANDBOX=0
(`nib setup --no-sandbox` writes that); then doctor says programs run unconfined.
"
        }
        "statusline" => {
            "\
Prints one line about the project's running nibash calls and jobs, for Claude Code's statusLine
(`nib setup --user` installs it when you have none). Reads the JSON Claude Code sends on stdin.
"
        }
        "setup" => {
            "\
Registers nib with Claude Code (and OpenCode where the project has an opencode.json): run it in
your project's folder, or with --user for every project. Only what is missing is added; a second
run changes nothing.

  --user              every project (the Claude config folder and ~/.claude.json), with the mod
  --dry-run           print the changes as diffs; write nothing
  --no-sandbox        run nib with NIB_SANDBOX=0 (programs unconfined); without it the sandbox,
                      nib's default, holds (and a 0 an earlier --no-sandbox wrote is taken out)
  --provider NAME=PROGRAM, --decider KIND, --summary LIST, --opencode PROGRAM
                      kept in ~/.config/nib/setup.json for later starts; an empty value clears one
  --http URL          nib's entry in .mcp.json reaches a `nib serve --http` at URL (type http),
                      with `Authorization: Bearer ${NIB_TOKEN}`: Claude Code takes the agent's
                      token from NIB_TOKEN, so it is never written into .mcp.json; no hooks
"
        }
        "hook" => {
            "\
Answers one Claude Code hook event given as JSON on stdin (what `nib setup` installs). Not for
people.
"
        }
        _ => "",
    };
    Some(if details.is_empty() {
        usage
    } else {
        format!("{usage}\n{details}")
    })
}

/// One verb's lines of [`USAGE`] (its synopsis and the lines that continue
/// it), or `None` for a word that is not a verb.
pub fn verb_usage(verb: &str) -> Option<String> {
    let head = format!("  nib {verb}");
    let mut lines = USAGE.lines().skip_while(|l| {
        !(l.starts_with(&head) && l[head.len()..].chars().next().is_none_or(|c| c == ' '))
    });
    let first = lines.next()?;
    let mut out = format!("usage:\n{first}\n");
    for l in lines.take_while(|l| l.starts_with("    ") && !l.trim().is_empty()) {
        out.push_str(l);
        out.push('\n');
    }
    Some(out)
}
