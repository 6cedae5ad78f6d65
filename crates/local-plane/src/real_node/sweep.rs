//! Removing everything a real node puts on the host: pod processes, containerd shims, mounts, network
//! namespaces, the bridge, cgroups and iptables rules.
//!
//! The same sweep runs after an orderly stop and before a start (a plane killed with SIGKILL takes its
//! kubelet, containerd and kube-proxy along, by PR_SET_PDEATHSIG, but not the shims and pods, which
//! containerd re-parents to init on purpose). It is safe to run at those times because only one real node
//! exists per host (the host lock in `mod.rs`): whatever carries the real node's names is ours.
//! Each step reports what it could not do rather than failing, so one stuck item does not keep the rest.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{BRIDGE, CGROUP_ROOT, run_tool};

/// What the sweep could not remove (empty when the host is clean).
#[derive(Debug, Default)]
pub(super) struct SweepReport {
    pub problems: Vec<String>,
}

/// Removes every trace of a real node whose files are under `node_dir`. `shim_marker` is a part of the
/// containerd socket path that every shim of such a node carries on its command line.
pub(super) fn sweep(node_dir: &Path, shim_marker: &str, kube_proxy: &Path) -> SweepReport {
    let mut report = SweepReport::default();
    kill_cgroup_processes(&mut report);
    kill_processes_mentioning(shim_marker, &mut report);
    unmount_under(node_dir, &mut report);
    remove_cgroups(&mut report);
    if Path::new("/sys/class/net").join(BRIDGE).exists()
        && let Err(e) = run_tool(Path::new("ip"), &["link", "delete", BRIDGE], TOOL_TIMEOUT)
    {
        report
            .problems
            .push(format!("deleting bridge {BRIDGE}: {e}"));
    }
    // kube-proxy's own clean-up removes its chains in every mode it knows (iptables, ipvs, nftables).
    if kube_proxy.exists()
        && let Err(e) = run_tool(kube_proxy, &["--cleanup"], TOOL_TIMEOUT)
    {
        report.problems.push(format!("kube-proxy --cleanup: {e}"));
    }
    remove_kubelet_chains(&mut report);
    report
}

const TOOL_TIMEOUT: Duration = Duration::from_secs(30);
const KILL_TIMEOUT: Duration = Duration::from_secs(10);

/// The cgroup hierarchies mounted under /sys/fs/cgroup (each v1 controller, or the v2 root).
fn hierarchies() -> Vec<PathBuf> {
    let base = Path::new("/sys/fs/cgroup");
    if base.join("cgroup.procs").exists() {
        return vec![base.to_path_buf()];
    }
    std::fs::read_dir(base)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.join("cgroup.procs").exists())
                .collect()
        })
        .unwrap_or_default()
}

/// Every cgroup folder at or below the real node's root, deepest first.
fn node_cgroups() -> Vec<PathBuf> {
    let relative = CGROUP_ROOT.trim_start_matches('/');
    let mut found = Vec::new();
    for hierarchy in hierarchies() {
        let root = hierarchy.join(relative);
        if root.is_dir() {
            collect_dirs(&root, &mut found);
        }
    }
    found.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    found
}

fn collect_dirs(dir: &Path, found: &mut Vec<PathBuf>) {
    found.push(dir.to_path_buf());
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.filter_map(Result::ok) {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                collect_dirs(&entry.path(), found);
            }
        }
    }
}

fn cgroup_pids() -> Vec<i32> {
    let mut pids: Vec<i32> = node_cgroups()
        .iter()
        .filter_map(|dir| std::fs::read_to_string(dir.join("cgroup.procs")).ok())
        .flat_map(|text| {
            text.lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// SIGKILL to every process in the pods' cgroups until none is left.
fn kill_cgroup_processes(report: &mut SweepReport) {
    kill_until_gone(cgroup_pids, "pod processes", report);
}

/// SIGKILL to every process whose command line contains `marker` (the shims name their containerd's
/// socket), except ourselves.
fn kill_processes_mentioning(marker: &str, report: &mut SweepReport) {
    let find = || {
        let own = std::process::id();
        std::fs::read_dir("/proc")
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                    .filter(|pid| *pid != own)
                    .filter(|pid| {
                        std::fs::read(format!("/proc/{pid}/cmdline"))
                            .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(marker))
                    })
                    .filter_map(|pid| i32::try_from(pid).ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    kill_until_gone(find, "containerd shims", report);
}

fn kill_until_gone(find: impl Fn() -> Vec<i32>, what: &str, report: &mut SweepReport) {
    let deadline = Instant::now() + KILL_TIMEOUT;
    loop {
        let pids = find();
        if pids.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            report.problems.push(format!(
                "{what} still running after {KILL_TIMEOUT:?}: {pids:?}"
            ));
            return;
        }
        for pid in pids {
            // SAFETY: a plain syscall; a pid that has gone meanwhile only yields ESRCH.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Detaches every mount at or below `dir` (rootfs overlays, /dev/shm of sandboxes, network namespace
/// handles, volume tmpfs), deepest first.
fn unmount_under(dir: &Path, report: &mut SweepReport) {
    for mount in mounts_under(dir) {
        let Ok(path) = std::ffi::CString::new(mount.as_os_str().as_encoded_bytes()) else {
            continue;
        };
        // SAFETY: umount2 with a valid NUL-terminated path.
        if unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) } != 0 {
            let error = std::io::Error::last_os_error();
            if error.raw_os_error() != Some(libc::EINVAL) {
                report
                    .problems
                    .push(format!("unmounting {}: {error}", mount.display()));
            }
        }
    }
}

/// Mount points at or below `dir`, deepest first (from /proc/self/mountinfo).
pub(super) fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut found: Vec<PathBuf> = text
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(unescape_mount_path(field)))
        .filter(|p| p.starts_with(dir))
        .collect();
    found.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    found.dedup();
    found
}

/// mountinfo writes space, tab, newline and backslash as three octal digits after a backslash.
fn unescape_mount_path(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .and_then(|digits| std::str::from_utf8(digits).ok())
            .and_then(|digits| u8::from_str_radix(digits, 8).ok());
        if bytes[i] == b'\\'
            && let Some(code) = octal
        {
            out.push(code);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn remove_cgroups(report: &mut SweepReport) {
    for dir in node_cgroups() {
        if let Err(e) = std::fs::remove_dir(&dir) {
            report
                .problems
                .push(format!("removing cgroup {}: {e}", dir.display()));
        }
    }
}

/// The chains the kubelet creates (a hint for the iptables backend, a canary to notice a flush, and a
/// guard against remote access to 127.0.0.0/8); kube-proxy's clean-up leaves them alone.
const KUBELET_CHAINS: [&str; 3] = ["KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY", "KUBE-FIREWALL"];

/// Removes the kubelet's chains and the rules jumping to them, for IPv4 and IPv6.
fn remove_kubelet_chains(report: &mut SweepReport) {
    for (tool, save) in [
        ("iptables", "iptables-save"),
        ("ip6tables", "ip6tables-save"),
    ] {
        let Ok(dump) = run_tool(Path::new(save), &[], TOOL_TIMEOUT) else {
            continue;
        };
        for (table, rules, chains) in kubelet_rules(&dump) {
            let mut commands: Vec<Vec<String>> = rules
                .into_iter()
                .map(|rule| {
                    let mut args = vec!["-w".to_string(), "-t".into(), table.clone(), "-D".into()];
                    args.extend(rule);
                    args
                })
                .collect();
            for chain in chains {
                for op in ["-F", "-X"] {
                    commands.push(vec![
                        "-w".into(),
                        "-t".into(),
                        table.clone(),
                        op.into(),
                        chain.clone(),
                    ]);
                }
            }
            for args in commands {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                if let Err(e) = run_tool(Path::new(tool), &args, TOOL_TIMEOUT) {
                    report
                        .problems
                        .push(format!("{tool} {}: {e}", args.join(" ")));
                }
            }
        }
    }
}

/// Per table of an `iptables-save` dump: the rules outside the kubelet's chains that jump to one of them
/// (as arguments after `-A`), and the kubelet's chains present.
fn kubelet_rules(dump: &str) -> Vec<(String, Vec<Vec<String>>, Vec<String>)> {
    let mut tables = Vec::new();
    let mut current: Option<(String, Vec<Vec<String>>, Vec<String>)> = None;
    for line in dump.lines() {
        if let Some(table) = line.strip_prefix('*') {
            current = Some((table.to_string(), Vec::new(), Vec::new()));
        } else if line == "COMMIT" {
            if let Some(done) = current.take()
                && (!done.1.is_empty() || !done.2.is_empty())
            {
                tables.push(done);
            }
        } else if let Some((_, rules, chains)) = current.as_mut() {
            if let Some(declared) = line.strip_prefix(':') {
                let name = declared.split(' ').next().unwrap_or_default();
                if KUBELET_CHAINS.contains(&name) {
                    chains.push(name.to_string());
                }
            } else if let Some(rule) = line.strip_prefix("-A ") {
                let words = split_words(rule);
                let in_ours = words
                    .first()
                    .is_some_and(|c| KUBELET_CHAINS.contains(&c.as_str()));
                let jumps_to_ours = words
                    .windows(2)
                    .any(|w| w[0] == "-j" && KUBELET_CHAINS.contains(&w[1].as_str()));
                if jumps_to_ours && !in_ours {
                    rules.push(words);
                }
            }
        }
    }
    tables
}

/// Splits an iptables-save rule into arguments, keeping double-quoted words (comments) together.
fn split_words(rule: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut started = false;
    for c in rule.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                started = true;
            }
            ' ' if !quoted => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            _ => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_kubelet_chains_and_the_jumps_to_them() {
        let dump = "*filter\n:INPUT ACCEPT [0:0]\n:KUBE-FIREWALL - [0:0]\n:DOCKER - [0:0]\n\
                    -A INPUT -j KUBE-FIREWALL\n-A INPUT -j DOCKER\n\
                    -A KUBE-FIREWALL ! -s 127.0.0.0/8 -m comment --comment \"block it\" -j DROP\nCOMMIT\n\
                    *nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n";
        let found = kubelet_rules(dump);
        assert_eq!(found.len(), 1, "{found:?}");
        let (table, rules, chains) = &found[0];
        assert_eq!(table, "filter");
        assert_eq!(
            rules,
            &vec![vec![
                "INPUT".to_string(),
                "-j".into(),
                "KUBE-FIREWALL".into()
            ]]
        );
        assert_eq!(chains, &vec!["KUBE-FIREWALL".to_string()]);
        assert_eq!(
            split_words("X -m comment --comment \"two words\" -j Y"),
            ["X", "-m", "comment", "--comment", "two words", "-j", "Y"]
        );
    }

    #[test]
    fn mount_paths_are_unescaped() {
        assert_eq!(unescape_mount_path("/a\\040b/c"), "/a b/c");
        assert_eq!(unescape_mount_path("/plain"), "/plain");
        assert_eq!(unescape_mount_path("/end\\"), "/end\\");
    }
}
