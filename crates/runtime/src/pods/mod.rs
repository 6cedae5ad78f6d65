//! Pods as controllers see them: which are active, which to delete first, and how to create and delete
//! them.

pub mod cached;
pub mod control;
pub mod ranking;
