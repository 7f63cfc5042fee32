//! Label and field selectors (`labelSelector=`, `fieldSelector=`) with the
//! grammar of k8s.io/apimachinery: `=`, `==`, `!=`, `in`, `notin`, `exists`
//! and `!exists` for labels; `=`, `==`, `!=` for fields. Parsing errors are
//! 400 BadRequest naming the offending text.

use serde_json::Value;

use crate::error::{ApiError, ApiResult};

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    NotExists,
}

#[derive(Debug, Clone, PartialEq)]
struct Requirement {
    key: String,
    op: Op,
}

/// A parsed label selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    /// Whether it selects every object (no requirement).
    pub fn is_everything(&self) -> bool {
        self.0.is_empty()
    }
}

/// Split on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = vec![];
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, ch) in s.char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn valid_key(k: &str) -> bool {
    let re_ok = |p: &str| {
        !p.is_empty()
            && p.len() <= 253
            && p.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && p.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && p.chars().last().is_some_and(|c| c.is_ascii_alphanumeric())
    };
    match k.split_once('/') {
        Some((prefix, name)) => re_ok(prefix) && re_ok(name) && name.len() <= 63,
        None => re_ok(k) && k.len() <= 63,
    }
}

fn valid_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && v.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && v.chars().last().is_some_and(|c| c.is_ascii_alphanumeric()))
}

fn bad(selector: &str, why: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("unable to parse requirement: {why} (in labelSelector {selector:?})"))
}

impl LabelSelector {
    pub fn parse(selector: &str) -> ApiResult<Self> {
        let mut reqs = vec![];
        if selector.trim().is_empty() {
            return Ok(Self(reqs));
        }
        for part in split_top(selector) {
            let part = part.trim();
            if part.is_empty() {
                return Err(bad(selector, "found '', expected: identifier"));
            }
            let req = if let Some(key) = part.strip_prefix('!') {
                Requirement { key: key.trim().to_string(), op: Op::NotExists }
            } else if let Some((k, v)) = part.split_once("!=") {
                Requirement { key: k.trim().into(), op: Op::NotEq(v.trim().into()) }
            } else if let Some((k, v)) = part.split_once("==") {
                Requirement { key: k.trim().into(), op: Op::Eq(v.trim().into()) }
            } else if let Some((k, v)) = part.split_once('=') {
                Requirement { key: k.trim().into(), op: Op::Eq(v.trim().into()) }
            } else if let Some((k, rest)) = part.split_once(char::is_whitespace) {
                let rest = rest.trim();
                let (negate, set) = if let Some(s) = rest.strip_prefix("notin") {
                    (true, s)
                } else if let Some(s) = rest.strip_prefix("in") {
                    (false, s)
                } else {
                    return Err(bad(selector, format!("found '{rest}', expected: in, notin, =, ==, !=")));
                };
                let set = set.trim();
                let inner = set
                    .strip_prefix('(')
                    .and_then(|s| s.strip_suffix(')'))
                    .ok_or_else(|| bad(selector, format!("found '{set}', expected: '(' values ')'")))?;
                let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
                Requirement { key: k.trim().into(), op: if negate { Op::NotIn(values) } else { Op::In(values) } }
            } else {
                Requirement { key: part.into(), op: Op::Exists }
            };
            if !valid_key(&req.key) {
                return Err(bad(selector, format!("invalid label key {:?}", req.key)));
            }
            let values: Vec<&String> = match &req.op {
                Op::Eq(v) | Op::NotEq(v) => vec![v],
                Op::In(vs) | Op::NotIn(vs) => vs.iter().collect(),
                _ => vec![],
            };
            if let Some(v) = values.into_iter().find(|v| !valid_value(v)) {
                return Err(bad(selector, format!("invalid label value {v:?}")));
            }
            reqs.push(req);
        }
        Ok(Self(reqs))
    }

    pub fn matches(&self, object: &Value) -> bool {
        let labels = &object["metadata"]["labels"];
        self.0.iter().all(|r| {
            let v = labels.get(&r.key).and_then(Value::as_str);
            match &r.op {
                Op::Eq(x) => v == Some(x.as_str()),
                Op::NotEq(x) => v != Some(x.as_str()),
                Op::In(xs) => v.is_some_and(|v| xs.iter().any(|x| x == v)),
                Op::NotIn(xs) => v.is_none_or(|v| !xs.iter().any(|x| x == v)),
                Op::Exists => v.is_some(),
                Op::NotExists => v.is_none(),
            }
        })
    }
}

/// A parsed field selector over dotted paths of the served view of an object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Whether it selects every object (no requirement).
    pub fn is_everything(&self) -> bool {
        self.0.is_empty()
    }

    /// `allowed` lists the fields this resource supports besides
    /// `metadata.name` and `metadata.namespace`.
    pub fn parse(selector: &str, allowed: &[&str]) -> ApiResult<Self> {
        let mut out = vec![];
        if selector.trim().is_empty() {
            return Ok(Self(out));
        }
        for part in selector.split(',') {
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{selector}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            if field != "metadata.name" && field != "metadata.namespace" && !allowed.contains(&field) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field} (in fieldSelector {selector:?})"
                )));
            }
            out.push((field.to_string(), equal, value.trim().to_string()));
        }
        Ok(Self(out))
    }

    /// The value of `metadata.name=X` if the selector pins one name.
    pub fn name(&self) -> Option<&str> {
        self.0.iter().find(|(f, eq, _)| f == "metadata.name" && *eq).map(|(_, _, v)| v.as_str())
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let mut cur = object;
            for seg in field.split('.') {
                cur = &cur[seg];
            }
            let actual = match cur {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (actual == *value) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selectors_follow_the_kubernetes_grammar() {
        let o = json!({"metadata": {"labels": {"app": "mpi", "tier": "hpc"}}});
        for (sel, want) in [
            ("app=mpi", true),
            ("app==mpi,tier!=web", true),
            ("app in (mpi, web)", true),
            ("app notin (mpi)", false),
            ("tier", true),
            ("!tier", false),
            ("missing!=x", true),
            ("app in (web),tier", false),
        ] {
            assert_eq!(LabelSelector::parse(sel).unwrap().matches(&o), want, "{sel}");
        }
    }

    #[test]
    fn a_malformed_label_selector_names_the_offending_text() {
        for sel in ["app in (mpi", "a b c", "=x", "app=bad value!"] {
            let e = LabelSelector::parse(sel).unwrap_err();
            assert_eq!((e.code, e.reason), (400, "BadRequest"), "{sel}");
        }
    }

    #[test]
    fn field_selectors_match_dotted_paths_and_reject_unknown_fields() {
        let o = json!({"metadata": {"name": "j"}, "involvedObject": {"kind": "MpiJob"}});
        let s = FieldSelector::parse("metadata.name=j,involvedObject.kind=MpiJob", &["involvedObject.kind"]).unwrap();
        assert!(s.matches(&o));
        assert_eq!(s.name(), Some("j"));
        assert!(!FieldSelector::parse("metadata.name!=j", &[]).unwrap().matches(&o));
        assert_eq!(FieldSelector::parse("spec.x=1", &[]).unwrap_err().code, 400);
    }
}
