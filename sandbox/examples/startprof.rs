use std::time::{Duration, Instant};
fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|a| a == nib_sandbox::WORKER_ARG) {
        nib_sandbox::worker_main(&args[1..]);
    }
    let me = std::env::var_os("E")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::current_exe().unwrap());
    let confine = std::env::var("C").is_ok();
    let cwd = std::env::current_dir().unwrap();
    let p = nib_sandbox::Policy {
        confine,
        writable: vec![cwd.clone()],
        use_bwrap: false,
        ..Default::default()
    };
    let sb = nib_sandbox::Sandbox::new(&me, p);
    let mut v = vec![];
    let n: usize = std::env::var("N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    for _ in 0..n {
        let t = Instant::now();
        let w = sb.spawn(&["true".into()], &cwd, &[]).unwrap();
        let o = w.wait(Some(Duration::from_secs(5)));
        assert_eq!(o.code, Some(0));
        if std::env::var_os("NIB_T").is_some() {
            eprint!("{}", String::from_utf8_lossy(&o.stderr));
            eprintln!("total {:?}", t.elapsed());
        }
        v.push(t.elapsed());
    }
    v.sort();
    let mut b = vec![];
    for _ in 0..n {
        let t = Instant::now();
        let o = std::process::Command::new("true").output().unwrap();
        assert!(o.status.success());
        b.push(t.elapsed());
    }
    b.sort();
    println!("spawn {:?}", b[b.len() / 2]);
    println!("median {:?}", v[v.len() / 2]);
}
