//! The production build carries no test tooling: `mini-kcm-runtime`'s `recorded_api` and
//! `controller::offline` exist only with its `testing` feature, which only dev-dependencies switch on.
//! Cargo's feature resolver keeps dev-dependency features out of a normal build, so this asks Cargo
//! itself (`cargo tree`) which features of the runtime the `mini-kcm` binary is built with, in the
//! default build and in the image's (`--no-default-features`), and checks that the controllers' unit
//! tests do switch it on (so the check can see it).

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

const TESTING: &str = "mini-kcm-runtime feature \"testing\"";

/// The feature tree of `package`, without dev-dependencies unless `with_dev`.
fn feature_tree(package: &str, extra: &[&str], with_dev: bool) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let edges = if with_dev {
        "features"
    } else {
        "features,no-dev"
    };
    let output = Command::new(cargo)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .args([
            "tree",
            "--locked",
            "--offline",
            "-p",
            package,
            "-e",
            edges,
            "-f",
            "{p}",
        ])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "cargo tree -p {package} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn the_mini_kcm_binary_is_built_without_the_runtimes_test_tooling() {
    for extra in [&[][..], &["--no-default-features"][..]] {
        let tree = feature_tree("mini-kcm", extra, false);
        assert!(
            tree.contains("mini-kcm-runtime feature \"default\""),
            "the tree names the runtime's features:\n{tree}"
        );
        assert!(
            !tree.contains(TESTING),
            "mini-kcm {extra:?} is built with the runtime's test tooling; only [dev-dependencies] may \
             switch `testing` on:\n{tree}"
        );
    }
}

#[test]
fn the_controllers_unit_tests_switch_the_test_tooling_on() {
    for controller in [
        "mini-kcm-replicaset",
        "mini-kcm-deployment",
        "mini-kcm-daemonset",
    ] {
        let tree = feature_tree(controller, &[], true);
        assert!(
            tree.contains(TESTING),
            "{controller}'s tests lack the runtime's `testing`:\n{tree}"
        );
    }
}
