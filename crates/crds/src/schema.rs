//! The OpenAPI v3 schemas of the CRD copies, generated from k8s-openapi's own `JsonSchema` impls.
//!
//! Generating (instead of hand-writing or vendoring upstream's OpenAPI document) keeps the copies in step
//! with the k8s-openapi version the controllers are compiled against: the spec and status a controller
//! reads are exactly the fields the API server keeps. k8s-openapi's schemas are plain OpenAPI with `$ref`s
//! and a few gaps that a CRD cannot live with, so this module turns them into a *structural* schema, the
//! only kind an `apiextensions.k8s.io/v1` CRD accepts:
//!
//! 1. every `$ref` is inlined (CRD schemas cannot refer to anything);
//! 2. free-form objects (k8s-openapi says only `type: object`, e.g. `FieldsV1`) get
//!    `x-kubernetes-preserve-unknown-fields`, exactly where apps/v1 itself is free-form; everything else is
//!    pruned as in apps/v1; timestamps are `nullable`, as Go writes a zero `metav1.Time` as `null`;
//! 3. the list and map semantics of upstream (`x-kubernetes-list-type: map` with its keys,
//!    `x-kubernetes-map-type: atomic`) that k8s-openapi does not carry are added from [`LIST_MAPS`] and
//!    [`ATOMIC_STRUCTS`], so server-side apply merges containers by name as it does for apps/v1.
//!
//! The kind modules then decorate the result by path ([`at`]) with defaults and validations.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

/// Where schemars puts the definitions that `$ref`s point to (we inline them all).
const DEFINITIONS_PATH: &str = "/$defs";

/// Lists that upstream declares `x-kubernetes-list-type: map`, by (definition, property, keys).
///
/// Only lists whose items upstream's validation already requires to be unique by these keys are here: a
/// CRD *rejects* duplicate keys in a list-map, while apps/v1 merely warns for some upstream list-maps
/// (env names, container ports, image pull secrets, host aliases), so those stay atomic lists, and the
/// copies accept everything apps/v1 accepts. Every key must also be required in its item schema (a CRD
/// rule), which the unit tests check.
const LIST_MAPS: &[(&str, &str, &[&str])] = &[
    ("io.k8s.api.core.v1.PodSpec", "containers", &["name"]),
    ("io.k8s.api.core.v1.PodSpec", "initContainers", &["name"]),
    (
        "io.k8s.api.core.v1.PodSpec",
        "ephemeralContainers",
        &["name"],
    ),
    ("io.k8s.api.core.v1.PodSpec", "volumes", &["name"]),
    ("io.k8s.api.core.v1.PodSpec", "resourceClaims", &["name"]),
    ("io.k8s.api.core.v1.PodSpec", "schedulingGates", &["name"]),
    (
        "io.k8s.api.core.v1.PodSpec",
        "topologySpreadConstraints",
        &["topologyKey", "whenUnsatisfiable"],
    ),
    (
        "io.k8s.api.core.v1.Container",
        "volumeMounts",
        &["mountPath"],
    ),
    (
        "io.k8s.api.core.v1.Container",
        "volumeDevices",
        &["devicePath"],
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "volumeMounts",
        &["mountPath"],
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "volumeDevices",
        &["devicePath"],
    ),
    (
        "io.k8s.api.apps.v1.ReplicaSetStatus",
        "conditions",
        &["type"],
    ),
    (
        "io.k8s.api.apps.v1.DeploymentStatus",
        "conditions",
        &["type"],
    ),
    (
        "io.k8s.api.apps.v1.DaemonSetStatus",
        "conditions",
        &["type"],
    ),
];

/// Structs and maps that upstream replaces as a whole under server-side apply (`+structType=atomic`,
/// `+mapType=atomic`), so two appliers never end up with a half-merged label selector.
const ATOMIC_STRUCTS: &[&str] = &["io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"];

/// The string form of a `resource.Quantity` (what `resource.ParseQuantity` accepts), so that a malformed
/// CPU or memory request is refused when the workload is written, as apps/v1 does, and not only later
/// when the controller creates pods.
pub(crate) const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";

/// Atomic maps that are properties of a struct, by (definition, property).
const ATOMIC_MAPS: &[(&str, &str)] = &[("io.k8s.api.core.v1.PodSpec", "nodeSelector")];

/// The structural schema of a whole object whose spec and status are the k8s-openapi types `Spec` and
/// `Status`: `apiVersion`, `kind`, `metadata` (left to the API server, as for every CRD), `spec` (required,
/// so that the defaults inside it always apply) and `status`.
pub(crate) fn object_schema<Spec: JsonSchema, Status: JsonSchema>() -> Value {
    let mut generator = SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.definitions_path = DEFINITIONS_PATH.into();
            settings.meta_schema = None;
            // The transforms rewrite `$ref` siblings into `allOf` and the like; plain `$ref`s are simpler
            // to inline.
            settings.transforms.clear();
            settings.inline_subschemas = false;
        })
        .into_generator();
    let spec = generator.subschema_for::<Spec>().to_value();
    let status = generator.subschema_for::<Status>().to_value();
    let mut definitions = generator.take_definitions(false);
    annotate_definitions(&mut definitions);

    let root = json!({
        "type": "object",
        "properties": {
            "apiVersion": {
                "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
                "type": "string",
            },
            "kind": {
                "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
                "type": "string",
            },
            "spec": spec,
            "status": status,
        },
        "required": ["spec"],
    });
    let mut schema = inline_refs(&root, &definitions, &mut Vec::new());
    make_structural(&mut schema);
    // Added after `make_structural`: the root metadata is the API server's business, and a CRD may say
    // no more about it than its type.
    schema["properties"]["metadata"] = json!({ "type": "object" });
    schema
}

/// Adds upstream's list and map semantics to the definitions, before inlining copies them everywhere.
/// Definitions a kind does not use (a DeploymentStatus in the ReplicaSet schema) are skipped.
fn annotate_definitions(definitions: &mut Map<String, Value>) {
    for (definition, property, keys) in LIST_MAPS {
        let Some(list) = definition_property(definitions, definition, property) else {
            continue;
        };
        list["x-kubernetes-list-type"] = json!("map");
        list["x-kubernetes-list-map-keys"] = json!(keys);
        // A CRD's list-map key must be required (or defaulted). Since 1.37 the API marks the `type` of
        // the workloads' conditions optional (k8s-openapi's v1_37 follows), though every condition upstream
        // writes has one; the copies keep requiring it, as they did with 1.36's schema.
        let item = list["items"]["$ref"]
            .as_str()
            .and_then(|r| r.rsplit('/').next())
            .map(str::to_owned);
        if let Some(item) = item.and_then(|name| definitions.get_mut(&name)) {
            let mut names = item["required"].as_array().cloned().unwrap_or_default();
            for key in *keys {
                if !names.iter().any(|n| n == key) {
                    names.push(json!(key));
                }
            }
            item["required"] = Value::Array(names);
        }
    }
    for definition in ATOMIC_STRUCTS {
        if let Some(schema) = definitions.get_mut(*definition) {
            schema["x-kubernetes-map-type"] = json!("atomic");
        }
    }
    if let Some(quantity) = definitions.get_mut(QUANTITY) {
        quantity["pattern"] = json!(QUANTITY_PATTERN);
    }
    for (definition, property) in ATOMIC_MAPS {
        if let Some(map) = definition_property(definitions, definition, property) {
            map["x-kubernetes-map-type"] = json!("atomic");
        }
    }
}

/// The schema of `property` in `definition`, if the definition is used; panics if the definition lacks
/// the property (a table above that no longer matches k8s-openapi).
fn definition_property<'a>(
    definitions: &'a mut Map<String, Value>,
    definition: &str,
    property: &str,
) -> Option<&'a mut Value> {
    let schema = definitions.get_mut(definition)?;
    Some(
        schema
            .get_mut("properties")
            .and_then(|properties| properties.get_mut(property))
            .unwrap_or_else(|| {
                panic!("k8s-openapi's schema {definition} has no property {property}")
            }),
    )
}

/// A copy of `schema` with every `$ref` replaced by (an inlined copy of) its definition. Keys next to a
/// `$ref` (k8s-openapi puts the field's own description there) win over the definition's.
///
/// Panics on a reference cycle: CRD schemas cannot express recursion, and no apps/v1 type has one.
fn inline_refs(schema: &Value, definitions: &Map<String, Value>, stack: &mut Vec<String>) -> Value {
    match schema {
        Value::Object(map) => {
            if let Some(Value::String(reference)) = map.get("$ref") {
                let name = definition_name(reference);
                assert!(
                    !stack.contains(&name),
                    "recursive schema {name} (via {stack:?}) cannot be inlined"
                );
                let definition = definitions
                    .get(&name)
                    .unwrap_or_else(|| panic!("dangling $ref {reference}"));
                stack.push(name);
                let mut inlined = inline_refs(definition, definitions, stack);
                stack.pop();
                for (key, value) in map {
                    if key != "$ref" {
                        inlined[key] = inline_refs(value, definitions, stack);
                    }
                }
                inlined
            } else {
                Value::Object(
                    map.iter()
                        .map(|(key, value)| (key.clone(), inline_refs(value, definitions, stack)))
                        .collect(),
                )
            }
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| inline_refs(item, definitions, stack))
                .collect(),
        ),
        scalar => scalar.clone(),
    }
}

/// `#/$defs/io.k8s.api.core.v1.PodSpec` → `io.k8s.api.core.v1.PodSpec` (JSON-pointer unescaped).
fn definition_name(reference: &str) -> String {
    let prefix = format!("#{DEFINITIONS_PATH}/");
    let escaped = reference
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("$ref {reference} outside {prefix}"));
    assert!(
        !escaped.contains('%'),
        "percent-encoded $ref {reference} is not expected from k8s-openapi"
    );
    escaped.replace("~1", "/").replace("~0", "~")
}

/// Fixes what makes k8s-openapi's schemas non-structural. Walks schema nodes only (not `default`s,
/// `enum`s or other values).
fn make_structural(node: &mut Value) {
    let Some(map) = node.as_object_mut() else {
        return;
    };
    let free_form_object = map.get("type") == Some(&json!("object"))
        && !map.contains_key("properties")
        && !map.contains_key("additionalProperties");
    if free_form_object {
        // An object schema without properties would prune every field: upstream means "anything".
        map.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
    }
    if map.get("format") == Some(&json!("date-time")) {
        // metav1.Time writes its zero value as `null`, so manifests printed by Go tools carry
        // `creationTimestamp: null` in pod templates; apps/v1 accepts that, a CRD only if nullable.
        map.insert("nullable".into(), json!(true));
    }
    for_each_child_schema(node, &mut make_structural);
}

/// The schema node at `path` below `schema`: dot-separated property names, where `name[]` steps into the
/// items of list `name` and `name{}` into the values of map `name`. Panics if there is none: the paths
/// are constants of this crate, checked by its tests.
pub(crate) fn at<'a>(schema: &'a mut Value, path: &str) -> &'a mut Value {
    path.split('.')
        .filter(|segment| !segment.is_empty())
        .fold(schema, |node, segment| {
            let (name, step) = match segment
                .strip_suffix("[]")
                .map(|name| (name, Some("items")))
                .or_else(|| {
                    segment
                        .strip_suffix("{}")
                        .map(|name| (name, Some("additionalProperties")))
                }) {
                Some((name, step)) => (name, step),
                None => (segment, None),
            };
            let property = node
                .get_mut("properties")
                .and_then(|properties| properties.get_mut(name))
                .unwrap_or_else(|| panic!("no schema property {name:?} on the way to {path:?}"));
            match step {
                Some(step) => property
                    .get_mut(step)
                    .unwrap_or_else(|| panic!("{name:?} has no {step} on the way to {path:?}")),
                None => property,
            }
        })
}

/// Removes every `description` below `node` (not its own). Used on the pod template: its documentation
/// is that of `kubectl explain pod.spec`, and dropping it keeps each CRD far below the 256 KiB that
/// client-side `kubectl apply` can store in its last-applied annotation.
pub(crate) fn strip_nested_descriptions(node: &mut Value) {
    for_each_child_schema(node, &mut |child| {
        if let Some(map) = child.as_object_mut() {
            map.remove("description");
        }
        strip_nested_descriptions(child);
    });
}

/// Calls `f` on each direct child schema of `node`: property schemas, list items, map values. Never on
/// values (`default`, `enum`) that merely look like schemas.
fn for_each_child_schema(node: &mut Value, f: &mut impl FnMut(&mut Value)) {
    let Some(map) = node.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        properties.values_mut().for_each(&mut *f);
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = map.get_mut(key) {
            f(child);
        }
    }
}

/// One `x-kubernetes-validations` rule.
pub(crate) struct Rule<'a> {
    pub rule: &'a str,
    pub message: &'a str,
    /// Where the error is reported, relative to the node the rule is on (as upstream reports it).
    pub field_path: Option<&'a str>,
    /// `FieldValueInvalid` (the default), `FieldValueForbidden`, `FieldValueRequired`...
    pub reason: Option<&'a str>,
}

/// Appends `rule` to the `x-kubernetes-validations` of `node`.
pub(crate) fn add_rule(node: &mut Value, rule: Rule<'_>) {
    let mut entry = json!({ "rule": rule.rule, "message": rule.message });
    if let Some(field_path) = rule.field_path {
        entry["fieldPath"] = json!(field_path);
    }
    if let Some(reason) = rule.reason {
        entry["reason"] = json!(reason);
    }
    match node.get_mut("x-kubernetes-validations") {
        Some(Value::Array(rules)) => rules.push(entry),
        _ => node["x-kubernetes-validations"] = json!([entry]),
    }
}

/// Requires `property` in the object schema `node` (idempotent).
pub(crate) fn require(node: &mut Value, property: &str) {
    match node.get_mut("required") {
        Some(Value::Array(required)) => {
            if !required.iter().any(|existing| existing == property) {
                required.push(json!(property));
            }
        }
        _ => node["required"] = json!([property]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStatus};

    #[test]
    fn at_follows_properties_items_and_maps() {
        let mut schema = object_schema::<DeploymentSpec, DeploymentStatus>();
        assert_eq!(
            at(&mut schema, "spec.template.spec.containers[].name")["type"],
            "string"
        );
        assert_eq!(
            at(&mut schema, "spec.selector.matchLabels{}")["type"],
            "string"
        );
    }

    #[test]
    #[should_panic(expected = "no schema property \"nope\"")]
    fn at_panics_on_a_wrong_path() {
        let mut schema = object_schema::<DeploymentSpec, DeploymentStatus>();
        at(&mut schema, "spec.nope");
    }

    #[test]
    fn refs_are_inlined_with_their_siblings() {
        let definitions: Map<String, Value> = serde_json::from_value(json!({
            "A": { "type": "object", "description": "A's own", "properties": { "b": { "$ref": "#/$defs/B" } } },
            "B": { "type": "string", "description": "B's own" },
        }))
        .unwrap();
        let inlined = inline_refs(
            &json!({ "$ref": "#/$defs/A", "description": "the field's" }),
            &definitions,
            &mut Vec::new(),
        );
        assert_eq!(
            inlined,
            json!({ "type": "object", "description": "the field's",
                    "properties": { "b": { "type": "string", "description": "B's own" } } })
        );
    }

    #[test]
    #[should_panic(expected = "recursive schema")]
    fn recursive_refs_are_refused() {
        let definitions: Map<String, Value> = serde_json::from_value(json!({
            "A": { "type": "object", "properties": { "a": { "$ref": "#/$defs/A" } } },
        }))
        .unwrap();
        inline_refs(
            &json!({ "$ref": "#/$defs/A" }),
            &definitions,
            &mut Vec::new(),
        );
    }

    #[test]
    fn free_form_objects_preserve_unknown_fields() {
        let mut schema = object_schema::<DeploymentSpec, DeploymentStatus>();
        let fields = at(
            &mut schema,
            "spec.template.metadata.managedFields[].fieldsV1",
        );
        assert_eq!(fields["x-kubernetes-preserve-unknown-fields"], true);
    }

    #[test]
    fn strip_keeps_the_nodes_own_description_and_defaults() {
        let mut node = json!({
            "description": "kept",
            "default": { "description": "a value, kept" },
            "properties": {
                "a": { "description": "dropped", "type": "string" },
                "description": { "description": "a property named description: its doc dropped", "type": "string" },
            },
        });
        strip_nested_descriptions(&mut node);
        assert_eq!(
            node,
            json!({
                "description": "kept",
                "default": { "description": "a value, kept" },
                "properties": { "a": { "type": "string" }, "description": { "type": "string" } },
            })
        );
    }
}
