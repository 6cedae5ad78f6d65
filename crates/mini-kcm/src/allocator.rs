//! The process's global allocator, chosen by cargo feature: `jemalloc` (default, tikv-jemallocator
//! with its default settings), `mimalloc`, or neither (`--no-default-features`: glibc's malloc) so the
//! three stay comparable with `mini-kcm bench --mini-kcm-binary`.
//!
//! Why jemalloc: issue 11 suspected allocator fragmentation behind mini-kcm's ≈20 KiB of RSS per
//! cached pod (twice the ≈10 KiB of heap a decoded pod holds). `bench --scenarios steady --steady-pods
//! 2000`, one round per allocator, showed it is not: steady RSS was 70.6 MiB with glibc (69.9 with
//! `MALLOC_ARENA_MAX=2`), 70.7 with jemalloc (70.8 with its background purging thread) and 92.1 with
//! mimalloc (docs/performance.md, "Allocators"), so the bytes are live objects, not allocator slack. jemalloc
//! was kept for the controller CPU of the same runs (2.96–3.31 s against glibc's 3.92 s for the same
//! work, while upstream's stayed at 3.8–4.2 s) and because it builds into the static glibc image
//! binary (`+crt-static`) unchanged.

#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

// With both features on (`--all-features`), jemalloc wins rather than failing the build.
#[cfg(all(feature = "mimalloc", not(feature = "jemalloc")))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
