//! `nib-mock-model --script FILE [--log FILE] [--port-file FILE]`: serves
//! the script on a free loopback port until it is killed; prints the base
//! URL on its first line (and writes the port to `--port-file`).

#![deny(missing_docs)]

use std::io::Write;
use std::path::PathBuf;

fn main() -> std::process::ExitCode {
    let mut script = None;
    let mut log = None;
    let mut port_file = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--script" => script = args.next().map(PathBuf::from),
            "--log" => log = args.next().map(PathBuf::from),
            "--port-file" => port_file = args.next().map(PathBuf::from),
            "-h" | "--help" => {
                println!("usage: nib-mock-model --script FILE [--log FILE] [--port-file FILE]");
                return std::process::ExitCode::SUCCESS;
            }
            other => {
                eprintln!("nib-mock-model: unknown argument {other:?}; see --help");
                return std::process::ExitCode::from(2);
            }
        }
    }
    let Some(script) = script else {
        eprintln!("nib-mock-model: --script FILE is needed; see --help");
        return std::process::ExitCode::from(2);
    };
    let script = match nib_mock_model::Script::load(&script) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("nib-mock-model: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let mock = match nib_mock_model::Mock::start(script, log) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("nib-mock-model: cannot listen on loopback: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    if let Some(f) = port_file
        && let Err(e) = std::fs::write(&f, mock.port.to_string())
    {
        eprintln!("nib-mock-model: cannot write {}: {e}", f.display());
        return std::process::ExitCode::FAILURE;
    }
    let _ = writeln!(std::io::stdout(), "{}", mock.url());
    let _ = std::io::stdout().flush();
    loop {
        std::thread::park();
    }
}
