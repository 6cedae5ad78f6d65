//! The API server as a controller meets it: the client and its transport, the two API families
//! ([`kinds`]) and how their objects decode ([`object`]), the label selectors and int-or-percent values
//! their specs carry, the one way a controller writes ([`tracked_api`], each write recorded for the
//! read-your-own-writes check) and its status writes ([`status_writes`]), and how refusals are read
//! ([`api_errors`]).

pub mod api_errors;
pub mod client;
pub mod int_or_percent;
pub mod kinds;
pub mod object;
pub mod selector;
pub mod status_writes;
pub mod tracked_api;
pub(crate) mod transport;
