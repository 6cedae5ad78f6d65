//! The process's global allocator: glibc's malloc unless a cargo feature picks `jemalloc`
//! (tikv-jemallocator, default settings) or `mimalloc`, so the three stay comparable with
//! `mini-kcm bench --mini-kcm-binary`.
//!
//! Why none by default: issue 11 suspected allocator fragmentation behind mini-kcm's ≈20 KiB of RSS per
//! cached pod (twice the ≈10 KiB of heap a decoded pod holds). `bench --scenarios steady --steady-pods
//! 2000`, one round per allocator, showed it is not: steady RSS was 70.6 MiB with glibc (69.9 with
//! `MALLOC_ARENA_MAX=2`), 70.7 with jemalloc (70.8 with its background purging thread) and 92.1 with
//! mimalloc (docs/performance.md, "Allocators"): the bytes are live objects, not allocator slack.
//! jemalloc's controller CPU in the same runs (2.96–3.31 s against glibc's 3.92 s, upstream 3.8–4.5 s)
//! is one round each on a loaded machine, within the bench's noise, while its C build adds about 100 s
//! to every cold build of each profile (CI builds two). A repeatable CPU gain would change this.

#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

// With both features on (`--all-features`), jemalloc wins rather than failing the build.
#[cfg(all(feature = "mimalloc", not(feature = "jemalloc")))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
