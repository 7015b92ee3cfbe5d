//! Generated inputs: deterministic source files, the tree the tree scenarios walk, a JVM-like project for the names scenarios.

use super::*;

/// xorshift64*: a fixed-seed generator, so every run sees the same inputs.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub(crate) fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

pub(crate) const WORDS: &[&str] = &[
    "session", "token", "user", "cache", "request", "buffer", "config", "engine", "record",
    "index", "parser", "handler", "stream", "value", "result", "error", "client", "server",
    "query", "store", "widget", "layout", "schema", "route", "event", "queue", "worker", "batch",
    "limit", "policy",
];

pub(crate) fn ident(rng: &mut Rng) -> String {
    let a = rng.pick(WORDS);
    let b = rng.pick(WORDS);
    let mut b = b.to_string();
    if let Some(first) = b.get_mut(0..1) {
        first.make_ascii_uppercase();
    }
    format!("{a}{b}")
}

/// A plausible source file of about `lines` lines (TypeScript-like or Rust-like).
pub(crate) fn source_file(rng: &mut Rng, lines: usize, rust: bool) -> String {
    let mut out = String::new();
    let mut n = 0;
    out.push_str(if rust {
        "use std::collections::HashMap;\n\n"
    } else {
        "import { session } from \"./session\";\n\n"
    });
    n += 2;
    while n < lines {
        let name = ident(rng);
        if rust {
            out.push_str(&format!("/// Returns the {} for a {}.\npub fn {}(input: &str, limit: usize) -> Option<String> {{\n", rng.pick(WORDS), rng.pick(WORDS), name.to_lowercase()));
        } else {
            out.push_str(&format!("/** Returns the {} for a {}. */\nexport function {}(input: string, limit: number): string | null {{\n", rng.pick(WORDS), rng.pick(WORDS), name));
        }
        n += 2;
        let body = 3 + rng.below(9);
        for _ in 0..body {
            let v = ident(rng);
            let line = match rng.below(4) {
                0 => format!(
                    "    let {} = {}(input, {});\n",
                    v.to_lowercase(),
                    ident(rng).to_lowercase(),
                    rng.below(1000)
                ),
                1 if rust => format!(
                    "    if {} > limit {{ return None; }} // TODO check {}\n",
                    v.to_lowercase(),
                    rng.pick(WORDS)
                ),
                1 => format!(
                    "    if ({} > limit) {{ return null; }} // TODO check {}\n",
                    v.to_lowercase(),
                    rng.pick(WORDS)
                ),
                2 => format!(
                    "    log(\"{} failed for {}\", {});\n",
                    rng.pick(WORDS),
                    rng.pick(WORDS),
                    v.to_lowercase()
                ),
                _ => format!("    {}.push({});\n", rng.pick(WORDS), rng.below(100_000)),
            };
            out.push_str(&line);
            n += 1;
        }
        // Valid source in its language, as the files agents edit mostly are.
        out.push_str(if rust {
            "    None\n}\n\n"
        } else {
            "    return null;\n}\n\n"
        });
        n += 3;
    }
    out
}

/// Generates `files` source files in nested folders under `root`.
pub(crate) fn generate_tree(root: &Path, files: usize) -> Result<()> {
    let mut rng = Rng(0x6e69_6221);
    for i in 0..files {
        let dir = root.join(format!("pkg{:02}/mod{:03}", i % 40, (i / 40) % 500));
        let rust = i % 2 == 0;
        let name = format!(
            "{}_{i}.{}",
            ident(&mut rng).to_lowercase(),
            if rust { "rs" } else { "ts" }
        );
        let lines = 40 + rng.below(260);
        write(&dir.join(name), &source_file(&mut rng, lines, rust))?;
    }
    Ok(())
}

/// A JVM project with a deep package tree: 6 packages of 2 subpackages
/// under `com/example/platform/orm`, 8 classes each, half as many tests;
/// 20 classes hold the word `checkpoint`.
pub(crate) fn generate_jvm(root: &Path) -> Result<()> {
    let mut rng = Rng(0x6a76_6d21);
    let mut marked = 0;
    for (set, per) in [("main", 8), ("test", 4)] {
        for pkg in [
            "workflow",
            "repository",
            "model",
            "service",
            "query",
            "mapping",
        ] {
            for sub in ["impl", "api"] {
                let dir = root.join(format!(
                    "src/{set}/java/com/example/platform/orm/{pkg}/{sub}"
                ));
                for i in 0..per {
                    let class = format!(
                        "{}{}{i}",
                        ident(&mut rng),
                        if set == "test" { "Test" } else { "" }
                    );
                    let mut body = format!(
                        "package com.example.platform.orm.{pkg}.{sub};\n\nimport java.util.List;\nimport java.util.Map;\n\n/** The {class} of {pkg}. */\npublic class {class} {{\n    private final List<String> items;\n\n    public {class}(List<String> items) {{\n        this.items = items;\n    }}\n"
                    );
                    for m in 0..(20 + rng.below(30)) {
                        let word = if marked < 20 && m == 3 {
                            marked += 1;
                            "checkpoint"
                        } else {
                            rng.pick(WORDS)
                        };
                        body.push_str(&format!(
                            "\n    /** Returns the {word} for a {}. */\n    public int {}{m}(Map<String, Integer> input, int limit) {{\n        int total = limit;\n        for (String item : items) {{\n            total += input.getOrDefault(item, {m});\n        }}\n        return total;\n    }}\n",
                            rng.pick(WORDS),
                            ident(&mut rng).to_lowercase()
                        ));
                    }
                    body.push_str("}\n");
                    write(&dir.join(format!("{class}.java")), &body)?;
                }
            }
        }
    }
    Ok(())
}

/// Up to `limit` files under `root`, in a stable order.
pub(crate) fn walk(root: &Path, limit: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for p in entries.into_iter().rev() {
            if p.file_name().is_some_and(|n| n == ".git") {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else if p.is_file() {
                out.push(p);
                if out.len() >= limit {
                    return out;
                }
            }
        }
    }
    out
}

pub(crate) fn count_files(root: &Path) -> usize {
    walk(root, usize::MAX).len()
}
