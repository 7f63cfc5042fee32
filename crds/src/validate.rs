//! Rules the CRD schema cannot express, checked in Rust, plus the schema's
//! own ranges and enums again, so that a job parsed straight from a file or
//! stored under an older CRD gets the same precise message. The controller
//! calls `validate()` on every reconcile and reports a failure as the
//! `Invalid` condition. Never does I/O and never changes the spec.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::LazyLock;

use regex_lite::Regex;

use crate::quantity;
use crate::spec::{MpiJobSpec, ROLE_PATTERN};

/// One problem with one field, worded like a Kubernetes `Invalid` cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Path of the field, e.g. `spec.resources.memory`.
    pub field: String,
    /// The offending value as the user wrote it.
    pub value: String,
    /// What is wrong and what to do.
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: Invalid value: {}: {}", self.field, self.value, self.message)
    }
}

/// Every problem found in a spec, in field order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ValidationErrors(pub Vec<FieldError>);

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&parts.join("; "))
    }
}

impl ValidationErrors {
    /// Whether any error concerns `field`.
    pub fn names(&self, field: &str) -> bool {
        self.0.iter().any(|e| e.field == field)
    }
}

/// Paths where mpiswarm puts the SSH key, the hostfile and the rank bootstrap.
const RESERVED_MOUNTS: [&str; 3] = ["/run/secrets", "/etc/mpi", "/etc/mpiswarm"];

/// `mpirun` flags mpiswarm sets itself from the placement.
const RESERVED_MPIRUN_FLAGS: [&str; 10] =
    ["-np", "-n", "--np", "-c", "--hostfile", "-hostfile", "--machinefile", "-machinefile", "-H", "--host"];

struct Collector(Vec<FieldError>);

impl Collector {
    fn check(&mut self, ok: bool, field: &str, value: impl fmt::Display, message: impl Into<String>) {
        if !ok {
            self.0.push(FieldError { field: field.to_string(), value: value.to_string(), message: message.into() });
        }
    }
}

impl MpiJobSpec {
    /// Checks the whole spec and returns every problem at once.
    pub fn validate(&self) -> Result<(), ValidationErrors> {
        let mut c = Collector(Vec::new());
        c.check(
            is_image_reference(&self.image),
            "spec.image",
            format!("{:?}", self.image),
            "must be an image reference such as mpiswarm/openmpi:0.1.0 (lower-case repository, optional :tag or @sha256:digest)",
        );
        c.check(!self.command.is_empty(), "spec.command", "[]", "must name the program each rank runs");
        if let Some(first) = self.command.first() {
            c.check(
                !first.trim().is_empty(),
                "spec.command[0]",
                format!("{first:?}"),
                "the program name must not be empty",
            );
        }
        c.check((1..=65536).contains(&self.ranks), "spec.ranks", self.ranks, "must be between 1 and 65536");
        self.validate_resources(&mut c);
        self.validate_placement(&mut c);
        self.validate_mpi(&mut c);
        self.validate_volumes(&mut c);
        c.check(
            matches(&ROLE, &self.role),
            "spec.role",
            format!("{:?}", self.role),
            "must be * or a Mesos role name: parts separated by single slashes, none empty, \".\", \"..\" or \"*\", none starting with -, no whitespace",
        );
        let rp = &self.run_policy;
        c.check(rp.backoff_limit >= 0, "spec.runPolicy.backoffLimit", rp.backoff_limit, "must be 0 or more");
        if let Some(d) = rp.active_deadline_seconds {
            c.check(d >= 1, "spec.runPolicy.activeDeadlineSeconds", d, "must be at least 1 second");
        }
        if let Some(t) = rp.ttl_seconds_after_finished {
            c.check(t >= 0, "spec.runPolicy.ttlSecondsAfterFinished", t, "must be 0 or more");
        }
        c.check(
            rp.scheduling_timeout_seconds >= 1,
            "spec.runPolicy.schedulingTimeoutSeconds",
            rp.scheduling_timeout_seconds,
            "must be at least 1 second",
        );
        if c.0.is_empty() { Ok(()) } else { Err(ValidationErrors(c.0)) }
    }

    fn validate_volumes(&self, c: &mut Collector) {
        let mut names = BTreeSet::new();
        let mut paths = BTreeSet::new();
        for (i, v) in self.volumes.iter().enumerate() {
            let at = |f: &str| format!("spec.volumes[{i}].{f}");
            c.check(names.insert(v.name.as_str()), &at("name"), format!("{:?}", v.name), "must be unique in the job");
            c.check(
                v.mount_path.starts_with('/') && !v.mount_path.split('/').any(|p| p == ".."),
                &at("mountPath"),
                format!("{:?}", v.mount_path),
                "must be an absolute path without ..",
            );
            c.check(
                paths.insert(v.mount_path.trim_end_matches('/')),
                &at("mountPath"),
                format!("{:?}", v.mount_path),
                "two volumes cannot mount at the same path",
            );
            c.check(
                !RESERVED_MOUNTS.iter().any(|r| v.mount_path == *r || v.mount_path.starts_with(&format!("{r}/"))),
                &at("mountPath"),
                format!("{:?}", v.mount_path),
                format!("mpiswarm mounts its own files there ({}); choose another path", RESERVED_MOUNTS.join(", ")),
            );
            let sources = usize::from(v.docker_volume.is_some())
                + usize::from(v.host_path.is_some())
                + usize::from(v.tmpfs.is_some());
            c.check(
                sources == 1,
                &format!("spec.volumes[{i}]"),
                &v.name,
                "needs exactly one of dockerVolume, hostPath or tmpfs",
            );
            if let Some(h) = &v.host_path {
                c.check(
                    h.path.starts_with('/'),
                    &at("hostPath.path"),
                    format!("{:?}", h.path),
                    "must be an absolute path on the node",
                );
            }
            if let Some(t) = &v.tmpfs {
                c.check(!v.read_only, &at("readOnly"), "true", "a tmpfs starts empty; a read-only one is useless");
                if let Some(size) = &t.size {
                    c.check(
                        quantity::parse_bytes(size).is_ok_and(|b| b > 0),
                        &at("tmpfs.size"),
                        format!("{size:?}"),
                        "must be a quantity greater than 0, e.g. 64Mi",
                    );
                }
            }
        }
    }

    fn validate_resources(&self, c: &mut Collector) {
        let r = &self.resources;
        c.check(
            r.cpus.is_finite() && r.cpus > 0.0,
            "spec.resources.cpus",
            r.cpus,
            "must be greater than 0, e.g. 1 or 0.5",
        );
        match quantity::parse_bytes(&r.memory) {
            Ok(0) => c.check(false, "spec.resources.memory", format!("{:?}", r.memory), "must be greater than 0"),
            Ok(_) => {}
            Err(e) => c.check(false, "spec.resources.memory", format!("{:?}", r.memory), e.to_string()),
        }
        if let Some(n) = r.network_mbps {
            c.check(n >= 1, "spec.resources.networkMbps", n, "must be at least 1 Mbit/s when set");
        }
    }

    fn validate_placement(&self, c: &mut Collector) {
        let p = &self.placement;
        if let Some(m) = p.max_ranks_per_node {
            c.check(m >= 1, "spec.placement.maxRanksPerNode", m, "must be at least 1 when set");
        }
        for (k, v) in &p.node_selector {
            let field = format!("spec.placement.nodeSelector[{k:?}]");
            c.check(is_attribute_name(k), &field, format!("{k:?}"), "attribute names use letters, digits, _ . - and /");
            c.check(!v.is_empty(), &field, "\"\"", "an attribute value to match must not be empty");
        }
    }

    fn validate_mpi(&self, c: &mut Collector) {
        let mut seen = BTreeSet::new();
        for (i, e) in self.mpi.env.iter().enumerate() {
            let field = format!("spec.mpi.env[{i}].name");
            c.check(
                is_env_name(&e.name),
                &field,
                format!("{:?}", e.name),
                "must be a C identifier such as OMP_NUM_THREADS",
            );
            c.check(seen.insert(e.name.as_str()), &field, format!("{:?}", e.name), "is set twice");
        }
        for (i, arg) in self.mpi.mpirun_args.iter().enumerate() {
            let flag = arg.split('=').next().unwrap_or(arg);
            c.check(
                !RESERVED_MPIRUN_FLAGS.contains(&flag),
                &format!("spec.mpi.mpirunArgs[{i}]"),
                format!("{arg:?}"),
                "mpiswarm sets the process count and the hostfile from the placement; remove this flag and use spec.ranks",
            );
        }
    }
}

fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_attribute_name(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "_.-/".contains(c))
}

/// Docker's reference grammar, simplified: `[host[:port]/]path[:tag][@digest]`
/// with lower-case path components.
pub fn is_image_reference(s: &str) -> bool {
    const REFERENCE: &str = r"^(([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*(:[0-9]+)?|\[[0-9a-fA-F:]+\](:[0-9]+)?)/)?[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$";
    static RE: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(REFERENCE).ok());
    matches(&RE, s)
}

/// The role pattern, compiled once: the controller validates on every
/// reconcile, and compiling a pattern costs far more than matching it.
static ROLE: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(ROLE_PATTERN).ok());

/// Whether `s` matches a compiled constant pattern (one that failed to
/// compile matches nothing; the tests compile each).
fn matches(re: &LazyLock<Option<Regex>>, s: &str) -> bool {
    re.as_ref().is_some_and(|re| re.is_match(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_references() {
        let digest = format!("busybox@sha256:{}", "a".repeat(64));
        for ok in ["mpiswarm/openmpi:0.1.0", "busybox", "localhost:5000/a/b:v1", digest.as_str()] {
            assert!(is_image_reference(ok), "{ok} should be accepted");
        }
        for bad in ["", "Upper/Case", "a b", "img:", ":tag", "a//b"] {
            assert!(!is_image_reference(bad), "{bad:?} should be refused");
        }
    }

    #[test]
    fn env_names() {
        assert!(is_env_name("OMP_NUM_THREADS"));
        assert!(is_env_name("_x1"));
        assert!(!is_env_name("1X"));
        assert!(!is_env_name("A-B"));
        assert!(!is_env_name(""));
    }
}
