use semver::Version;

#[test]
fn is_prerelease() {
    assert!(Version::parse("1.2.3-rc.1").unwrap().is_prerelease());
    assert!(!Version::parse("1.2.3").unwrap().is_prerelease());
    assert!(!Version::parse("1.2.3+build.5").unwrap().is_prerelease());
}

#[test]
fn next_patch() {
    let v = Version::parse("1.2.3-rc.1+b7").unwrap();
    assert_eq!(v.next_patch(), Version::new(1, 2, 4));
    assert_eq!(Version::new(0, 9, 0).next_patch().to_string(), "0.9.1");
}
