//! Go's `encoding/json`, as far as ControllerRevision data depends on it.
//!
//! Upstream stores a revision's data as the bytes of `json.Marshal` of a generic map made from the
//! DaemonSet's typed JSON, and recognises the current revision by comparing those bytes. Two things decide
//! the bytes, and both are reproduced here:
//!
//! 1. **Which fields exist.** A Go struct marshals every field unless `omitempty` (and the value is `""`,
//!    `0`, `false`, nil or empty) or `omitzero` (and the value is zero) drops it; struct-typed fields are
//!    always written (`"resources":{}`), nil slices, maps and pointers without `omitempty` become `null`,
//!    and an absent `resource.Quantity` is `"0"`. k8s-openapi instead writes exactly the fields that are
//!    set. [`shape_pod_template`] turns the latter into the former, driven by a table of the upstream
//!    types (`pod_template_schema.txt`, generated from the Go types by reflection). Fields the table does not
//!    know are kept as they are.
//!
//!    kube-controller-manager receives objects over protobuf, which cannot tell an empty list or map from
//!    a missing one, so an empty list is written as Go writes a nil one (`null`, or omitted under
//!    `omitempty`); that also settles the lists k8s-openapi requires (`containers`, `nodeSelectorTerms`,
//!    `monitors`), which cannot be absent there. One ambiguity is left: `scaleIO.secretRef` is a pointer in
//!    Go but required in k8s-openapi, so a nil one reads back as `{}`; validation requires it anyway.
//!    A cross-check against upstream's own code on random templates lives in
//!    `tests/revision_data_crosscheck.rs`.
//! 2. **How it is written.** Compact, object keys sorted bytewise at every level (the generic map), and
//!    strings escaped the Go way: `<`, `>`, `&`, U+2028 and U+2029 as `\u003c`-style escapes, `\b \f \n \r
//!    \t` short, other control characters as `\u00XX`. [`to_vec`] writes that.

use std::collections::HashMap;
use std::sync::LazyLock;

use serde_json::{Map, Number, Value};

const SCHEMA: &str = include_str!("pod_template_schema.txt");

/// The Go type of a field, as far as marshalling cares.
#[derive(Debug, Clone, PartialEq, Eq)]
enum GoType {
    Str,
    Bool,
    /// Any integer (or float) kind.
    Number,
    /// `metav1.Time`: zero marshals as `null`.
    Time,
    /// `resource.Quantity`: zero marshals as `"0"`.
    Quantity,
    /// `intstr.IntOrString`: zero marshals as `0`.
    IntOrString,
    /// A type with its own marshaller we do not model: kept as given.
    Opaque,
    Ptr(Box<GoType>),
    Slice(Box<GoType>),
    Map(Box<GoType>),
    Struct(&'static str),
}

#[derive(Debug, Clone)]
struct GoField {
    name: &'static str,
    ty: GoType,
    omit_empty: bool,
    omit_zero: bool,
}

static STRUCTS: LazyLock<HashMap<&'static str, Vec<GoField>>> =
    LazyLock::new(|| parse_schema(SCHEMA));

/// Parses the schema table. A field whose type code cannot be read becomes [`GoType::Opaque`] (kept as
/// given), so a damaged table degrades to k8s-openapi's shape instead of failing; a test checks it is whole.
fn parse_schema(text: &'static str) -> HashMap<&'static str, Vec<GoField>> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|line| {
            let mut tokens = line.split_whitespace();
            let name = tokens.next()?;
            let fields = tokens.filter_map(parse_field).collect();
            Some((name, fields))
        })
        .collect()
}

fn parse_field(token: &'static str) -> Option<GoField> {
    let (name, code) = token.split_once(':')?;
    let flags_at = code.find(['?', '~']).unwrap_or(code.len());
    let (ty_code, flags) = code.split_at(flags_at);
    let ty = match parse_type(ty_code) {
        Some((ty, "")) => ty,
        _ => GoType::Opaque,
    };
    Some(GoField {
        name,
        ty,
        omit_empty: flags.contains('?'),
        omit_zero: flags.contains('~'),
    })
}

/// Reads one type code, returning it and the unread rest.
fn parse_type(code: &'static str) -> Option<(GoType, &'static str)> {
    let mut chars = code.chars();
    let first = chars.next()?;
    let rest = chars.as_str();
    let simple = |ty| Some((ty, rest));
    match first {
        's' => simple(GoType::Str),
        'b' => simple(GoType::Bool),
        'i' | 'f' => simple(GoType::Number),
        't' => simple(GoType::Time),
        'q' => simple(GoType::Quantity),
        'x' => simple(GoType::IntOrString),
        'r' | 'y' => simple(GoType::Opaque),
        '*' => parse_type(rest).map(|(inner, rest)| (GoType::Ptr(Box::new(inner)), rest)),
        '[' => {
            let (inner, rest) = parse_type(rest)?;
            Some((GoType::Slice(Box::new(inner)), rest.strip_prefix(']')?))
        }
        '<' => {
            let (inner, rest) = parse_type(rest)?;
            Some((GoType::Map(Box::new(inner)), rest.strip_prefix('>')?))
        }
        '@' => {
            let end = rest
                .find(|c: char| !c.is_ascii_alphanumeric())
                .unwrap_or(rest.len());
            let (name, rest) = rest.split_at(end);
            (!name.is_empty()).then_some((GoType::Struct(name), rest))
        }
        _ => None,
    }
}

/// A marshalled value with what `omitempty` and `omitzero` would say about it.
struct Shaped {
    value: Value,
    empty: bool,
    zero: bool,
}

impl Shaped {
    fn new(value: Value, empty: bool, zero: bool) -> Self {
        Self { value, empty, zero }
    }

    /// A value of the right JSON kind that Go would never omit; or one of an unexpected kind, kept.
    fn kept(value: &Value) -> Self {
        Self::new(value.clone(), false, false)
    }
}

/// The JSON Go would write for a `core/v1 PodTemplateSpec` given k8s-openapi's JSON of the same template.
pub(super) fn shape_pod_template(template: &Value) -> Value {
    shape_struct("PodTemplateSpec", Some(template))
}

fn shape_struct(name: &str, input: Option<&Value>) -> Value {
    let input = input.and_then(Value::as_object);
    let Some(fields) = STRUCTS.get(name) else {
        return Value::Object(input.cloned().unwrap_or_default());
    };
    let mut out = Map::new();
    for field in fields {
        // JSON null decodes to Go's zero value, exactly like an absent field.
        let given = input
            .and_then(|m| m.get(field.name))
            .filter(|v| !v.is_null());
        let shaped = shape(&field.ty, given);
        if (field.omit_empty && shaped.empty) || (field.omit_zero && shaped.zero) {
            continue;
        }
        out.insert(field.name.to_owned(), shaped.value);
    }
    if let Some(input) = input {
        for (key, value) in input {
            if !fields.iter().any(|f| f.name == key) {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(out)
}

fn non_null(value: &Value) -> Option<&Value> {
    (!value.is_null()).then_some(value)
}

fn shape(ty: &GoType, given: Option<&Value>) -> Shaped {
    match (ty, given) {
        (GoType::Str, None) => Shaped::new(Value::String(String::new()), true, true),
        (GoType::Str, Some(Value::String(s))) => {
            Shaped::new(Value::String(s.clone()), s.is_empty(), s.is_empty())
        }
        (GoType::Bool, None) => Shaped::new(Value::Bool(false), true, true),
        (GoType::Bool, Some(Value::Bool(b))) => Shaped::new(Value::Bool(*b), !b, !b),
        (GoType::Number, None) => Shaped::new(Value::Number(Number::from(0)), true, true),
        (GoType::Number, Some(Value::Number(n))) => {
            let zero = n.as_f64() == Some(0.0);
            Shaped::new(Value::Number(n.clone()), zero, zero)
        }
        (GoType::Time, None) => Shaped::new(Value::Null, false, true),
        (GoType::Quantity, None) => Shaped::new(Value::String("0".to_owned()), false, true),
        (GoType::IntOrString, None) => Shaped::new(Value::Number(Number::from(0)), false, true),
        (GoType::Opaque | GoType::Ptr(_) | GoType::Slice(_) | GoType::Map(_), None) => {
            Shaped::new(Value::Null, true, true)
        }
        (GoType::Ptr(inner), Some(value)) => {
            Shaped::new(shape(inner, Some(value)).value, false, false)
        }
        // An empty list or map is nil once the object has been through protobuf, as kube-controller-manager
        // receives it: `null` where Go writes nil, omitted under omitempty.
        (GoType::Slice(_), Some(Value::Array(items))) if items.is_empty() => {
            Shaped::new(Value::Null, true, true)
        }
        (GoType::Map(_), Some(Value::Object(entries))) if entries.is_empty() => {
            Shaped::new(Value::Null, true, true)
        }
        (GoType::Slice(inner), Some(Value::Array(items))) => Shaped::new(
            Value::Array(
                items
                    .iter()
                    .map(|v| shape(inner, non_null(v)).value)
                    .collect(),
            ),
            false,
            false,
        ),
        (GoType::Map(inner), Some(Value::Object(entries))) => Shaped::new(
            Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.clone(), shape(inner, non_null(v)).value))
                    .collect(),
            ),
            false,
            false,
        ),
        (GoType::Struct(name), given) => Shaped::new(shape_struct(name, given), false, false),
        (_, Some(value)) => Shaped::kept(value),
    }
}

/// Compact JSON with keys sorted bytewise and Go's string escaping.
pub(super) fn to_vec(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_value(value, &mut out);
    out
}

fn write_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, out);
            }
            out.push(b']');
        }
        Value::Object(entries) => {
            // Sorted here rather than relying on serde_json's map order, which a `preserve_order` feature
            // anywhere in the build would change.
            let mut sorted: Vec<(&String, &Value)> = entries.iter().collect();
            sorted.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (i, (key, item)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(key, out);
                out.push(b':');
                write_value(item, out);
            }
            out.push(b'}');
        }
    }
}

fn write_number(n: &Number, out: &mut Vec<u8>) {
    if let Some(i) = n.as_i64() {
        out.extend_from_slice(i.to_string().as_bytes());
    } else if let Some(u) = n.as_u64() {
        out.extend_from_slice(u.to_string().as_bytes());
    } else if let Some(f) = n.as_f64() {
        out.extend_from_slice(go_float(f).as_bytes());
    }
}

/// Go's float64 formatting: shortest digits, plain notation unless the magnitude is below 1e-6 or at least
/// 1e21, where the exponent has a sign and (if positive) at least two digits. Kubernetes API objects carry
/// no floats; this only keeps unexpected input well-formed and Go-like.
fn go_float(f: f64) -> String {
    let abs = f.abs();
    if abs == 0.0 || (1e-6..1e21).contains(&abs) {
        return format!("{f}");
    }
    let scientific = format!("{f:e}");
    match scientific.split_once('e') {
        Some((mantissa, exponent)) => match exponent.strip_prefix('-') {
            Some(digits) => format!("{mantissa}e-{digits}"),
            None => format!("{mantissa}e+{exponent:0>2}"),
        },
        None => scientific,
    }
}

fn write_string(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let mut buf = [0_u8; 4];
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\u{2028}' => out.extend_from_slice(b"\\u2028"),
            '\u{2029}' => out.extend_from_slice(b"\\u2029"),
            c if (c as u32) < 0x20 || matches!(c, '<' | '>' | '&') => {
                let b = c as u32 as u8;
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xf)]);
            }
            c => out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes()),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schema_is_whole() {
        assert!(STRUCTS.len() >= 100, "{} structs", STRUCTS.len());
        let declared_fields: usize = SCHEMA
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .map(|l| l.split_whitespace().count() - 1)
            .sum();
        let parsed: usize = STRUCTS.values().map(Vec::len).sum();
        assert_eq!(parsed, declared_fields);
        fn check(ty: &GoType, owner: &str, field: &str) {
            match ty {
                GoType::Struct(name) => {
                    assert!(STRUCTS.contains_key(name), "{owner}.{field} -> {name}")
                }
                GoType::Ptr(inner) | GoType::Slice(inner) | GoType::Map(inner) => {
                    check(inner, owner, field)
                }
                // Only ManagedFieldsEntry.fieldsV1 has a marshaller we keep as is.
                GoType::Opaque => assert_eq!(field, "fieldsV1", "{owner}.{field}"),
                _ => {}
            }
        }
        for (owner, fields) in STRUCTS.iter() {
            for field in fields {
                check(&field.ty, owner, field.name);
            }
        }
        let container = &STRUCTS["Container"];
        let resources = container.iter().find(|f| f.name == "resources").unwrap();
        assert_eq!(resources.ty, GoType::Struct("ResourceRequirements"));
        assert!(resources.omit_empty);
        let meta = &STRUCTS["ObjectMeta"];
        let created = meta.iter().find(|f| f.name == "creationTimestamp").unwrap();
        assert!(created.omit_zero);
    }

    #[test]
    fn go_string_escaping() {
        let s = "a<b>&c\"d\\e\u{8}\u{c}\n\r\t\u{1}\u{1f}\u{7f}é\u{2028}\u{2029}😀";
        assert_eq!(
            String::from_utf8(to_vec(&json!(s))).unwrap(),
            r#""a\u003cb\u003e\u0026c\"d\\e\b\f\n\r\t\u0001\u001f"#.to_owned()
                + "\u{7f}é\\u2028\\u2029😀\""
        );
    }

    #[test]
    fn keys_sorted_bytewise_and_numbers() {
        let v =
            json!({"b": 1, "B": [true, null, -3], "$patch": "x", "a": {"z": 1.5, "y": u64::MAX}});
        assert_eq!(
            String::from_utf8(to_vec(&v)).unwrap(),
            format!(
                r#"{{"$patch":"x","B":[true,null,-3],"a":{{"y":{},"z":1.5}},"b":1}}"#,
                u64::MAX
            )
        );
        assert_eq!(go_float(1e21), "1e+21");
        assert_eq!(go_float(1.5e-7), "1.5e-7");
        assert_eq!(go_float(1e-100), "1e-100");
        assert_eq!(go_float(123456.5), "123456.5");
        assert_eq!(go_float(2.0), "2");
    }

    #[test]
    fn shaping_follows_go_field_rules() {
        let shaped = shape_pod_template(&json!({
            "metadata": {"labels": {"a": "b"}, "creationTimestamp": null, "name": ""},
            "spec": {
                "containers": [{"name": "c", "ports": [], "env": [{"name": "E", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}]}],
                "volumes": [{"name": "v", "projected": {}}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}},
                "hostNetwork": false,
                "automountServiceAccountToken": false,
                "unknownField": 7
            }
        }));
        assert_eq!(
            shaped,
            json!({
                "metadata": {"labels": {"a": "b"}},
                "spec": {
                    "containers": [{"name": "c", "resources": {}, "env": [{"name": "E", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "0"}}}]}],
                    "volumes": [{"name": "v", "projected": {"sources": null}}],
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": null}}},
                    "automountServiceAccountToken": false,
                    "unknownField": 7
                }
            })
        );
        assert_eq!(
            shape_pod_template(&json!({})),
            json!({"metadata": {}, "spec": {"containers": null}})
        );
    }
}
