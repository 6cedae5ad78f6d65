//! The process's global allocator: glibc's malloc unless a cargo feature picks `jemalloc`
//! (tikv-jemallocator, default settings) or `mimalloc`, so the three stay comparable with
//! `mini-kcm bench --mini-kcm-binary`.
//!
//! The image (`deploy/image/build.sh`) is built with `--features jemalloc`; a plain `cargo build` keeps
//! glibc's. Why (docs/performance.md, "Allocators"): at the full `steady` size (10 000 pods in 1 000
//! ReplicaSets) jemalloc held 36.5–36.6 MiB of anonymous memory in three runs where glibc held
//! 40.8–40.9 in two; at 2 000 pods the two had held the same. Their CPU differed by a few per cent at
//! equal run lengths, within the bench's noise. Not the default of every build: jemalloc's C build
//! adds about 2.5 minutes to each cold build on two cores, which the tests (debug) would pay for
//! nothing they check.

#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

// With both features on (`--all-features`), jemalloc wins rather than failing the build.
#[cfg(all(feature = "mimalloc", not(feature = "jemalloc")))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
