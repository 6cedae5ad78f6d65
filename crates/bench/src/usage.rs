//! CPU time and memory of a controller process, read from `/proc/<pid>` while it runs.
//!
//! CPU seconds are user plus system time (`/proc/<pid>/stat`), memory is the resident set
//! (`VmRSS` in `/proc/<pid>/status`) and its high-water mark (`VmHWM`, the kernel's exact peak, which
//! sampling alone could miss). A [`Sampler`] also keeps the largest RSS it saw, as a cross-check.
//!
//! The resident set also counts the pages of the executable itself (`RssFile`), which for a process
//! with little heap is most of it; `RssAnon`, the anonymous part, is the heap and stacks alone: what
//! grows with the objects a controller caches.
//!
//! Wake-ups are voluntary context switches (`voluntary_ctxt_switches`, summed over the process's
//! threads): each time a thread blocked (in `epoll_wait`, a futex, a read) and was woken again. An
//! async runtime that parks once per event it handles shows one per event; one that handles a batch
//! of ready events per wake shows fewer. Go's runtime and tokio both count here alike.

use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One reading of a process.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Usage {
    pub cpu_seconds: f64,
    pub rss_bytes: u64,
    pub peak_rss_bytes: u64,
    /// `RssAnon`: the resident set without the executable's and libraries' file pages.
    pub anon_rss_bytes: u64,
    /// Voluntary context switches of all live threads (see the module header).
    pub wakeups: u64,
}

/// Reads `/proc/<pid>`; `None` once the process is gone.
pub(crate) fn read(pid: u32) -> Option<Usage> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let ticks = cpu_ticks(&stat)?;
    Some(Usage {
        cpu_seconds: ticks as f64 / clock_ticks_per_second(),
        rss_bytes: status_kib(&status, "VmRSS")?.saturating_mul(1024),
        peak_rss_bytes: status_kib(&status, "VmHWM")?.saturating_mul(1024),
        anon_rss_bytes: status_kib(&status, "RssAnon")?.saturating_mul(1024),
        wakeups: wakeups(&format!("/proc/{pid}/task")),
    })
}

/// Voluntary context switches summed over the threads listed under `tasks` (`/proc/<pid>/task`).
fn wakeups(tasks: &str) -> u64 {
    let Ok(entries) = std::fs::read_dir(tasks) else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("status")).ok())
        .filter_map(|status| status_count(&status, "voluntary_ctxt_switches"))
        .fold(0u64, u64::saturating_add)
}

/// CPU seconds and wake-ups of the calling thread alone (`/proc/thread-self`): what the work on one
/// thread of a process costs while other threads do other things.
pub(crate) fn this_thread() -> Option<(f64, u64)> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    let status = std::fs::read_to_string("/proc/thread-self/status").ok()?;
    let ticks = cpu_ticks(&stat)?;
    Some((
        ticks as f64 / clock_ticks_per_second(),
        status_count(&status, "voluntary_ctxt_switches")?,
    ))
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf reads a constant of the system.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

/// utime + stime (fields 14 and 15) of a `/proc/<pid>/stat` line. The command name (field 2) is in
/// parentheses and may itself contain spaces or parentheses, so fields are counted after the last `)`.
pub(crate) fn cpu_ticks(stat: &str) -> Option<u64> {
    let (_, after_name) = stat.rsplit_once(')')?;
    // After the name: field 3 (state) is the first, so utime (14) is the 12th.
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    utime.checked_add(stime)
}

/// A `Key:   1234 kB` line of `/proc/<pid>/status`, in KiB.
pub(crate) fn status_kib(status: &str, key: &str) -> Option<u64> {
    status_count(status, key)
}

/// The number of a `Key:\t1234` line of `/proc/<pid>/status` (a unit after it is ignored).
fn status_count(status: &str, key: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let value = line.strip_prefix(key)?.strip_prefix(':')?;
        value.split_whitespace().next()?.parse().ok()
    })
}

/// Samples a process every `period` in the background until dropped.
#[derive(Debug)]
pub(crate) struct Sampler {
    max_rss: Arc<Mutex<u64>>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    pub(crate) fn start(pid: u32, period: Duration) -> Self {
        let max_rss = Arc::new(Mutex::new(0u64));
        let seen = max_rss.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            loop {
                tick.tick().await;
                let Some(usage) = read(pid) else { return };
                if let Ok(mut max) = seen.lock() {
                    *max = (*max).max(usage.rss_bytes);
                }
            }
        });
        Sampler { max_rss, task }
    }

    /// The largest RSS sampled so far.
    pub(crate) fn max_rss_bytes(&self) -> u64 {
        self.max_rss.lock().map(|max| *max).unwrap_or_default()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpu_ticks_after_a_tricky_command_name() {
        let stat = "4242 (kube ctl) (x)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 150 25 0 0 20 0 12 0 \
                    100 2000000 3000 18446744073709551615";
        assert_eq!(cpu_ticks(stat), Some(175));
        assert_eq!(cpu_ticks("garbage"), None);
    }

    #[test]
    fn parses_status_sizes() {
        let status = "Name:\tmini-kcm\nVmHWM:\t   71234 kB\nVmRSS:\t   65000 kB\nRssAnon:\t   12000 kB\nThreads:\t9\n";
        assert_eq!(status_kib(status, "VmRSS"), Some(65000));
        assert_eq!(status_kib(status, "RssAnon"), Some(12000));
        assert_eq!(status_kib(status, "VmHWM"), Some(71234));
        assert_eq!(status_kib(status, "VmSwap"), None);
        let switches = "voluntary_ctxt_switches:\t120\nnonvoluntary_ctxt_switches:\t7\n";
        assert_eq!(status_count(switches, "voluntary_ctxt_switches"), Some(120));
        assert_eq!(
            status_count(switches, "nonvoluntary_ctxt_switches"),
            Some(7)
        );
    }

    #[test]
    fn reads_this_process() {
        let usage = read(std::process::id()).unwrap();
        assert!(usage.rss_bytes > 0);
        assert!(usage.peak_rss_bytes >= usage.rss_bytes);
        assert!(usage.anon_rss_bytes > 0 && usage.anon_rss_bytes <= usage.rss_bytes);
        // A thread that sleeps blocks, and is woken: one more wake-up on this thread and the process.
        let (_, before) = this_thread().unwrap();
        std::thread::sleep(Duration::from_millis(1));
        let (_, after) = this_thread().unwrap();
        assert!(after > before, "{before} -> {after}");
        assert!(read(std::process::id()).unwrap().wakeups >= after);
    }
}
