//! What an operator or a learner may switch: upstream's feature gates (`--feature-gates`, [`features`])
//! and the safety mechanisms a learner may turn off to watch what they prevent ([`safeties`]).

pub mod features;
pub mod safeties;
