//! Static checks of the workspace's sources and docs, one module per rule, in one test binary (no plane):
//! - `module_graph`: no crate has a circle between its modules;
//! - `writes`: controllers write only through the runtime's `TrackedApi`;
//! - `doc_pointers`: every `crates/….rs::item` pointer in the docs names an existing item, and the map in
//!   docs/architecture.md lists every module of the crates it details;
//! - `error_messages`: no `#[error]` message prints its source (the chain does);
//! - `test_tooling`: the production binary is built without the runtime's test tooling.

mod doc_pointers;
mod error_messages;
mod module_graph;
mod test_tooling;
mod writes;
