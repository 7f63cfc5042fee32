//! `x-kubernetes-validations` CEL rules, compiled and evaluated by kube-cel's
//! validation engine (`kube_cel::compile_schema` and `validate_compiled`, the
//! engine behind the `Validator` the crds tests use through
//! `kube::core::cel`). This module only adapts: it compiles a schema's rules
//! once (per CRD version), words kube-cel's failures as kube-apiserver words
//! its causes, and names the rules of a CRD that do not compile. It never
//! walks values itself beyond finding the value a failed rule was about.

use kube_cel::{CompilationError, CompiledSchema, ErrorKind, ValidationError};
use serde_json::Value;

use crate::error::{Cause, shown};

/// Does any node of `schema` carry rules? (Built-in kinds have none, so
/// they skip compiling and walking altogether.)
fn has_rules(schema: &Value) -> bool {
    match schema {
        Value::Object(m) => m.contains_key("x-kubernetes-validations") || m.values().any(has_rules),
        Value::Array(a) => a.iter().any(has_rules),
        _ => false,
    }
}

/// The compiled rules of a schema, or None when it has none.
pub fn compile(schema: &Value) -> Option<CompiledSchema> {
    has_rules(schema).then(|| kube_cel::compile_schema(schema))
}

/// Run the compiled rules on `object` (the whole object, `apiVersion`,
/// `kind` and `metadata` included; `old` on update for transition rules).
///
/// On update, a top-level field (`spec`, `status`) equal to the old one is
/// not evaluated again: kube-apiserver ratchets validation the same way (an
/// unchanged value's failures are dropped, and a transition rule's
/// `self == oldSelf` holds), and a status write, most of a controller's
/// writes, then costs no walk of the spec's rules. Rules on the root itself
/// see the whole object, so with any of them everything is evaluated.
pub fn check(rules: &CompiledSchema, schema: &Value, object: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let errors: Vec<ValidationError> = match old {
        Some(old) if rules.validations.is_empty() => {
            let mut errors = Vec::new();
            for (field, sub) in &rules.properties {
                let Some(now) = object.get(field) else { continue };
                let before = old.get(field);
                if before == Some(now) {
                    continue;
                }
                if let Err(e) = kube_cel::validate_compiled(sub, now, before) {
                    errors.extend(e.into_vec().into_iter().map(|mut e| {
                        // Paths below `field` are relative to it: put it in front.
                        e.field_path = match e.field_path.chars().next() {
                            None => field.clone(),
                            Some('.' | '[') => format!("{field}{}", e.field_path),
                            Some(_) => format!("{field}.{}", e.field_path),
                        };
                        e
                    }));
                }
            }
            errors
        }
        _ => kube_cel::validate_compiled(rules, object, old).err().map(|e| e.into_vec()).unwrap_or_default(),
    };
    if !errors.is_empty() {
        let mut found: Vec<Cause> = errors.iter().map(|e| cause(e, schema, object)).collect();
        // kube-cel walks properties in hash order: sort by field so that the
        // same object always gets the same message (rules of one field keep
        // their declared order).
        found.sort_by(|a, b| a.field.cmp(&b.field));
        causes.extend(found);
    }
}

/// A field path as kube-cel prints it (`spec.workers[0].image`) as steps.
enum Step<'a> {
    Field(&'a str),
    Index(usize),
}

fn steps(path: &str) -> Vec<Step<'_>> {
    let mut out = vec![];
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (name, rest) = part.split_once('[').map(|(n, r)| (n, Some(r))).unwrap_or((part, None));
        if !name.is_empty() {
            out.push(Step::Field(name));
        }
        for idx in rest.into_iter().flat_map(|r| r.split('[')) {
            if let Ok(i) = idx.trim_end_matches(']').parse() {
                out.push(Step::Index(i));
            }
        }
    }
    out
}

/// The value of the schema node whose rule failed: the longest prefix of the
/// error's path whose schema declares that rule (a `fieldPath` points below it).
fn rule_value<'a>(e: &ValidationError, schema: &Value, object: &'a Value) -> Option<&'a Value> {
    let path = steps(&e.field_path);
    let mut nodes = vec![(schema, Some(object))];
    for step in &path {
        let Some(&(s, v)) = nodes.last() else { break };
        let (sub, value) = match step {
            Step::Field(f) => {
                let sub = s["properties"].get(*f).or_else(|| s.get("additionalProperties").filter(|a| a.is_object()));
                (sub, v.and_then(|v| v.get(*f)))
            }
            Step::Index(i) => (s.get("items"), v.and_then(|v| v.get(*i))),
        };
        let Some(sub) = sub else { break };
        nodes.push((sub, value));
    }
    let declares = |s: &Value| {
        s["x-kubernetes-validations"].as_array().is_some_and(|rules| rules.iter().any(|r| r["rule"] == e.rule.as_str()))
    };
    nodes.into_iter().rev().find(|(s, _)| declares(s)).and_then(|(_, v)| v)
}

fn cause(e: &ValidationError, schema: &Value, object: &Value) -> Cause {
    let field = e.field_path.trim_start_matches('.').to_string();
    let value = shown(rule_value(e, schema, object).unwrap_or(&Value::Null));
    let invalid = |message: String| Cause { reason: "FieldValueInvalid", field: field.clone(), message };
    match e.kind {
        ErrorKind::ValidationFailure => {
            let reason = match e.reason.as_deref() {
                Some("FieldValueForbidden") => "FieldValueForbidden",
                Some("FieldValueRequired") => "FieldValueRequired",
                Some("FieldValueDuplicate") => "FieldValueDuplicate",
                _ => "FieldValueInvalid",
            };
            let message = match reason {
                "FieldValueForbidden" => format!("Forbidden: {}", e.message),
                "FieldValueRequired" => format!("Required value: {}", e.message),
                _ => format!("Invalid value: {value}: {}", e.message),
            };
            Cause { reason, field, message }
        }
        ErrorKind::EvaluationError => {
            let detail = e.message.strip_prefix("rule evaluation error: ").unwrap_or(&e.message);
            invalid(format!("Invalid value: {value}: rule {:?} evaluation error: {detail}", e.rule))
        }
        _ => invalid(format!("Invalid value: {value}: {}", e.message)),
    }
}

/// Rules in a CRD's schema that do not compile, as causes naming where they
/// are (`spec.versions[0].schema.openAPIV3Schema.properties[spec]...`).
pub fn compile_errors(schema: &Value, path: &str) -> Vec<Cause> {
    let mut out = vec![];
    if let Some(rules) = compile(schema) {
        collect(&rules, path, &mut out);
    }
    out
}

fn collect(node: &CompiledSchema, path: &str, out: &mut Vec<Cause>) {
    for (i, r) in node.validations.iter().enumerate() {
        let at = format!("{path}.x-kubernetes-validations[{i}]");
        let (field, message) = match r {
            Ok(_) => continue,
            Err(CompilationError::Parse { rule, source }) => {
                (format!("{at}.rule"), format!("Invalid value: {rule:?}: compilation failed: {source}"))
            }
            Err(CompilationError::MessageExpressionParse { message_expression, source, .. }) => (
                format!("{at}.messageExpression"),
                format!("Invalid value: {message_expression:?}: compilation failed: {source}"),
            ),
            Err(other) => (at, format!("Invalid value: {other}")),
        };
        out.push(Cause { reason: "FieldValueInvalid", field, message });
    }
    let mut props: Vec<_> = node.properties.iter().collect();
    props.sort_by(|a, b| a.0.cmp(b.0));
    for (k, sub) in props {
        collect(sub, &format!("{path}.properties[{k}]"), out);
    }
    if let Some(items) = &node.items {
        collect(items, &format!("{path}.items"), out);
    }
    if let Some(ap) = &node.additional_properties {
        collect(ap, &format!("{path}.additionalProperties"), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(schema: &Value, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = vec![];
        if let Some(rules) = compile(schema) {
            check(&rules, schema, object, old, &mut causes);
        }
        causes
    }

    fn spec_schema(rules: Value) -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-validations": rules,
            "properties": {"workers": {"type": "integer"}, "minWorkers": {"type": "integer"}}}}})
    }

    #[test]
    fn a_failed_rule_reports_its_message_at_its_field_path() {
        let schema = spec_schema(json!([
            {"rule": "self.workers >= self.minWorkers", "message": "workers must be at least minWorkers", "fieldPath": ".workers"},
            {"rule": "self.workers == oldSelf.workers", "message": "workers is immutable"}
        ]));
        let causes = run(&schema, &json!({"spec": {"workers": 1, "minWorkers": 2}}), None);
        assert_eq!(causes.len(), 1, "the transition rule must be skipped on create: {causes:?}");
        assert_eq!(causes[0].field, "spec.workers");
        assert_eq!(causes[0].message, "Invalid value: \"object\": workers must be at least minWorkers");

        let causes = run(
            &schema,
            &json!({"spec": {"workers": 3, "minWorkers": 2}}),
            Some(&json!({"spec": {"workers": 2, "minWorkers": 2}})),
        );
        assert_eq!(causes.len(), 1);
        assert_eq!(
            (causes[0].field.as_str(), causes[0].message.as_str()),
            ("spec", "Invalid value: \"object\": workers is immutable")
        );
    }

    #[test]
    fn an_update_evaluates_the_fields_that_changed_and_ratchets_the_rest() {
        let mut schema = spec_schema(json!([{"rule": "self.workers >= self.minWorkers", "message": "too few"}]));
        schema["properties"]["status"] = json!({"type": "object", "properties": {"phase": {"type": "string",
            "x-kubernetes-validations": [{"rule": "self != 'Bad'", "message": "no Bad phase"}]}}});
        let spec = json!({"workers": 1, "minWorkers": 2});
        let old = json!({"spec": spec, "status": {"phase": "Pending"}});
        // The spec breaks its rule, but it did not change: a status write passes.
        let causes = run(&schema, &json!({"spec": spec, "status": {"phase": "Running"}}), Some(&old));
        assert!(causes.is_empty(), "{causes:?}");
        // What changed is still checked, named from the root.
        let causes = run(&schema, &json!({"spec": spec, "status": {"phase": "Bad"}}), Some(&old));
        let got: Vec<_> = causes.iter().map(|c| (c.field.as_str(), c.message.as_str())).collect();
        assert_eq!(got, [("status.phase", "Invalid value: \"Bad\": no Bad phase")]);
        // A create checks everything.
        assert_eq!(run(&schema, &old, None).len(), 1);
    }

    #[test]
    fn reasons_and_scalar_values_are_worded_like_kube_apiserver() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "cpus": {"type": "number", "x-kubernetes-validations": [{"rule": "self > 0.0", "message": "cpus must be greater than 0"}]},
            "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self != 'x'", "message": "not x", "reason": "FieldValueForbidden"}]}
        }}}});
        assert!(run(&schema, &json!({"spec": {"cpus": 1, "name": "y"}}), None).is_empty(), "an integer is a number");
        let causes = run(&schema, &json!({"spec": {"cpus": 0.0, "name": "x"}}), None);
        let got: Vec<_> = causes.iter().map(|c| (c.field.as_str(), c.reason, c.message.as_str())).collect();
        assert!(
            got.contains(&("spec.cpus", "FieldValueInvalid", "Invalid value: 0.0: cpus must be greater than 0")),
            "{got:?}"
        );
        assert!(got.contains(&("spec.name", "FieldValueForbidden", "Forbidden: not x")), "{got:?}");
    }

    #[test]
    fn rules_use_the_kubernetes_cel_libraries() {
        let schema = json!({"type": "object", "properties": {"memory": {"type": "string", "x-kubernetes-validations": [
            {"rule": "quantity(self).isGreaterThan(quantity('32Mi'))", "message": "memory must exceed 32Mi"}
        ]}}});
        assert!(run(&schema, &json!({"memory": "64Mi"}), None).is_empty());
        let causes = run(&schema, &json!({"memory": "1Mi"}), None);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].message, "Invalid value: \"1Mi\": memory must exceed 32Mi");
    }

    #[test]
    fn rules_that_do_not_compile_are_named_by_where_they_are() {
        let schema = spec_schema(json!([{"rule": "self.workers >"}, {"rule": "true", "messageExpression": "'a' +"}]));
        let causes = compile_errors(&schema, "s");
        let fields: Vec<_> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "s.properties[spec].x-kubernetes-validations[0].rule",
                "s.properties[spec].x-kubernetes-validations[1].messageExpression"
            ]
        );
        assert!(
            causes[0].message.starts_with("Invalid value: \"self.workers >\": compilation failed:"),
            "{}",
            causes[0].message
        );
        assert!(compile(&json!({"type": "object"})).is_none(), "no rules, nothing compiled");
    }
}
