//! Assembles a `CustomResourceDefinition` from a kind's schema, names, columns and subresources: the
//! parts that are the same shape for the three copies.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionNames,
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceSubresourceScale,
    CustomResourceSubresourceStatus, CustomResourceSubresources, CustomResourceValidation,
    JSONSchemaProps, SelectableField,
};
use kube::api::ObjectMeta;
use serde_json::{Value, json};

use crate::{CATEGORY, GROUP, VERSION};

/// What differs between the three CRDs.
pub(crate) struct CrdParts {
    pub kind: &'static str,
    pub plural: &'static str,
    pub short_name: &'static str,
    /// The root description, shown by `kubectl explain`.
    pub description: &'static str,
    pub schema: Value,
    pub printer_columns: Vec<CustomResourceColumnDefinition>,
    /// Whether the kind has a scale subresource (apps/v1 ReplicaSets and Deployments do, DaemonSets not).
    pub scale: bool,
    /// Fields usable in field selectors beyond metadata.name/namespace, as apps/v1 offers them.
    pub selectable_fields: &'static [&'static str],
}

pub(crate) fn build(parts: CrdParts) -> CustomResourceDefinition {
    let CrdParts {
        kind,
        plural,
        short_name,
        description,
        mut schema,
        printer_columns,
        scale,
        selectable_fields,
    } = parts;
    schema["description"] = json!(description);
    // The schema is a constant of this crate: the unit tests convert every one of them, so this can only
    // fail for a bug that never leaves a developer's machine.
    let schema: JSONSchemaProps = serde_json::from_value(schema)
        .unwrap_or_else(|e| panic!("the generated {kind} schema is not a JSONSchemaProps: {e}"));
    let singular = kind.to_lowercase();
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(format!("{plural}.{GROUP}")),
            ..Default::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: GROUP.into(),
            names: CustomResourceDefinitionNames {
                kind: kind.into(),
                list_kind: Some(format!("{kind}List")),
                plural: plural.into(),
                singular: Some(singular),
                short_names: Some(vec![short_name.into()]),
                categories: Some(vec![CATEGORY.into()]),
            },
            scope: "Namespaced".into(),
            versions: vec![CustomResourceDefinitionVersion {
                name: VERSION.into(),
                served: true,
                storage: true,
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(schema),
                }),
                subresources: Some(CustomResourceSubresources {
                    status: Some(CustomResourceSubresourceStatus(json!({}))),
                    scale: scale.then(|| CustomResourceSubresourceScale {
                        spec_replicas_path: ".spec.replicas".into(),
                        status_replicas_path: ".status.replicas".into(),
                        label_selector_path: Some(crate::workload::STATUS_SELECTOR_PATH.into()),
                    }),
                }),
                additional_printer_columns: Some(printer_columns),
                selectable_fields: (!selectable_fields.is_empty()).then(|| {
                    selectable_fields
                        .iter()
                        .map(|path| SelectableField {
                            json_path: (*path).into(),
                        })
                        .collect()
                }),
                deprecated: None,
                deprecation_warning: None,
            }],
            conversion: None,
            preserve_unknown_fields: None,
        },
        status: None,
    }
}

/// A printer column; `wide` ones (priority 1) only show with `kubectl get -o wide`, as for apps/v1.
pub(crate) fn column(
    name: &str,
    type_: &str,
    json_path: &str,
    wide: bool,
    description: &str,
) -> CustomResourceColumnDefinition {
    CustomResourceColumnDefinition {
        name: name.into(),
        type_: type_.into(),
        json_path: json_path.into(),
        priority: wide.then_some(1),
        description: Some(description.into()),
        format: None,
    }
}

/// The AGE column every kubectl table ends with.
pub(crate) fn age_column() -> CustomResourceColumnDefinition {
    column(
        "Age",
        "date",
        ".metadata.creationTimestamp",
        false,
        "Time since the object was created",
    )
}

/// The CONTAINERS, IMAGES and SELECTOR columns of `kubectl get -o wide` for apps/v1 workloads.
/// `selector_path` is where the selector is printed from: `.status.selector` (the string form, as kubectl
/// prints apps/v1's) for the kinds whose controller writes it, else `.spec.selector` (printed as JSON).
pub(crate) fn wide_template_columns(selector_path: &str) -> Vec<CustomResourceColumnDefinition> {
    vec![
        column(
            "Containers",
            "string",
            ".spec.template.spec.containers[*].name",
            true,
            "Names of the pod template's containers",
        ),
        column(
            "Images",
            "string",
            ".spec.template.spec.containers[*].image",
            true,
            "Images of the pod template's containers",
        ),
        column(
            "Selector",
            "string",
            selector_path,
            true,
            "The label selector of the pods",
        ),
    ]
}
