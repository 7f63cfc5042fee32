//! `x-kubernetes-validations` CEL rules, evaluated with the `cel` crate (the
//! cel-rust interpreter) plus the Kubernetes CEL libraries from `kube-cel`
//! (strings, lists, sets, regex, url, ip, semver, quantity, format, math).
//! Each rule sees `self` (and `oldSelf` on update; rules that mention
//! `oldSelf` are transition rules and are skipped on create, as in
//! Kubernetes). Compiled programs are cached by rule text.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use kube_cel::KubeCelExt;
use kube_cel::cel::{Context, Program, Value as CelValue};
use serde_json::Value;

use crate::error::Cause;
use crate::schema::shown;

/// Compiled rules (or their parse errors) by rule text.
type Cache = Mutex<HashMap<String, Result<Arc<Program>, String>>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Compile (or fetch) a rule; the error is the parser's message.
pub fn compile(rule: &str) -> Result<Arc<Program>, String> {
    let mut c = cache().lock().unwrap_or_else(|p| p.into_inner());
    c.entry(rule.to_string()).or_insert_with(|| Program::compile(rule).map(Arc::new).map_err(|e| e.to_string())).clone()
}

/// JSON to CEL with Kubernetes' typing, guided by the schema: integers are
/// CEL `int`, except where the schema says `number`, which is always `double`
/// (so `self > 0.0` holds for a user who wrote `cpus: 1`).
pub fn to_cel(v: &Value, schema: &Value) -> CelValue {
    match v {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => match (schema["type"].as_str(), n.as_i64()) {
            (Some("number"), _) | (_, None) => CelValue::Float(n.as_f64().unwrap_or(0.0)),
            (_, Some(i)) => CelValue::Int(i),
        },
        Value::String(s) => CelValue::String(Arc::new(s.clone())),
        Value::Array(a) => {
            let items = &schema["items"];
            CelValue::List(Arc::new(a.iter().map(|v| to_cel(v, items)).collect()))
        }
        Value::Object(m) => {
            let map: HashMap<String, CelValue> = m
                .iter()
                .map(|(k, v)| {
                    let sub = schema["properties"].get(k).unwrap_or(&schema["additionalProperties"]);
                    (k.clone(), to_cel(v, sub))
                })
                .collect();
            map.into()
        }
    }
}

thread_local! {
    /// The standard library plus the Kubernetes libraries, registered once
    /// per thread; each evaluation adds its variables in an inner scope.
    static BASE: Context<'static> = Context::default().with_all();
}

fn eval(program: &Program, schema: &Value, this: &Value, old: Option<&Value>) -> Result<CelValue, String> {
    BASE.with(|base| {
        let mut ctx = base.new_inner_scope();
        ctx.add_variable_from_value("self", to_cel(this, schema));
        if let Some(old) = old {
            ctx.add_variable_from_value("oldSelf", to_cel(old, schema));
        }
        program.execute(&ctx).map_err(|e| e.to_string())
    })
}

fn join(path: &str, field_path: &str) -> String {
    let fp = field_path.trim_start_matches('.');
    match (path.is_empty(), fp.is_empty()) {
        (_, true) => path.to_string(),
        (true, false) => fp.to_string(),
        (false, false) => format!("{path}.{fp}"),
    }
}

/// Run the rules declared on `schema` against `value` (at `path`).
pub fn check(schema: &Value, value: &Value, old: Option<&Value>, path: &str, causes: &mut Vec<Cause>) {
    let Some(rules) = schema["x-kubernetes-validations"].as_array() else { return };
    for rule in rules {
        let Some(text) = rule["rule"].as_str() else { continue };
        let transition = text.contains("oldSelf");
        if transition && old.is_none() {
            continue;
        }
        let field = join(path, rule["fieldPath"].as_str().unwrap_or(""));
        let reason = match rule["reason"].as_str() {
            Some("FieldValueForbidden") => "FieldValueForbidden",
            Some("FieldValueRequired") => "FieldValueRequired",
            Some("FieldValueDuplicate") => "FieldValueDuplicate",
            _ => "FieldValueInvalid",
        };
        let program = match compile(text) {
            Ok(p) => p,
            Err(e) => {
                causes.push(Cause {
                    reason: "FieldValueInvalid",
                    field,
                    message: format!("Invalid value: {}: compilation failed: {e}", shown(value)),
                });
                continue;
            }
        };
        match eval(&program, schema, value, if transition { old } else { None }) {
            Ok(CelValue::Bool(true)) => {}
            Ok(CelValue::Bool(false)) => {
                let mut message =
                    rule["message"].as_str().map(String::from).unwrap_or_else(|| format!("failed rule: {text}"));
                if let Some(expr) = rule["messageExpression"].as_str()
                    && let Ok(p) = compile(expr)
                    && let Ok(CelValue::String(s)) = eval(&p, schema, value, old)
                {
                    message = s.to_string();
                }
                let message = match reason {
                    "FieldValueForbidden" => format!("Forbidden: {message}"),
                    "FieldValueRequired" => format!("Required value: {message}"),
                    _ => format!("Invalid value: {}: {message}", shown(value)),
                };
                causes.push(Cause { reason, field, message });
            }
            Ok(other) => causes.push(Cause {
                reason: "FieldValueInvalid",
                field,
                message: format!("Invalid value: {}: rule {text:?} evaluated to {other:?}, not a bool", shown(value)),
            }),
            Err(e) => causes.push(Cause {
                reason: "FieldValueInvalid",
                field,
                message: format!("Invalid value: {}: rule {text:?} evaluation error: {e}", shown(value)),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_failed_rule_reports_its_message_at_its_field_path() {
        let schema = json!({"x-kubernetes-validations": [
            {"rule": "self.workers >= self.minWorkers", "message": "workers must be at least minWorkers", "fieldPath": ".workers"},
            {"rule": "self.workers == oldSelf.workers", "message": "workers is immutable"}
        ]});
        let mut causes = vec![];
        check(&schema, &json!({"workers": 1, "minWorkers": 2}), None, "spec", &mut causes);
        assert_eq!(causes.len(), 1, "the transition rule must be skipped on create");
        assert_eq!(causes[0].field, "spec.workers");
        assert!(causes[0].message.ends_with("workers must be at least minWorkers"), "{}", causes[0].message);

        let mut causes = vec![];
        check(
            &schema,
            &json!({"workers": 3, "minWorkers": 2}),
            Some(&json!({"workers": 2, "minWorkers": 2})),
            "spec",
            &mut causes,
        );
        assert_eq!(causes.len(), 1);
        assert!(causes[0].message.ends_with("workers is immutable"));
    }

    #[test]
    fn numbers_are_doubles_where_the_schema_says_number() {
        let schema = json!({"type": "number", "x-kubernetes-validations": [{"rule": "self > 0.0"}]});
        let mut causes = vec![];
        check(&schema, &json!(1), None, "spec.cpus", &mut causes);
        assert!(causes.is_empty(), "{causes:?}");
        check(&schema, &json!(0), None, "spec.cpus", &mut causes);
        assert_eq!(causes.len(), 1);
    }

    #[test]
    fn rules_use_the_kubernetes_cel_libraries() {
        let schema = json!({"type": "string", "x-kubernetes-validations": [
            {"rule": "quantity(self).isGreaterThan(quantity('32Mi'))", "message": "memory must exceed 32Mi"}
        ]});
        let mut causes = vec![];
        check(&schema, &json!("64Mi"), None, "spec.resources.memory", &mut causes);
        assert!(causes.is_empty(), "{causes:?}");
        check(&schema, &json!("1Mi"), None, "spec.resources.memory", &mut causes);
        assert_eq!(causes.len(), 1);
        assert!(causes[0].message.ends_with("memory must exceed 32Mi"));
    }

    #[test]
    fn rules_use_the_cel_standard_library() {
        let schema = json!({"x-kubernetes-validations": [
            {"rule": "self.image.startsWith('mpi') && size(self.args) <= 2 && self.args.all(a, a != '')"}
        ]});
        let mut causes = vec![];
        check(&schema, &json!({"image": "mpi:1", "args": ["a", "b"]}), None, "spec", &mut causes);
        assert!(causes.is_empty(), "{causes:?}");
        check(&schema, &json!({"image": "x", "args": []}), None, "spec", &mut causes);
        assert_eq!(causes.len(), 1);
        assert!(causes[0].message.contains("failed rule"));
    }
}
