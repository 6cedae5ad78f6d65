//! Classifying the API server's answers, as upstream's `apierrors.IsNotFound` & co.: which failures a
//! controller may ignore (the object is already gone), retry (a conflict) or must report, and the text
//! that goes into events and conditions (the API server's own message, as upstream shows it).

/// 404: the object does not exist (any more).
pub fn is_not_found(e: &kube::Error) -> bool {
    status_code(e) == Some(404)
}

/// 409 `Conflict`: the write carried a stale resourceVersion (the object changed since it was read).
pub fn is_conflict(e: &kube::Error) -> bool {
    status_code(e) == Some(409) && !is_already_exists(e)
}

/// 409 `AlreadyExists`: a creation whose name is taken (a name clash, not a stale read).
pub fn is_already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == 409 && status.reason == "AlreadyExists")
}

/// 422: the request is invalid — including a JSON patch whose `test` operation failed.
pub(crate) fn is_invalid(e: &kube::Error) -> bool {
    status_code(e) == Some(422)
}

/// The namespace is being deleted, so every creation in it is refused: not the controller's failure.
pub fn is_namespace_terminating(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status
        .details
        .as_ref()
        .is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating")))
}

/// The message upstream puts in events and conditions: the API server's own text for API errors,
/// otherwise the error itself.
pub fn error_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(Status::failure(message, "Reason").with_code(code)))
    }

    fn already_exists() -> kube::Error {
        kube::Error::Api(Box::new(
            Status::failure("exists", "AlreadyExists").with_code(409),
        ))
    }

    #[test]
    fn classifies_by_status_code() {
        assert!(is_not_found(&api_error(404, "gone")));
        assert!(is_conflict(&api_error(409, "conflict")));
        assert!(is_already_exists(&already_exists()) && !is_conflict(&already_exists()));
        assert!(!is_already_exists(&api_error(409, "conflict")));
        assert!(is_invalid(&api_error(422, "test failed")));
        assert!(!is_not_found(&api_error(409, "conflict")));
        assert!(!is_conflict(&kube::Error::LinesCodecMaxLineLengthExceeded));
        assert_eq!(
            error_message(&api_error(403, "quota exceeded")),
            "quota exceeded"
        );
    }

    #[test]
    fn namespace_terminating_is_read_from_the_causes() {
        // As the API server answers a creation in a namespace being deleted.
        let status: Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": 403, "reason": "Forbidden",
            "message": "pods \"x\" is forbidden: unable to create new content in namespace ns because it is being terminated",
            "details": {"causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace"}]}
        }))
        .unwrap();
        assert!(is_namespace_terminating(&kube::Error::Api(Box::new(
            status
        ))));
        assert!(!is_namespace_terminating(&api_error(403, "forbidden")));
    }
}
