//! The process's global allocator: glibc's malloc unless a cargo feature picks `jemalloc`
//! (tikv-jemallocator, default settings) or `mimalloc`, so the three stay comparable with
//! `mini-kcm bench --mini-kcm-binary`.
//!
//! The image (`deploy/image/build.sh`) is built with `--features jemalloc`; a plain `cargo build` keeps
//! glibc's. Why (docs/performance.md, "Allocators"): at the full `steady` size (10 000 pods in 1 000
//! ReplicaSets, two runs each) jemalloc held 36.6 MiB of anonymous memory where glibc held 40.8–40.9,
//! spent 12.2 CPU seconds where glibc spent 15.4 (0.62× upstream's against 0.67–0.72×), and, leaving
//! more of the two cores to the plane, finished with upstream (198 s) where glibc's build took 253 s.
//! At 2 000 pods the two had held the same memory. Not the default of every build: jemalloc's C build
//! adds about 2.5 minutes to each cold build on two cores, which the tests (debug) would pay for
//! nothing they check.

#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

// With both features on (`--all-features`), jemalloc wins rather than failing the build.
#[cfg(all(feature = "mimalloc", not(feature = "jemalloc")))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
