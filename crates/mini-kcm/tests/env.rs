//! `mini-kcm env` as the docs' set-up line runs it (`eval "$(… env)"`), where no `mini-kcm up` runs: it
//! prints nothing to `eval`, says why on stderr and exits non-zero, so the shell is left as it was. (With
//! a running plane it is run by tests/e2e/tour.rs and tests/e2e/readme.rs.)

#![allow(clippy::unwrap_used)]

use std::process::Command;

fn env_without_a_plane(args: &[&str]) -> std::process::Output {
    // An empty cache: no plane slot at all.
    let cache = std::env::temp_dir().join(format!("mini-kcm-env-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::create_dir_all(&cache).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_mini-kcm"))
        .arg("env")
        .args(args)
        .env("MINI_KCM_CACHE", &cache)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    std::fs::remove_dir_all(&cache).unwrap();
    output
}

#[test]
fn without_a_running_up_env_prints_nothing_and_fails_saying_why() {
    let output = env_without_a_plane(&[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{output:?}");
    assert!(output.stdout.is_empty(), "{output:?}");
    assert!(
        stderr.contains("no `mini-kcm up` is running")
            && stderr.contains("cargo run -p mini-kcm -- up"),
        "{stderr}"
    );

    let output = env_without_a_plane(&["--state-dir", "/nonexistent/plane"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{output:?}");
    assert!(output.stdout.is_empty(), "{output:?}");
    assert!(
        stderr.contains("no `mini-kcm up` runs with --state-dir /nonexistent/plane"),
        "{stderr}"
    );

    // What `eval` then does: nothing, and the shell goes on with its PATH and KUBECONFIG unchanged.
    let shell = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "export KUBECONFIG=/before; eval \"$(MINI_KCM_CACHE=/nonexistent {} env 2>/dev/null)\"; \
             printf %s \"$KUBECONFIG\"",
            env!("CARGO_BIN_EXE_mini-kcm")
        ))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&shell.stdout), "/before");
}
