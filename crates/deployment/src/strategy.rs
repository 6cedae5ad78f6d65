//! The strategy's limits (upstream's `deployment_util.go` arithmetic): how far a rollout may surge
//! above and dip below `spec.replicas` (maxSurge and maxUnavailable resolved against the replica count).
//!
//! Sizes are Go `int32`s upstream, whose arithmetic wraps; here every sum and difference of sizes
//! saturates instead, so no input can panic a debug build. The two agree wherever Go's result is in range;
//! they differ only for sizes near 2^31 (e.g. `replicas: 2147483647` with `maxSurge: 1`), where Go's
//! wrapped value is meaningless (a negative pod limit that blocks the rollout) and saturation gives the
//! intended one (a limit of `i32::MAX`).

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use mini_kcm_runtime::api::int_or_percent::{Rounding, scaled_value};

use crate::accessors::{ROLLING_UPDATE_STRATEGY, deployment_replicas, strategy_type};
use crate::{DeploymentObject, Error};

/// `value` clamped into the `i32` range.
pub(crate) fn saturate_to_i32(value: i64) -> i32 {
    i32::try_from(value).unwrap_or(if value < 0 { i32::MIN } else { i32::MAX })
}

/// `Σ values`, saturating (Go's `int32` sums wrap; see the module header).
pub(crate) fn saturating_sum(values: impl IntoIterator<Item = i32>) -> i32 {
    values.into_iter().fold(0, i32::saturating_add)
}

/// Resolves maxSurge and maxUnavailable against `desired` replicas: surge rounds up, unavailable rounds
/// down, an absent value is 0. Both resolving to 0 (validation forbids it explicitly, but rounding down
/// can produce it) makes unavailable 1, so the rollout can proceed even where surge pods cannot be
/// scheduled (e.g. quota).
pub(crate) fn resolve_fenceposts(
    max_surge: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    desired: i32,
) -> Result<(i32, i32), Error> {
    let zero = IntOrString::Int(0);
    let surge = scaled_value(Some(max_surge.unwrap_or(&zero)), desired, Rounding::Up)?;
    let mut unavailable = scaled_value(
        Some(max_unavailable.unwrap_or(&zero)),
        desired,
        Rounding::Down,
    )?;
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    Ok((surge, unavailable))
}

/// Whether the Deployment uses the RollingUpdate strategy.
pub(crate) fn is_rolling_update(d: &DeploymentObject) -> bool {
    strategy_type(d) == ROLLING_UPDATE_STRATEGY
}

pub(crate) fn rolling_params(d: &DeploymentObject) -> (Option<&IntOrString>, Option<&IntOrString>) {
    let rolling = d
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.rolling_update.as_ref());
    (
        rolling.and_then(|r| r.max_surge.as_ref()),
        rolling.and_then(|r| r.max_unavailable.as_ref()),
    )
}

fn fenceposts(d: &DeploymentObject) -> (i32, i32) {
    let (surge, unavailable) = rolling_params(d);
    // Invalid values are rejected by validation; upstream then reads both as 0.
    resolve_fenceposts(surge, unavailable, deployment_replicas(d)).unwrap_or((0, 0))
}

/// The pods a rolling Deployment may have unavailable: 0 for Recreate or 0 replicas, at most
/// `spec.replicas`.
pub(crate) fn max_unavailable(d: &DeploymentObject) -> i32 {
    let replicas = deployment_replicas(d);
    if !is_rolling_update(d) || replicas == 0 {
        return 0;
    }
    fenceposts(d).1.min(replicas)
}

#[cfg(test)]
/// The pods a rolling Deployment must keep available (0 for Recreate).
pub(crate) fn min_available(d: &DeploymentObject) -> i32 {
    if !is_rolling_update(d) {
        return 0;
    }
    deployment_replicas(d).saturating_sub(max_unavailable(d))
}

/// The pods a rolling Deployment may run above `spec.replicas` (0 for Recreate).
pub(crate) fn max_surge(d: &DeploymentObject) -> i32 {
    if !is_rolling_update(d) {
        return 0;
    }
    fenceposts(d).0
}
