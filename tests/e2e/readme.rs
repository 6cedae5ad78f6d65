//! README.md's commands, run as a user types them, from the root of a fresh clone (`git clone` of this
//! repository into a temporary folder, with the working tree's README.md when it has uncommitted changes):
//! every command of every ```sh block, in document order, in one bash session (`set -euo pipefail`). The
//! session gets no `PATH`, `KUBECONFIG` or manager address from the test: README's set-up line
//! ([`SETUP_LINE`]) is what puts `mini-kcm` and `kubectl` on `PATH` and sets `KUBECONFIG`. The test parses
//! README.md, so a command added there is run unless [`TREATMENTS`] says otherwise, with the reason:
//!
//! - `cargo run -p mini-kcm -- up` is started as the built binary with the same arguments (a fresh clone
//!   would rebuild everything), in the background: it runs until Ctrl-C. The test waits for its "running"
//!   line, runs the rest, then sends SIGINT to its process group (what Ctrl-C does) and checks it stops
//!   every component;
//! - the set-up line runs the same binary (for the same reason) as `env`, with the `--state-dir` README
//!   documents for a plane not in the first slot: `up` takes the first free slot, and another test's plane
//!   may run in an earlier one;
//! - `cargo test --workspace` (this test is one of them), the image build and `kind load` are skipped;
//!   other tests run them (named in [`TREATMENTS`]);
//! - `mini-kcm conformance --compare` runs with `--list` (the same planes, e2e binary, output folder and
//!   report read-back, which is where a relative `--out` once broke, but no spec) and `mini-kcm bench`
//!   with `--help` (its arguments parse); `MINI_KCM_README_HEAVY=1` runs both as written (the whole test
//!   then took 13 minutes instead of one, on a shared 2-core machine).
//!
//! README's example paths (`~/.cache/mini-kcm/planes/plane-1`) are the ones `up` prints: the first free
//! slot, so when another plane runs the test uses the slot `up` printed (the rest of the path must match).
//! The paths README and the tour show as `up`'s output (`kubeconfig:`, `binaries:`, ...) are checked
//! against what `up` printed the same way.
//! Where a command needs objects README does not create (the rollout commands' `mdeploy/web` with two
//! revisions, `mds/agent`), [`FIXTURES`] creates them first; [`CHECKS`] are bash conditions that must come
//! true after a command (retried for 60 s), e.g. 5 pods after the scale.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mini_kcm_e2e::{
    ProcessGroup, SETUP_LINE, as_a_users_shell, check_script_prelude, mini_kcm_binary, repo_path,
    setup_line_with_state_dir, shell_quote,
};

/// How long a check may take to hold.
const CHECK_TIMEOUT: Duration = Duration::from_secs(60);
/// How long `up` may take to stop after Ctrl-C.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// Runs the heavy commands as written.
const HEAVY_ENV: &str = "MINI_KCM_README_HEAVY";

/// A command of README that the test does not simply run in its bash session.
enum Treatment {
    /// `cargo run -p mini-kcm -- <args>`: the built binary with `<args>`, in the background.
    Up,
    /// The set-up line: run with the built binary and `up`'s state directory.
    Setup,
    /// Not run here; the reason names the test that runs it.
    Skip(&'static str),
    /// Run as written with `MINI_KCM_README_HEAVY=1`, else with `quick` appended.
    Heavy { quick: &'static str },
}

/// By command (without its comment, spaces collapsed).
const TREATMENTS: &[(&str, Treatment)] = &[
    ("cargo run -p mini-kcm -- up", Treatment::Up),
    (SETUP_LINE, Treatment::Setup),
    (
        "cargo test --workspace",
        Treatment::Skip("runs every test, this one included"),
    ),
    (
        "bash deploy/image/build.sh",
        Treatment::Skip("the image build (minutes): tests/e2e/in_cluster.rs"),
    ),
    (
        "kind load image-archive target/image/mini-kcm.tar",
        Treatment::Skip("needs a kind cluster: tests/e2e/kind.rs runs it"),
    ),
    (
        "mini-kcm conformance --compare",
        Treatment::Heavy { quick: "--list" },
    ),
    ("mini-kcm bench", Treatment::Heavy { quick: "--help" }),
];

/// Bash run before a command (by command): objects README's commands act on but do not create.
const FIXTURES: &[(&str, &str)] = &[(
    "mini-kcm rollout status deployments.minikcm.dev/web",
    r#"kubectl apply -f - <<'YAML'
apiVersion: minikcm.dev/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web-deploy}}
  template:
    metadata: {labels: {app: web-deploy}}
    spec: {containers: [{name: c, image: pause}]}
---
apiVersion: minikcm.dev/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: c, image: pause}]}
YAML
readme_check '[[ $(kubectl get deployments.minikcm.dev web -o jsonpath={.status.updatedReplicas}) == 2 ]]'
# A second revision, for history and undo.
kubectl patch deployments.minikcm.dev web --type merge -p '{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"pause:2"}]}}}}'
"#,
)];

/// Bash conditions that must come true after a command (by command).
const CHECKS: &[(&str, &str)] = &[
    (
        SETUP_LINE,
        // The plane's kubectl and the binary cargo built, first on PATH; the kubeconfig `up` printed.
        "[[ $(command -v kubectl) == */bin/kubectl && -x $(dirname \"$(command -v kubectl)\")/kube-apiserver \\
           && $(command -v mini-kcm) == */target/*/mini-kcm && -f $KUBECONFIG ]]",
    ),
    (
        "kubectl get nodes",
        "[[ $(kubectl get nodes --no-headers | grep -cw Ready) -eq 3 ]]",
    ),
    (
        "kubectl scale replicasets.minikcm.dev web --replicas=5",
        "[[ $(kubectl get pods -l app=web --no-headers | grep -c Running) -eq 5 && $(kubectl get replicasets.minikcm.dev web -o jsonpath={.status.readyReplicas}) == 5 ]]",
    ),
    (
        "mini-kcm explain mrs/web",
        "mini-kcm explain mrs/web | grep -q 'creating 3 pod(s) in slow-start batches 1, 2'",
    ),
    (
        "kubectl apply -k deploy/in-cluster",
        "kubectl -n mini-kcm-system get deployment mini-kcm",
    ),
    (
        "mini-kcm rollout status deployments.minikcm.dev/web",
        "[[ $(kubectl get deployments.minikcm.dev web -o 'jsonpath={.status.updatedReplicas}/{.spec.template.spec.containers[0].image}') == 2/pause:2 ]]",
    ),
    (
        "mini-kcm rollout history mdeploy/web",
        "mini-kcm rollout history mdeploy/web | grep -qE '^2 '",
    ),
    (
        "mini-kcm rollout undo mdeploy/web",
        "[[ $(kubectl get deployments.minikcm.dev web -o 'jsonpath={.spec.template.spec.containers[0].image}') == pause ]]",
    ),
    (
        "mini-kcm rollout pause mdeploy/web",
        "[[ $(kubectl get deployments.minikcm.dev web -o jsonpath={.spec.paused}) == true ]]",
    ),
    (
        "mini-kcm rollout resume mdeploy/web",
        "[[ $(kubectl get deployments.minikcm.dev web -o jsonpath={.spec.paused}) != true ]]",
    ),
    (
        "mini-kcm rollout restart mds/agent",
        "kubectl get daemonsets.minikcm.dev agent -o jsonpath={.spec.template.metadata.annotations} | grep -q restartedAt",
    ),
    (
        "mini-kcm version",
        "mini-kcm version | grep -q 'mirrors Kubernetes v1.37'",
    ),
    (
        "mini-kcm build-plane",
        "[[ -x $(mini-kcm build-plane | tail -n 1)/kubectl ]]",
    ),
    (
        "mini-kcm bench",
        "[[ -z ${MINI_KCM_README_HEAVY:-} || -s target/bench/bench.json ]]",
    ),
    (
        "mini-kcm conformance --compare",
        // The reports of the dry runs, where README's default `--out` says: under the clone's root.
        "[[ -s target/conformance/mini/dry-run-apps.json && -s target/conformance/upstream/dry-run-apps.json \\
           && ( -z ${MINI_KCM_README_HEAVY:-} || -s target/conformance/table.md ) ]]",
    ),
];

/// One command of a ```sh block: its text as written (a heredoc included) and its key (the first line
/// without its comment, spaces collapsed).
#[derive(Debug, PartialEq)]
struct Cmd {
    text: String,
    key: String,
}

/// The commands of every ```sh block, in document order.
fn commands(markdown: &str) -> Vec<Cmd> {
    let mut commands = Vec::new();
    let mut in_block = false;
    let mut heredoc: Option<(String, Cmd)> = None;
    for line in markdown.lines() {
        if let Some((end, mut cmd)) = heredoc.take() {
            cmd.text.push_str(line);
            cmd.text.push('\n');
            if line.trim() == end {
                commands.push(cmd);
            } else {
                heredoc = Some((end, cmd));
            }
            continue;
        }
        let trimmed = line.trim();
        if !in_block {
            in_block = trimmed == "```sh";
            continue;
        }
        if trimmed.starts_with("```") {
            in_block = false;
            continue;
        }
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let code = line.split(" #").next().unwrap_or_default();
        let cmd = Cmd {
            text: format!("{line}\n"),
            key: code.split_whitespace().collect::<Vec<_>>().join(" "),
        };
        match code.split_once("<<") {
            Some((_, rest)) => {
                let end = rest
                    .trim_start_matches('-')
                    .trim()
                    .trim_matches(|c| c == '\'' || c == '"')
                    .to_string();
                heredoc = Some((end, cmd));
            }
            None => commands.push(cmd),
        }
    }
    commands
}

fn treatment(key: &str) -> Option<&'static Treatment> {
    TREATMENTS.iter().find(|(k, _)| *k == key).map(|(_, t)| t)
}

/// What `up` printed that README's commands refer to.
struct Printed {
    state_dir: String,
    bin_dir: String,
    binary: PathBuf,
}

/// The bash script of README's commands (all but `up`), with the test's fixtures and checks.
fn script(commands: &[Cmd], printed: &Printed, readme_cache: &str, heavy: bool) -> String {
    let mut script = check_script_prelude("readme", CHECK_TIMEOUT);
    for cmd in commands {
        for (_, fixture) in FIXTURES.iter().filter(|(k, _)| *k == cmd.key) {
            script.push_str("# fixture (not README's)\n");
            script.push_str(fixture);
        }
        let mut text = cmd.text.clone();
        match treatment(&cmd.key) {
            Some(Treatment::Up) => {
                script.push_str(&format!(
                    "echo {}\n",
                    shell_quote(&format!(
                        "started by the test, in the background: {}",
                        cmd.key
                    ))
                ));
                continue;
            }
            Some(Treatment::Setup) => {
                text = setup_line_with_state_dir(Path::new(&printed.state_dir)).replace(
                    "cargo run -q -p mini-kcm --",
                    &shell_quote(&printed.binary.display().to_string()),
                ) + "\n";
            }
            Some(Treatment::Skip(why)) => {
                script.push_str(&format!(
                    "echo {}\n",
                    shell_quote(&format!("skipped: {} ({why})", cmd.key))
                ));
                continue;
            }
            Some(Treatment::Heavy { quick }) if !heavy => {
                text = format!("{} {quick}\n", cmd.key);
            }
            _ => {}
        }
        // README's example paths: the plane slot and the binaries folder `up` printed.
        let text = text
            .replace(
                &format!("{readme_cache}/planes/plane-1"),
                &printed.state_dir,
            )
            .replace(&format!("{readme_cache}/"), "__CACHE__/")
            .replace(
                &format!(
                    "__CACHE__/{}",
                    Path::new(&printed.bin_dir)
                        .strip_prefix(Path::new(&printed.bin_dir).ancestors().nth(2).unwrap())
                        .unwrap()
                        .display()
                ),
                &printed.bin_dir,
            );
        assert!(
            !text.contains("__CACHE__"),
            "README names a cache path that is not the one `up` printed ({}): {}",
            printed.bin_dir,
            cmd.text
        );
        for line in text.lines() {
            script.push_str(&format!("echo {}\n", shell_quote(&format!("$ {line}"))));
        }
        script.push_str(&text);
        for (_, check) in CHECKS.iter().filter(|(k, _)| *k == cmd.key) {
            script.push_str(&format!("readme_check {}\n", shell_quote(check)));
        }
    }
    script.push_str("echo README COMPLETE\n");
    script
}

/// The paths a document shows as `up`'s output: the `kubeconfig:`, `component logs:`, `binaries:` and
/// `state:` lines of its ```text blocks, as (label, path).
fn shown_paths(markdown: &str) -> Vec<(String, String)> {
    let mut shown = Vec::new();
    let mut in_text = false;
    for line in markdown.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_text = trimmed == "```text";
            continue;
        }
        if !in_text {
            continue;
        }
        for label in ["kubeconfig", "component logs", "binaries", "state"] {
            if let Some(path) = trimmed.strip_prefix(&format!("{label}:")) {
                shown.push((label.to_string(), path.trim().to_string()));
            }
        }
    }
    shown
}

/// The processes whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(needle) {
                found.push(format!(
                    "{}: {cmdline}",
                    entry.file_name().to_string_lossy()
                ));
            }
        }
    }
    found
}

#[test]
fn the_commands_of_a_markdown_file_are_found_with_their_heredocs() {
    let doc = "```sh\ncargo test --workspace   # every test\n# a comment line\n```\n\
               ```text\nnot run\n```\n```sh\nkubectl apply -f - <<'YAML'\nkind: X\nYAML\nkubectl  get pods\n```\n";
    assert_eq!(
        commands(doc),
        [
            Cmd {
                text: "cargo test --workspace   # every test\n".into(),
                key: "cargo test --workspace".into()
            },
            Cmd {
                text: "kubectl apply -f - <<'YAML'\nkind: X\nYAML\n".into(),
                key: "kubectl apply -f - <<'YAML'".into()
            },
            Cmd {
                text: "kubectl  get pods\n".into(),
                key: "kubectl get pods".into()
            },
        ]
    );
}

#[test]
fn the_paths_a_document_shows_as_ups_output_are_found() {
    let doc = "```text\n$ cargo run -p mini-kcm -- up\n  kubeconfig:           ~/k\n  binaries:  /b\n```\n\
               kubeconfig: not output\n```sh\nstate: no\n```\n";
    assert_eq!(
        shown_paths(doc),
        [
            ("kubeconfig".to_string(), "~/k".to_string()),
            ("binaries".to_string(), "/b".to_string())
        ]
    );
}

#[test]
fn readme_commands_run_as_written_from_a_fresh_clone() {
    let binary = mini_kcm_binary();
    let work = std::env::temp_dir().join(format!("mini-kcm-readme-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let clone = work.join("clone");
    let cloned = Command::new("git")
        .args(["clone", "--quiet"])
        .arg(repo_path(""))
        .arg(&clone)
        .output()
        .unwrap();
    assert!(cloned.status.success(), "git clone: {cloned:?}");
    // The README being edited is the one to test: the clone gets the working tree's.
    let readme = std::fs::read_to_string(repo_path("README.md")).unwrap();
    if std::fs::read_to_string(clone.join("README.md"))
        .ok()
        .as_ref()
        != Some(&readme)
    {
        eprintln!("note: README.md has uncommitted changes; the working tree's README is run");
        std::fs::write(clone.join("README.md"), &readme).unwrap();
    }
    let commands = commands(&readme);
    for (key, _) in TREATMENTS {
        assert!(
            commands.iter().any(|c| c.key == *key),
            "README no longer documents `{key}`: update TREATMENTS"
        );
    }
    for (key, _) in FIXTURES.iter().chain(CHECKS) {
        assert!(
            commands.iter().any(|c| c.key == *key),
            "README no longer documents `{key}`: update FIXTURES or CHECKS"
        );
    }

    // The plane's binaries, built once and cached (`up` prints their folder).
    let built = Command::new(&binary).arg("build-plane").output().unwrap();
    assert!(built.status.success(), "build-plane: {built:?}");
    let bin_dir = String::from_utf8(built.stdout).unwrap();
    let bin_dir = PathBuf::from(bin_dir.lines().last().unwrap().trim());

    // `cargo run -p mini-kcm -- up`, as the built binary with the same arguments.
    let up_cmd = commands
        .iter()
        .find(|c| matches!(treatment(&c.key), Some(Treatment::Up)))
        .unwrap();
    let up_args: Vec<&str> = up_cmd
        .key
        .split(" -- ")
        .nth(1)
        .unwrap()
        .split(' ')
        .collect();
    let up_log = work.join("up.stderr");
    let mut child = Command::new(&binary)
        .args(&up_args)
        .current_dir(&clone)
        .env_remove("KUBECONFIG")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&up_log).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut up = ProcessGroup(child);
    let mut lines = BufReader::new(stdout).lines();
    let mut printed_text = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        printed_text.push_str(&line);
        printed_text.push('\n');
        if line.starts_with("mini-kcm: running") {
            break;
        }
    }
    assert!(
        printed_text.contains("mini-kcm: running"),
        "mini-kcm up did not start:\n{printed_text}\n{}",
        std::fs::read_to_string(&up_log).unwrap_or_default()
    );
    // Keep draining `up`'s output so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    let field = |name: &str| {
        printed_text
            .lines()
            .find_map(|l| l.trim().strip_prefix(name).map(|v| v.trim().to_string()))
            .unwrap_or_else(|| panic!("no `{name}` in:\n{printed_text}"))
    };
    let printed = Printed {
        state_dir: field("state:"),
        bin_dir: field("binaries:"),
        binary: binary.clone(),
    };
    assert_eq!(
        field("kubeconfig:"),
        format!("{}/kubeconfig", printed.state_dir)
    );
    assert_eq!(Path::new(&printed.bin_dir), bin_dir);
    let cache_root = Path::new(&printed.bin_dir).ancestors().nth(2).unwrap();
    let slot = Path::new(&printed.state_dir);
    assert_eq!(slot.parent(), Some(cache_root.join("planes").as_path()));
    assert!(
        slot.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("plane-")),
        "{}",
        printed.state_dir
    );
    // README writes the default cache as `~/.cache/mini-kcm`.
    let readme_cache = "~/.cache/mini-kcm";
    if std::env::var_os("MINI_KCM_CACHE").is_none() {
        let home = std::env::var("HOME").unwrap();
        assert_eq!(cache_root, Path::new(&home).join(".cache/mini-kcm"));
    }

    // The paths README and the tour show as `up`'s output are the ones it printed (`~` for the home
    // folder, `plane-1` for the slot it took).
    let tour = std::fs::read_to_string(repo_path("docs/tour.md")).unwrap();
    for (doc, text, at_least) in [("README.md", &readme, 2), ("docs/tour.md", &tour, 1)] {
        let shown = shown_paths(text);
        assert!(
            shown.len() >= at_least,
            "{doc} shows fewer of `up`'s paths than expected: {shown:?}"
        );
        for (label, path) in shown {
            let path = path
                .replace(readme_cache, &cache_root.display().to_string())
                .replace(
                    &format!("{}/planes/plane-1", cache_root.display()),
                    &printed.state_dir,
                );
            assert_eq!(
                path,
                field(&format!("{label}:")),
                "{doc} shows `{label}:` as `up` does not print it"
            );
        }
    }

    let heavy = std::env::var_os(HEAVY_ENV).is_some();
    let started = Instant::now();
    let output = as_a_users_shell(Command::new("bash").arg("-c").arg(script(
        &commands,
        &printed,
        readme_cache,
        heavy,
    )))
    .current_dir(&clone)
    .stdin(Stdio::null())
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    println!(
        "README's commands took {:.0} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        output.status.success() && stdout.contains("README COMPLETE"),
        "README's commands failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}\n--- up\n{printed_text}",
        output.status
    );

    // Ctrl-C: SIGINT to `up`'s process group, as a terminal sends it.
    let stopping = Instant::now();
    let signalled = Command::new("kill")
        .args(["-INT", "--", &format!("-{}", up.0.id())])
        .status()
        .unwrap();
    assert!(signalled.success());
    let status = loop {
        if let Some(status) = up.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            stopping.elapsed() < STOP_TIMEOUT,
            "mini-kcm up still runs {STOP_TIMEOUT:?} after Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let log = std::fs::read_to_string(&up_log).unwrap();
    assert!(status.success(), "mini-kcm up exited with {status}:\n{log}");
    assert!(log.contains("mini-kcm: stopped"), "{log}");
    // With the slash: plane-2 is not plane-20.
    let left = processes_mentioning(&format!("{}/", printed.state_dir));
    assert!(left.is_empty(), "components left running: {left:#?}");
    println!(
        "mini-kcm up stopped {:.1} s after Ctrl-C",
        stopping.elapsed().as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&work);
}
