//! `nib-confine`: the sandbox's confining entry, installed beside `nib`. The
//! broker starts it to apply the confinement layers and exec the program;
//! being small, it starts faster than re-executing `nib` itself, which
//! stays the fallback entry when this binary is missing
//! ([`nib_sandbox::entry_beside`]).

#![deny(missing_docs)]

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|a| a == nib_sandbox::ENTRY_ARG) {
        nib_sandbox::entry_main(&args[1..]);
    }
    // Run by hand: say what this is, and fail.
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        b"nib-confine is started by nib to confine the programs it runs; run nib instead\n",
    );
    std::process::exit(2);
}
