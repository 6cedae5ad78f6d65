//! Pods as controllers see them: which are active, which to delete first, and how to create and delete
//! them, in slow-start batches ([`slow_start`]).

pub mod cached;
pub mod control;
pub mod ranking;
pub mod slow_start;
