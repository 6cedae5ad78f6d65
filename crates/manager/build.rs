//! Build metadata for `mini-kcm version`, the build-info metric and `/statusz`: the git revision of the
//! source, the Kubernetes version mini-kcm mirrors and the oldest minor it supports (both in
//! deploy/control-plane/versions.env) and the compiler's version.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    let versions =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/control-plane/versions.env");
    println!("cargo:rerun-if-changed={}", versions.display());
    let text = std::fs::read_to_string(&versions).unwrap_or_default();
    let value = |key: &str| {
        text.lines().find_map(|l| {
            l.strip_prefix(key)
                .and_then(|rest| rest.strip_prefix('='))
                .map(|v| v.trim().to_string())
        })
    };
    let kubernetes = value("KUBERNETES_VERSION").unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=MINI_KCM_KUBERNETES_VERSION={kubernetes}");
    // Empty when missing: the manager then warns of no server as too old.
    let oldest = value("OLDEST_SUPPORTED_MINOR").unwrap_or_default();
    println!("cargo:rustc-env=MINI_KCM_OLDEST_SUPPORTED_MINOR={oldest}");

    // Rebuild when HEAD moves: watch HEAD and the branch file it points to (when they exist), so a
    // build without git does not rerun this script every time.
    for path in [
        git(&["rev-parse", "--git-path", "HEAD"]),
        git(&["symbolic-ref", "-q", "HEAD"]).and_then(|r| git(&["rev-parse", "--git-path", &r])),
    ]
    .into_iter()
    .flatten()
    {
        if Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    let revision = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some();
    let revision = if dirty && revision != "unknown" {
        format!("{revision}-dirty")
    } else {
        revision
    };
    println!("cargo:rustc-env=MINI_KCM_GIT_REVISION={revision}");

    // Cargo names the compiler it builds with in RUSTC.
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let rustc_version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "rustc (unknown version)".into());
    println!("cargo:rustc-env=MINI_KCM_RUSTC_VERSION={rustc_version}");
}
