//! Byte-for-byte check of `revision_data` against upstream's Go computation on random DaemonSets.
//!
//! The fixtures come from the Go program in `tools/revision-crosscheck`, which the test runs with the Go
//! toolchain the project needs anyway (the k8s.io modules come from the module proxy and are cached by
//! the control plane build). To check against fixtures made elsewhere, point `MINI_KCM_REVISION_FIXTURES`
//! at their folder:
//!
//! ```text
//! cd crates/daemonset/tools && go run ./revision-crosscheck 2000 /tmp/revision-fixtures
//! MINI_KCM_REVISION_FIXTURES=/tmp/revision-fixtures cargo test -p mini-kcm-daemonset --test revision_data_crosscheck
//! ```

use mini_kcm_daemonset::revision_data;
use mini_kcm_runtime::api::kinds::DaemonSetObject;

/// Generates 500 random DaemonSets and upstream's revision data for them, with the Go program.
fn generate_fixtures() -> String {
    let dir =
        std::env::temp_dir().join(format!("mini-kcm-revision-fixtures-{}", std::process::id()));
    let tools = concat!(env!("CARGO_MANIFEST_DIR"), "/tools");
    let out = std::process::Command::new("go")
        .current_dir(tools)
        .args(["run", "./revision-crosscheck", "500"])
        .arg(&dir)
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=mod")
        .output()
        .expect("running `go` (Go >= 1.26 is required, as for the control plane build)");
    assert!(
        out.status.success(),
        "go run ./revision-crosscheck failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir.display().to_string()
}

#[test]
fn revision_data_matches_go_on_random_daemonsets() {
    let dir = std::env::var("MINI_KCM_REVISION_FIXTURES").unwrap_or_else(|_| generate_fixtures());
    let inputs = std::fs::read_to_string(format!("{dir}/in.jsonl")).unwrap();
    let expected = std::fs::read_to_string(format!("{dir}/out.jsonl")).unwrap();
    let mut checked = 0;
    for (line, (input, want)) in inputs.lines().zip(expected.lines()).enumerate() {
        let ds: DaemonSetObject = serde_json::from_str(input).unwrap();
        let got = String::from_utf8(revision_data(&ds).unwrap()).unwrap();
        if got != want {
            let at = got
                .bytes()
                .zip(want.bytes())
                .position(|(a, b)| a != b)
                .unwrap_or(got.len().min(want.len()));
            let from = at.saturating_sub(120);
            panic!(
                "line {line}: first difference at byte {at}\n got: {}\nwant: {}",
                got.get(from..(at + 80).min(got.len())).unwrap_or(&got),
                want.get(from..(at + 80).min(want.len())).unwrap_or(want)
            );
        }
        checked += 1;
    }
    assert!(checked > 0, "no fixtures in {dir}");
    eprintln!("{checked} DaemonSets match upstream byte for byte");
    if std::env::var("MINI_KCM_REVISION_FIXTURES").is_err() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
