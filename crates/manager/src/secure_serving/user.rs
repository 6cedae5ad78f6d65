//! Who made a request to the secure port, as authentication names them: the API server's TokenReview
//! (`super::delegated_auth`), a client certificate or a front proxy (`super::client_cert`). Its own
//! module because both kinds of authenticator produce it and authorization reads it.

use std::collections::BTreeMap;

/// An authenticated (or anonymous) user, with what a SubjectAccessReview needs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct User {
    pub(crate) name: String,
    pub(crate) uid: Option<String>,
    pub(crate) groups: Vec<String>,
    pub(crate) extra: BTreeMap<String, Vec<String>>,
}

impl User {
    /// A request that no authenticator named, as kube-controller-manager calls it.
    pub(crate) fn anonymous() -> Self {
        User {
            name: "system:anonymous".into(),
            uid: None,
            groups: vec!["system:unauthenticated".into()],
            extra: BTreeMap::new(),
        }
    }
}
