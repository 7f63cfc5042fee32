//! Which Docker volume on the nodes an MpiJob's `dockerVolume.name` is.
//! Named volumes live on each node, in one flat namespace of names, so a
//! job in namespace `team-a` naming `results` must not reach the `results`
//! of `team-b`: the volume is namespaced, `team-a.results`. The operator
//! may share a name across every namespace (`--shared-volume NAME`, for a
//! read-only dataset, or a volume made before namespacing): then the
//! volume is `NAME` itself. Tenants can change neither the namespace of
//! their jobs nor the controller's flags.
//!
//! Two (namespace, name) pairs never map to one volume: a namespace is a
//! DNS label (no `.`), so `NS.NAME` splits back at its first `.`; a shared
//! name holds no `.`, so it is never a namespaced one. Pure.

use std::collections::BTreeSet;

/// Between the namespace and the name of a namespaced volume.
pub const SEPARATOR: char = '.';

/// The names the operator shares across namespaces (`--shared-volume`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SharedVolumes(BTreeSet<String>);

/// Why a `--shared-volume` cannot be shared.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SharedVolumeError {
    #[error(
        "--shared-volume '{0}' is not a Docker volume name without '.' (letters, digits, '_' and '-', starting with a letter or digit): namespaced volumes are NAMESPACE.NAME, so a shared name with a '.' could be one of them"
    )]
    Name(String),
}

/// A name the operator shares, checked: a Docker volume name without `.`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SharedVolume(String);

impl std::str::FromStr for SharedVolume {
    type Err = SharedVolumeError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        let mut chars = name.chars();
        let valid = chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if valid { Ok(Self(name.to_owned())) } else { Err(SharedVolumeError::Name(name.to_owned())) }
    }
}

impl SharedVolumes {
    /// Shares each of `names`.
    pub fn new(names: impl IntoIterator<Item = SharedVolume>) -> Self {
        Self(names.into_iter().map(|SharedVolume(name)| name).collect())
    }

    /// The Docker volume a job of `namespace` mounts for `dockerVolume.name = name`.
    pub fn docker_name(&self, namespace: &str, name: &str) -> String {
        if self.0.contains(name) { name.to_owned() } else { format!("{namespace}{SEPARATOR}{name}") }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(names: &[&str]) -> SharedVolumes {
        SharedVolumes::new(names.iter().map(|n| n.parse::<SharedVolume>().unwrap()))
    }

    #[test]
    fn a_volume_is_its_namespaces_own_unless_the_operator_shares_its_name() {
        let s = shared(&["datasets", "pi-results"]);
        assert_eq!(s.docker_name("team-a", "results"), "team-a.results");
        assert_eq!(s.docker_name("team-b", "results"), "team-b.results");
        assert_eq!(s.docker_name("default", "results"), "default.results");
        assert_eq!(s.docker_name("team-a", "datasets"), "datasets");
        assert_eq!(s.docker_name("team-b", "datasets"), "datasets");
        assert_eq!(s.docker_name("default", "pi-results"), "pi-results");
        assert_eq!(SharedVolumes::default().docker_name("default", "pi-results"), "default.pi-results");
    }

    #[test]
    fn no_two_namespace_and_name_pairs_map_to_one_volume() {
        let s = shared(&["data", "team"]);
        // Names with dots, namespaces that look like other pairs' prefixes.
        let namespaces = ["a", "a-b", "team", "data", "default"];
        let names = ["b", "b.c", "a.b", "c", "data", "team", "x.y.z", "b-c"];
        let mut seen = std::collections::BTreeMap::new();
        for ns in namespaces {
            for name in names {
                let volume = s.docker_name(ns, name);
                // A shared name is one volume for every namespace, by design.
                let owner = if s.0.contains(name) { ("*", name) } else { (ns, name) };
                if let Some(other) = seen.insert(volume.clone(), owner) {
                    assert_eq!(other, owner, "{volume} is reached from two pairs");
                }
            }
        }
    }

    #[test]
    fn a_shared_name_that_could_be_a_namespaced_one_is_refused() {
        for bad in ["team-a.results", "", "-x", "a/b", "with space"] {
            assert_eq!(bad.parse::<SharedVolume>(), Err(SharedVolumeError::Name(bad.to_owned())));
        }
        let err = "a.b".parse::<SharedVolume>().unwrap_err().to_string();
        assert!(err.contains("NAMESPACE.NAME"), "the refusal says why: {err}");
        assert!("pi_results-2".parse::<SharedVolume>().is_ok());
    }

    #[test]
    fn the_operator_shares_names_with_a_repeatable_flag_that_refuses_a_dotted_name() {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: crate::ControllerArgs,
        }
        let cli = Cli::try_parse_from(["c", "--shared-volume", "datasets", "--shared-volume", "pi-results"]).unwrap();
        let shared = cli.args.options().unwrap().settings.shared_volumes;
        assert_eq!(shared, self::shared(&["datasets", "pi-results"]));
        let err = Cli::try_parse_from(["c", "--shared-volume", "team-a.results"]).err().unwrap().to_string();
        assert!(err.contains("--shared-volume 'team-a.results' is not a Docker volume name without '.'"), "{err}");
    }
}
