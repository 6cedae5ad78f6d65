//! Unit tests of the generated CRDs: structural-schema rules, defaults, validations, names, sizes, and
//! that `deploy/crds/` holds exactly what the generator produces (or, with `MINI_KCM_WRITE_CRDS=1`,
//! rewriting it). What the API server does with them is tested in `tests/install.rs`.

use std::path::PathBuf;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

use super::*;

fn schema_of(crd: &CustomResourceDefinition) -> Value {
    let props = crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|validation| validation.open_api_v3_schema.as_ref())
        .unwrap();
    serde_json::to_value(props).unwrap()
}

/// Read-only `schema::at`: `a.b[]` steps into list items, `a{}` into map values.
fn node<'a>(schema: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(schema, |node, segment| {
        let (name, step) = if let Some(name) = segment.strip_suffix("[]") {
            (name, Some("items"))
        } else if let Some(name) = segment.strip_suffix("{}") {
            (name, Some("additionalProperties"))
        } else {
            (segment, None)
        };
        let property = &node["properties"][name];
        assert!(!property.is_null(), "no property {name} in {path}");
        match step {
            Some(step) => &property[step],
            None => property,
        }
    })
}

/// Calls `visit(path, node)` for every schema node (properties, items, map values).
fn walk(path: &str, node: &Value, visit: &mut impl FnMut(&str, &Value)) {
    visit(path, node);
    if let Some(properties) = node["properties"].as_object() {
        for (name, child) in properties {
            walk(&format!("{path}.{name}"), child, visit);
        }
    }
    if node["items"].is_object() {
        walk(&format!("{path}[]"), &node["items"], visit);
    }
    if node["additionalProperties"].is_object() {
        walk(&format!("{path}{{}}"), &node["additionalProperties"], visit);
    }
}

fn rules_at(schema: &Value, path: &str) -> Vec<(String, String)> {
    node(schema, path)["x-kubernetes-validations"]
        .as_array()
        .map(|rules| {
            rules
                .iter()
                .map(|rule| {
                    (
                        rule["message"].as_str().unwrap().to_string(),
                        rule["fieldPath"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn assert_rule(schema: &Value, path: &str, message: &str, field_path: &str) {
    let rules = rules_at(schema, path);
    assert!(
        rules.iter().any(|(m, f)| m == message && f == field_path),
        "no rule {message:?} (fieldPath {field_path:?}) at {path}; rules there: {rules:?}"
    );
}

#[test]
fn every_schema_is_structural() {
    const FORBIDDEN: &[&str] = &[
        "$ref",
        "$schema",
        "$defs",
        "definitions",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
    ];
    for crd in all() {
        let schema = schema_of(&crd);
        let mut violations = Vec::new();
        walk("", &schema, &mut |path, node| {
            for key in FORBIDDEN {
                if node.get(key).is_some() {
                    violations.push(format!("{path}: has {key}"));
                }
            }
            let int_or_string = node["x-kubernetes-int-or-string"] == true;
            let preserve = node["x-kubernetes-preserve-unknown-fields"] == true;
            if node.get("type").is_none() && !int_or_string && !preserve {
                violations.push(format!("{path}: no type"));
            }
            if node.get("properties").is_some() && node.get("additionalProperties").is_some() {
                violations.push(format!("{path}: properties and additionalProperties"));
            }
            if let Some(additional) = node.get("additionalProperties")
                && !additional.is_object()
            {
                violations.push(format!("{path}: additionalProperties {additional}"));
            }
            if node["type"] == "object"
                && node.get("properties").is_none()
                && node.get("additionalProperties").is_none()
                && !preserve
                && path != ".metadata"
            {
                violations.push(format!("{path}: an object that would prune everything"));
            }
            if node["x-kubernetes-list-type"] == "map" {
                let items = &node["items"];
                let required: Vec<&str> = items["required"]
                    .as_array()
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                for key in node["x-kubernetes-list-map-keys"].as_array().unwrap() {
                    let key = key.as_str().unwrap();
                    let defaulted = items["properties"][key].get("default").is_some();
                    if !required.contains(&key) && !defaulted {
                        violations.push(format!("{path}: list-map key {key} not required"));
                    }
                }
            }
        });
        let name = crd.metadata.name.unwrap();
        assert!(violations.is_empty(), "{name}: {violations:#?}");
        assert_eq!(
            schema["properties"]["metadata"],
            json!({ "type": "object" })
        );
    }
}

#[test]
fn generated_schemas_survive_the_json_schema_props_type() {
    // k8s-openapi's JSONSchemaProps drops keys it does not know: none may be lost on the way into a CRD.
    for (crd, mut generated) in [
        (replica_set(), replica_set::schema()),
        (deployment(), deployment::schema()),
        (daemon_set(), daemon_set::schema()),
    ] {
        let in_crd = schema_of(&crd);
        generated["description"] = in_crd["description"].clone();
        assert_eq!(in_crd, generated, "{:?}", crd.metadata.name);
    }
}

#[test]
fn defaults_are_those_of_apps_v1() {
    let rs = schema_of(&replica_set());
    assert_eq!(node(&rs, "spec.replicas")["default"], 1);

    let deploy = schema_of(&deployment());
    for (path, default) in [
        ("spec.replicas", json!(1)),
        ("spec.revisionHistoryLimit", json!(10)),
        ("spec.progressDeadlineSeconds", json!(600)),
        ("spec.strategy", json!({})),
        ("spec.strategy.type", json!("RollingUpdate")),
        ("spec.strategy.rollingUpdate", json!({})),
        ("spec.strategy.rollingUpdate.maxSurge", json!("25%")),
        ("spec.strategy.rollingUpdate.maxUnavailable", json!("25%")),
    ] {
        assert_eq!(node(&deploy, path)["default"], default, "{path}");
    }

    let ds = schema_of(&daemon_set());
    for (path, default) in [
        ("spec.revisionHistoryLimit", json!(10)),
        ("spec.updateStrategy", json!({})),
        ("spec.updateStrategy.type", json!("RollingUpdate")),
        ("spec.updateStrategy.rollingUpdate", json!({})),
        ("spec.updateStrategy.rollingUpdate.maxUnavailable", json!(1)),
        ("spec.updateStrategy.rollingUpdate.maxSurge", json!(0)),
    ] {
        assert_eq!(node(&ds, path)["default"], default, "{path}");
    }
}

#[test]
fn every_default_applies_whenever_the_object_exists() {
    // A structural default only applies inside an existing parent: each ancestor of a defaulted field
    // must be required or defaulted itself, or the default would silently not happen (as for a
    // `strategy.rollingUpdate.maxSurge` default without a `strategy` default).
    for crd in all() {
        let schema = schema_of(&crd);
        let mut defaults = Vec::new();
        walk("", &schema, &mut |path, node| {
            if node.get("default").is_some() {
                defaults.push(path.to_string());
            }
        });
        assert!(!defaults.is_empty());
        for path in defaults {
            let segments: Vec<&str> = path.trim_start_matches('.').split('.').collect();
            for depth in 1..=segments.len() {
                let parent = if depth == 1 {
                    &schema
                } else {
                    node(&schema, &segments[..depth - 1].join("."))
                };
                let name = segments[depth - 1];
                let required = parent["required"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|p| p == name));
                let defaulted = parent["properties"][name].get("default").is_some();
                assert!(
                    required || defaulted,
                    "{:?}: default at {path}, but {name} is neither required nor defaulted",
                    crd.metadata.name
                );
            }
        }
    }
}

#[test]
fn validations_of_apps_v1_are_present() {
    let match_message = "`selector` does not match template `labels`";
    for (crd, empty_word, owner) in [
        (replica_set(), "deployment", "ReplicaSet"),
        (deployment(), "deployment", "ReplicaSet"),
        (daemon_set(), "daemonset", "DaemonSet"),
    ] {
        let schema = schema_of(&crd);
        assert_eq!(schema["required"], json!(["spec"]));
        let spec_required = &node(&schema, "spec")["required"];
        for field in ["selector", "template"] {
            assert!(
                spec_required.as_array().unwrap().contains(&json!(field)),
                "{field} required"
            );
        }
        assert_rule(&schema, "spec", match_message, ".template.metadata.labels");
        assert_eq!(
            rules_at(&schema, "spec")
                .iter()
                .filter(|(m, _)| m == match_message)
                .count(),
            2
        );
        assert_rule(
            &schema,
            "spec.selector",
            &format!("empty selector is invalid for {empty_word}"),
            "",
        );
        assert_rule(&schema, "spec.selector", "field is immutable", "");
        assert_eq!(
            node(&schema, "spec.selector")["x-kubernetes-map-type"],
            "atomic"
        );
        assert_eq!(
            node(&schema, "spec.selector.matchExpressions[].operator")["enum"],
            json!(["In", "NotIn", "Exists", "DoesNotExist"])
        );
        assert_rule(
            &schema,
            "spec.selector.matchExpressions[]",
            "must be specified when `operator` is 'In' or 'NotIn'",
            ".values",
        );
        assert_eq!(
            node(&schema, "spec.template.spec.restartPolicy")["enum"],
            json!(["Always"])
        );
        assert_rule(
            &schema,
            "spec.template.spec",
            &format!("activeDeadlineSeconds in {owner} is not Supported"),
            ".activeDeadlineSeconds",
        );
        assert_eq!(
            node(&schema, "spec.template.spec.containers")["minItems"],
            1
        );
        assert_eq!(
            node(&schema, "spec.minReadySeconds")["minimum"],
            workload::NON_NEGATIVE
        );
        assert_eq!(
            node(&schema, "spec.template.metadata.labels{}")["pattern"],
            json!(workload::LABEL_VALUE_PATTERN)
        );
        // Every status counter is non-negative.
        walk("", node(&schema, "status"), &mut |path, status_node| {
            if path.matches('.').count() == 1 && status_node["type"] == "integer" {
                assert_eq!(
                    status_node["minimum"],
                    workload::NON_NEGATIVE,
                    "status{path}"
                );
            }
        });
    }

    let rs = schema_of(&replica_set());
    assert_eq!(
        node(&rs, "spec.replicas")["minimum"],
        workload::NON_NEGATIVE
    );
    assert_rule(
        &rs,
        "status",
        "cannot be greater than status.replicas",
        ".fullyLabeledReplicas",
    );
    assert_rule(
        &rs,
        "status",
        "cannot be greater than readyReplicas",
        ".availableReplicas",
    );

    let deploy = schema_of(&deployment());
    for field in [
        "replicas",
        "revisionHistoryLimit",
        "progressDeadlineSeconds",
    ] {
        assert_eq!(
            node(&deploy, &format!("spec.{field}"))["minimum"],
            workload::NON_NEGATIVE,
            "{field}"
        );
    }
    assert_rule(
        &deploy,
        "spec",
        "must be greater than minReadySeconds",
        ".progressDeadlineSeconds",
    );
    assert_eq!(
        node(&deploy, "spec.strategy.type")["enum"],
        json!(["Recreate", "RollingUpdate"])
    );
    for (message, field_path) in [
        (
            "may not be specified when strategy `type` is 'Recreate'",
            ".rollingUpdate",
        ),
        (
            "may not be 0 when `maxSurge` is 0",
            ".rollingUpdate.maxUnavailable",
        ),
        (
            "must not be greater than 100%",
            ".rollingUpdate.maxUnavailable",
        ),
        (
            workload::int_or_percent::INVALID_MESSAGE,
            ".rollingUpdate.maxSurge",
        ),
        (
            workload::int_or_percent::INVALID_MESSAGE,
            ".rollingUpdate.maxUnavailable",
        ),
    ] {
        assert_rule(&deploy, "spec.strategy", message, field_path);
    }
    assert_rule(
        &deploy,
        "status",
        "cannot be decremented",
        ".collisionCount",
    );

    let ds = schema_of(&daemon_set());
    assert_eq!(
        node(&ds, "spec.revisionHistoryLimit")["minimum"],
        workload::NON_NEGATIVE
    );
    assert_eq!(
        node(&ds, "spec.updateStrategy.type")["enum"],
        json!(["RollingUpdate", "OnDelete"])
    );
    for (message, field_path) in [
        (
            "may not be set when maxUnavailable is non-zero",
            ".rollingUpdate.maxSurge",
        ),
        (
            "cannot be 0 when maxSurge is 0",
            ".rollingUpdate.maxUnavailable",
        ),
        ("must not be greater than 100%", ".rollingUpdate.maxSurge"),
        (
            "must not be greater than 100%",
            ".rollingUpdate.maxUnavailable",
        ),
    ] {
        assert_rule(&ds, "spec.updateStrategy", message, field_path);
    }
    assert_rule(&ds, "status", "cannot be decremented", ".collisionCount");
}

#[test]
fn pod_template_is_the_full_pod_spec_with_upstream_list_semantics() {
    for crd in all() {
        let schema = schema_of(&crd);
        for list in [
            "containers",
            "initContainers",
            "ephemeralContainers",
            "volumes",
        ] {
            let list = node(&schema, &format!("spec.template.spec.{list}"));
            assert_eq!(list["x-kubernetes-list-type"], "map");
            assert_eq!(list["x-kubernetes-list-map-keys"], json!(["name"]));
        }
        // Duplicate env names are accepted by apps/v1 (with a warning), a list-map would refuse them.
        assert!(
            node(&schema, "spec.template.spec.containers[].env")
                .get("x-kubernetes-list-type")
                .is_none()
        );
        assert_eq!(
            node(&schema, "spec.template.spec.nodeSelector")["x-kubernetes-map-type"],
            "atomic"
        );
        assert_eq!(
            node(&schema, "status.conditions")["x-kubernetes-list-map-keys"],
            json!(["type"])
        );

        let cpu_limit = node(
            &schema,
            "spec.template.spec.containers[].resources.limits{}",
        );
        assert_eq!(cpu_limit["x-kubernetes-int-or-string"], true);
        assert_eq!(cpu_limit["pattern"], json!(schema::QUANTITY_PATTERN));
        assert_eq!(
            node(
                &schema,
                "spec.template.spec.containers[].ports[].containerPort"
            )["type"],
            "integer"
        );
        let timestamp = node(&schema, "spec.template.metadata.creationTimestamp");
        assert_eq!(timestamp["nullable"], true);
        assert_eq!(
            node(&schema, "spec.template.metadata.managedFields[].fieldsV1")["x-kubernetes-preserve-unknown-fields"],
            true
        );
        // Deep corners of PodSpec are there (no truncation).
        node(
            &schema,
            "spec.template.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[].podAffinityTerm.labelSelector.matchExpressions[].values[]",
        );
        node(
            &schema,
            "spec.template.spec.volumes[].ephemeral.volumeClaimTemplate.spec.resources.requests{}",
        );
    }
    let deploy = schema_of(&deployment());
    for field in ["maxSurge", "maxUnavailable"] {
        assert_eq!(
            node(&deploy, &format!("spec.strategy.rollingUpdate.{field}"))["x-kubernetes-int-or-string"],
            true
        );
    }
}

#[test]
fn names_subresources_and_columns_follow_apps_v1() {
    let expected = [
        ("replicasets", "ReplicaSet", "mrs", true),
        ("deployments", "Deployment", "mdeploy", true),
        ("daemonsets", "DaemonSet", "mds", false),
    ];
    let crds = all();
    assert_eq!(crds.len(), expected.len());
    for (crd, (plural, kind, short, scale)) in crds.iter().zip(expected) {
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some(&*format!("{plural}.{GROUP}"))
        );
        assert_eq!(crd.spec.group, GROUP);
        assert_eq!(crd.spec.scope, "Namespaced");
        let names = &crd.spec.names;
        assert_eq!((names.plural.as_str(), names.kind.as_str()), (plural, kind));
        assert_eq!(names.short_names, Some(vec![short.to_string()]));
        assert_eq!(names.categories, Some(vec![CATEGORY.to_string()]));
        assert_eq!(names.list_kind.as_deref(), Some(&*format!("{kind}List")));
        assert_eq!(crd.spec.versions.len(), 1);
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, VERSION);
        assert!(version.served && version.storage);
        let subresources = version.subresources.as_ref().unwrap();
        assert!(subresources.status.is_some());
        assert_eq!(subresources.scale.is_some(), scale, "{kind} scale");
        if let Some(scale) = &subresources.scale {
            assert_eq!(scale.spec_replicas_path, ".spec.replicas");
            assert_eq!(scale.status_replicas_path, ".status.replicas");
            assert_eq!(
                scale.label_selector_path.as_deref(),
                Some(".status.selector")
            );
            let schema = schema_of(crd);
            assert_eq!(node(&schema, "status.selector")["type"], "string");
        }
        let columns: Vec<&str> = version
            .additional_printer_columns
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        for column in [
            "Desired",
            "Ready",
            "Age",
            "Containers",
            "Images",
            "Selector",
        ] {
            assert!(columns.contains(&column), "{kind}: {column} in {columns:?}");
        }
        // kubectl prints apps/v1's selector in string form; the copies' controllers write that form to
        // status.selector where they have a scale subresource (DaemonSet has neither).
        let selector_column = version
            .additional_printer_columns
            .iter()
            .flatten()
            .find(|c| c.name == "Selector")
            .unwrap();
        let selector_path = if scale {
            ".status.selector"
        } else {
            ".spec.selector"
        };
        assert_eq!(selector_column.json_path, selector_path, "{kind}");
    }
}

#[test]
fn sizes_stay_far_below_the_limits() {
    // etcd refuses objects over 1.5 MiB; client-side `kubectl apply` stores the whole object in a
    // 256 KiB annotation. Stay below the smaller one with room to spare.
    for crd in all() {
        let json = serde_json::to_string(&crd).unwrap();
        let yaml = to_yaml(&crd).unwrap();
        eprintln!(
            "{}: {} bytes as JSON, {} bytes as YAML",
            crd.metadata.name.as_deref().unwrap(),
            json.len(),
            yaml.len()
        );
        assert!(json.len() < 128 * 1024, "{} bytes", json.len());
    }
}

fn manifest_path(crd: &CustomResourceDefinition) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/crds")
        .join(format!("{}.yaml", crd.metadata.name.as_deref().unwrap()))
}

#[test]
fn committed_manifests_match_the_generator() {
    let write = std::env::var_os("MINI_KCM_WRITE_CRDS").is_some_and(|v| v == "1");
    for crd in all() {
        let path = manifest_path(&crd);
        let generated = to_yaml(&crd).unwrap();
        if write {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &generated).unwrap();
            eprintln!("wrote {}", path.display());
            continue;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "{} is not what the generator produces: regenerate it with \
             `MINI_KCM_WRITE_CRDS=1 cargo test -p mini-kcm-crds`",
            path.display()
        );
        // And the manifest reads back as the same object (kubectl sees what install() applies).
        let parsed: CustomResourceDefinition = serde_norway::from_str(&committed).unwrap();
        assert_eq!(parsed, crd);
    }
}
