//! Command rules on the broker side: the nearest nib.json's rules are
//! checked on the parsed command line before anything runs (`nib-command-rules`);
//! a refused call runs nothing and exits 126. A call that passes carries
//! the program rules to the worker, whose interpreter refuses those
//! programs again by name as they start; every exec of the call's tree is
//! judged by the file it would run ([`ProgramJudge`], in every mode); and
//! — under bubblewrap — the forbidden programs' files are hidden behind
//! `/dev/null` as well.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use nib_command_rules::{Rules, Verdict};
use nib_files::context::Programs;
use nib_settings::Config;

use super::exec_judge::ProgramJudge;
use nib_shell::channel::RuntimeRule;

/// What a call that may run carries.
#[derive(Default)]
pub struct Gate {
    /// The rules the worker enforces by name.
    pub runtime: Vec<RuntimeRule>,
    /// Files of forbidden programs, hidden in the sandbox.
    pub masked: Vec<PathBuf>,
    /// The exec-time judge (while program rules exist, in every mode).
    pub judge: Option<Arc<ProgramJudge>>,
}

/// A refusal: what the agent reads.
pub struct Refusal(pub String);

/// Checks `command` against the rules in force for `dir`. `failpoint`
/// `rules-static-off` (tests only) skips the check before the call, to
/// prove the runtime layers on their own. `judge` makes the decision model
/// for `rule` entries; it is made only when there are rules.
pub fn gate<J: nib_command_rules::model::DecisionModel>(
    dir: &Path,
    command: &str,
    failpoint: Option<&str>,
    judge: impl FnOnce() -> Option<J>,
) -> Result<Gate, Refusal> {
    let rules = match Rules::find(dir) {
        Ok(Some(r)) => r,
        Ok(None) => return Ok(Gate::default()),
        Err(e) => return Err(Refusal(format!("refused: {e}. Nothing ran."))),
    };
    let judge = judge();
    let verdict = nib_command_rules::check(
        &rules,
        command,
        dir,
        judge
            .as_ref()
            .map(|j| j as &dyn nib_command_rules::model::DecisionModel),
    );
    if let Verdict::Refuse { message, .. } = verdict
        && failpoint != Some("rules-static-off")
    {
        return Err(Refusal(message));
    }
    Ok(program_layers(&rules))
}

/// The program rules of `dir`'s nib.json as the runtime layers hold them,
/// for a program started without a command line to check (a provider).
pub fn program_gate(dir: &Path) -> Result<Gate, Refusal> {
    match Rules::find(dir) {
        Ok(Some(r)) => Ok(program_layers(&r)),
        Ok(None) => Ok(Gate::default()),
        Err(e) => Err(Refusal(format!("refused: {e}. Nothing ran."))),
    }
}

/// The broker's [`Programs`]: the git behind `read PATH@REV` runs in
/// [`judged_sandbox`] under the broker's settings.
pub struct JudgedPrograms<'a>(pub &'a Config);

impl Programs for JudgedPrograms<'_> {
    fn sandbox(&self, roots: &[PathBuf]) -> Result<nib_sandbox::Sandbox, String> {
        judged_sandbox(self.0, roots)
    }
}

/// The sandbox for a program nib starts with no command line to check (a
/// provider, the git behind `read PATH@REV`): nibash's for these roots,
/// with nib.json's program rules judged at every exec and their files
/// masked, as for any program of a nibash call.
pub fn judged_sandbox(config: &Config, roots: &[PathBuf]) -> Result<nib_sandbox::Sandbox, String> {
    let gate = program_gate(&config.project_dir).map_err(|r| r.0)?;
    let mut policy = crate::confinement::Confinement::sandbox_policy(config, roots);
    policy.masked = gate.masked;
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot find nib's own binary: {e}; nothing was run"))?;
    let mut sandbox = nib_sandbox::Sandbox::new(&nib_sandbox::entry_beside(&exe), policy);
    if let Some(judge) = gate.judge {
        sandbox = sandbox.with_exec_judge(judge);
    }
    Ok(sandbox)
}

fn program_layers(rules: &Rules) -> Gate {
    let runtime = rules
        .program_rules()
        .map(|r| RuntimeRule {
            programs: r.programs.clone(),
            args: r.args.as_ref().map(|a| a.as_str().to_string()),
            message: format!(
                "refused by {}, {}: the program may not run",
                rules.source.display(),
                r.describe()
            ),
        })
        .collect();
    Gate {
        runtime,
        masked: program_files(&rules.forbidden_names()),
        judge: ProgramJudge::new(rules, std::env::var_os("PATH").as_deref()).map(Arc::new),
    }
}

/// The files (and their link targets) named like these programs on PATH.
fn program_files(names: &[String]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for n in names {
            let p = dir.join(n);
            if p.is_file() {
                if let Ok(real) = std::fs::canonicalize(&p) {
                    out.push(real);
                }
                out.push(p);
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// One line for nibash_status.
pub fn describe(dir: &Path, config: &nib_settings::Config) -> String {
    match Rules::find(dir) {
        Ok(None) => "command rules: none (no nib.json with rules at or above the project)".into(),
        Err(e) => format!("command rules: {e}"),
        Ok(Some(r)) => {
            let program = r.program_rules().count();
            let model = r.model_rules().count();
            let judge = crate::llm::judge::RuleJudge::from_settings(&config.model, config.sandbox);
            let judged = match (model, judge) {
                (0, _) => String::new(),
                (n, Ok(m)) => format!("; {n} rule entries judged by the model at {}", m.url),
                (n, Err(why)) => format!("; {n} rule entries skipped: {why}"),
            };
            format!(
                "command rules: {} ({program} program rules enforced before a call runs, by the interpreter, and at every exec (seccomp user notification){judged})",
                r.source.display()
            )
        }
    }
}
