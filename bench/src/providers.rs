//! Providers (`--only providers`): a provider's tool through nib against the provider called directly.

use super::*;

/// A provider's tool through nib (the call forwarded to the provider in
/// its worker, its locations read as anchored rows) against the same call
/// made to the provider directly, over stdio in both cases. The provider is
/// the test suite's (`examples/nib-test-provider.rs`, built beside nib by
/// `bench/run.sh`); without it the scenario says so and is skipped.
pub(crate) fn provider_scenarios(nib: &Path, scratch: &Path, n: usize) -> Result<()> {
    let provider = nib
        .parent()
        .map(|d| d.join("examples/nib-test-provider"))
        .filter(|p| p.exists());
    let Some(provider) = provider else {
        println!("  providers: skipped (build examples/nib-test-provider beside nib)");
        return Ok(());
    };
    let dir = scratch.join("provider-project");
    std::fs::create_dir_all(dir.join("src")).map_err(|e| e.to_string())?;
    let mut rng = Rng(7);
    for i in 0..20 {
        let mut text = source_file(&mut rng, 200, false);
        if i % 4 == 0 {
            text.push_str("// needle: the line the provider finds\n");
        }
        write(&dir.join(format!("src/m{i}.ts")), &text)?;
    }
    write(
        &dir.join("nib.json"),
        &json!({"providers": {"zemble": {"command": [provider.display().to_string()]}}})
            .to_string(),
    )?;
    let state = scratch.join("provider-state");
    std::fs::create_dir_all(&state).map_err(|e| e.to_string())?;
    let mut through = Server::spawn(nib, &dir, &state)?;
    through.initialize()?;
    // The first call waits for the provider to start.
    through.call("zemble_search", json!({"query": "needle"}))?;
    let mut direct = Server::spawn(&provider, &dir, &state)?;
    direct.initialize()?;
    let mut nib_call = || -> Result<(Duration, usize)> {
        let (d, text) = time(|| through.call("zemble_search", json!({"query": "needle"})))?;
        Ok((d, text.chars().count()))
    };
    let direct_call = || -> Result<Duration> {
        Ok(time(|| direct.call("search", json!({"query": "needle"})))?.0)
    };
    let (s, c, b) = interleave(
        n,
        Some(&mut nib_call),
        &mut [(
            "the provider called directly".to_string(),
            Box::new(direct_call),
        )],
    )?;
    Row {
        scenario: "provider tool through nib (5 locations as anchored rows)".into(),
        nib: s,
        chars: c,
        baselines: b,
    }
    .print();
    Ok(())
}
