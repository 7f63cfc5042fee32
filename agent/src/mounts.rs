//! Data in and out: the Mesos `Volume`s of a TaskInfo (other than SECRET
//! files, which are [`crate::plan`]'s) as Swarm mounts, checked before
//! anything is created:
//!
//! - `source.type = DOCKER_VOLUME`, `docker_volume.name` (driver `local` or
//!   any plugin): a named Docker volume, created by Docker on first use and
//!   never removed by the agent (it is the job's data). Its `driver_options`
//!   are refused unless the agent allows that driver's option
//!   (`--allow-volume-option DRIVER:KEY`, [`VolumeOptions`]), a key given
//!   twice is refused, and the `local` driver mounts only network shares
//!   and tmpfs (`type` one of [`LOCAL_TYPES`], never `o=bind`/`rbind`),
//!   allowed or not: any other type mounts part of the node, a host path
//!   past `--allow-host-path-prefix`;
//! - `source.type = DOCKER_VOLUME` with `docker_volume.driver = "tmpfs"`: a
//!   fresh tmpfs for this task alone (Mesos has no tmpfs source; no Docker
//!   volume driver is called `tmpfs`, so the name cannot mean anything
//!   else); `driver_options` `size` (bytes, or with a `k`/`m`/`g` suffix)
//!   and `mode` (octal) are honoured, the name is ignored;
//! - `source.type = HOST_PATH`, `host_path.path` (or the deprecated
//!   `Volume.host_path`): a bind mount, refused unless the path, with every
//!   symlink and `..` resolved, lies under a prefix the agent allows
//!   (`--allow-host-path-prefix`);
//! - any other source (SANDBOX_PATH, CSI_VOLUME, UNKNOWN, none): refused.
//!
//! `mode: RO` mounts read-only. Resolving host paths reads the filesystem,
//! so planning runs off the async workers. Each refusal is a
//! [`MountError`] naming the volume, the offending value and what to give
//! instead; it reaches the framework in the TASK_ERROR's message.

use std::path::{Component, Path, PathBuf};

use mpiswarm_mesos::task::{Volume, VolumeMode};

/// One mount of a task's container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountPlan {
    /// A named Docker volume.
    Volume { name: String, driver: Option<String>, options: Vec<(String, String)>, target: String, read_only: bool },
    /// A host directory or file (already resolved and allowed).
    Bind { source: String, target: String, read_only: bool },
    /// A fresh tmpfs.
    Tmpfs { target: String, size_bytes: Option<i64>, mode: Option<i64> },
}

/// Why a flag `--allow-host-path-prefix` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PrefixError {
    #[error("--allow-host-path-prefix '{}' is not an absolute path: give the directory from /", .prefix.display())]
    NotAbsolute { prefix: PathBuf },
    #[error("--allow-volume-option '{given}' is not DRIVER:KEY (e.g. nfs:addr)")]
    VolumeOption { given: String },
    #[error("--allow-host-path-prefix '{}' cannot be resolved: {source}; give an existing directory", .prefix.display())]
    Unresolvable {
        prefix: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The prefixes host paths may lie under, as an error message shows them.
#[derive(Debug, Clone)]
pub struct Allowed(Vec<PathBuf>);

impl std::fmt::Display for Allowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none; start the agent with --allow-host-path-prefix");
        }
        let shown: Vec<String> = self.0.iter().map(|a| a.display().to_string()).collect();
        f.write_str(&shown.join(", "))
    }
}

/// Why a host path may not be bind-mounted.
#[derive(Debug, thiserror::Error)]
pub enum HostPathError {
    #[error("host path '{path}' is not absolute: give the path from /")]
    NotAbsolute { path: String },
    #[error("host path '{path}' is not allowed (allowed prefixes: {allowed})")]
    NoneAllowed { path: String, allowed: Allowed },
    #[error("host path '{path}' cannot be resolved on this node: {source}")]
    Unresolvable {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "host path '{path}' (resolved to '{}') is not under an allowed prefix (allowed: {allowed})",
        .resolved.display()
    )]
    Outside { path: String, resolved: PathBuf, allowed: Allowed },
}

/// Why a volume of a TaskInfo cannot be mounted.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("volume {target}: {source}")]
    HostPath {
        target: String,
        #[source]
        source: HostPathError,
    },
    #[error("volume {target}: source.host_path.path is missing; give the host path to bind")]
    HostPathMissing { target: String },
    #[error("volume {target}: it has no source (give source.type and its fields)")]
    NoSource { target: String },
    #[error(
        "volume {target}: source type '{kind}' is not supported (DOCKER_VOLUME, HOST_PATH, SECRET; a tmpfs is DOCKER_VOLUME with driver 'tmpfs')"
    )]
    SourceType { target: String, kind: String },
    #[error("volume {target}: source.docker_volume is missing; give its name (and driver)")]
    DockerVolumeMissing { target: String },
    #[error("volume {target}: tmpfs size '{value}' is not bytes (e.g. 67108864, 64m, 1g)")]
    TmpfsSize { target: String, value: String },
    #[error("volume {target}: tmpfs mode '{value}' is not octal (e.g. 1777)")]
    TmpfsMode { target: String, value: String },
    #[error("volume {target}: tmpfs option '{option}' is not supported (size, mode)")]
    TmpfsOption { target: String, option: String },
    #[error("volume {target}: a tmpfs cannot be read-only (mode RO); use RW")]
    TmpfsReadOnly { target: String },
    #[error(
        "volume {target}: docker_volume.name '{name}' is not a Docker volume name (letters, digits, '_', '.', '-'; starting with a letter or digit)"
    )]
    VolumeName { target: String, name: String },
    #[error("volume container_path '{target}' must be an absolute path other than / without '..'")]
    ContainerPath { target: String },
    #[error("volume {target}: {rule}")]
    VolumeOption { target: String, rule: String },
}

/// The pseudo volume driver that asks for a tmpfs.
pub const TMPFS_DRIVER: &str = "tmpfs";

/// The driver Docker uses when a volume names none.
pub(crate) const LOCAL_DRIVER: &str = "local";

/// Which volume driver options a task may pass (`--allow-volume-option
/// DRIVER:KEY`); none by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeOptions {
    allowed: std::collections::BTreeSet<(String, String)>,
}

impl VolumeOptions {
    /// No option is allowed.
    pub fn none() -> Self {
        Self::default()
    }

    /// Allows each `DRIVER:KEY`.
    pub fn allow(pairs: &[String]) -> Result<Self, PrefixError> {
        let mut allowed = std::collections::BTreeSet::new();
        for pair in pairs {
            match pair.split_once(':') {
                Some((driver, key)) if !driver.is_empty() && !key.is_empty() => {
                    allowed.insert((driver.to_owned(), key.to_owned()));
                }
                _ => return Err(PrefixError::VolumeOption { given: pair.clone() }),
            }
        }
        Ok(Self { allowed })
    }

    /// Whether a volume of `driver` may carry `options`, else why not.
    fn check(&self, target: &str, driver: &str, options: &[(String, String)]) -> Result<(), MountError> {
        self.rule(driver, options).map_err(|rule| MountError::VolumeOption { target: target.to_owned(), rule })
    }

    /// The rule a volume of `driver` with `options` breaks, if any: the one
    /// test of a volume a task asks to create and of one found on the node
    /// ([`crate::existing`]).
    pub(crate) fn rule(&self, driver: &str, options: &[(String, String)]) -> Result<(), String> {
        // Docker keeps the last of a repeated key; a check that read the
        // first would pass `o=uid=1` and then bind with `o=bind`.
        let mut seen = std::collections::BTreeSet::new();
        if let Some((key, _)) = options.iter().find(|(key, _)| !seen.insert(key.as_str())) {
            return Err(format!("driver option '{key}' is given twice; give each option once"));
        }
        if driver == LOCAL_DRIVER {
            local_mount(options)?;
        }
        match options.iter().find(|(key, _)| !self.allowed.contains(&(driver.to_owned(), key.clone()))) {
            None => Ok(()),
            Some((key, _)) => Err(format!(
                "driver option '{key}' of driver '{driver}' is not allowed on this agent (its operator may allow it with --allow-volume-option {driver}:{key})"
            )),
        }
    }
}

/// The filesystem types the `local` driver may mount: network shares and
/// tmpfs, which reach nothing on the node. Any other type mounts something
/// of the node's own (`none` or `bind` a directory, `ext4` a block
/// device, `overlay` directories named in its options), so it is a host
/// path past `--allow-host-path-prefix`.
const LOCAL_TYPES: [&str; 5] = ["nfs", "nfs4", "cifs", "smb3", "tmpfs"];

/// Why the `local` driver's `type`, `o` and `device` would mount part of
/// the node, if they would (keys are unique here).
fn local_mount(options: &[(String, String)]) -> Result<(), String> {
    let value = |k: &str| options.iter().find(|(key, _)| key == k).map(|(_, v)| v.trim());
    let host_path = "a host path is a HOST_PATH volume, under --allow-host-path-prefix";
    if let Some(part) = value("o").and_then(|o| o.split(',').map(str::trim).find(|p| matches!(*p, "bind" | "rbind"))) {
        return Err(format!("the local driver would bind a host directory (o={part}); {host_path}"));
    }
    match value("type") {
        Some(t) if LOCAL_TYPES.contains(&t) => Ok(()),
        Some(t) => Err(format!(
            "the local driver would mount part of the node (type={t}; allowed types: {}); {host_path}",
            LOCAL_TYPES.join(", ")
        )),
        None if value("device").is_some() => Err(format!(
            "the local driver mounts a device only with a type (one of {}); {host_path}",
            LOCAL_TYPES.join(", ")
        )),
        None => Ok(()),
    }
}

/// The host path prefixes bind mounts may come from, resolved.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostPaths {
    allowed: Vec<PathBuf>,
}

impl HostPaths {
    /// No host path is allowed.
    pub fn none() -> Self {
        Self::default()
    }

    /// Allows paths under each of `prefixes` (absolute, existing; resolved here).
    pub fn allow(prefixes: &[PathBuf]) -> Result<Self, PrefixError> {
        let mut allowed = Vec::new();
        for p in prefixes {
            if !p.is_absolute() {
                return Err(PrefixError::NotAbsolute { prefix: p.clone() });
            }
            let real =
                std::fs::canonicalize(p).map_err(|source| PrefixError::Unresolvable { prefix: p.clone(), source })?;
            allowed.push(real);
        }
        Ok(Self { allowed })
    }

    /// The resolved path if `path` may be bind-mounted, else why not.
    pub fn check(&self, path: &str) -> Result<PathBuf, HostPathError> {
        let p = Path::new(path);
        if !p.is_absolute() {
            return Err(HostPathError::NotAbsolute { path: path.to_owned() });
        }
        let allowed = || Allowed(self.allowed.clone());
        // Refuse before touching the disk when no path at all is allowed.
        if self.allowed.is_empty() {
            return Err(HostPathError::NoneAllowed { path: path.to_owned(), allowed: allowed() });
        }
        let lexical: PathBuf = p.components().filter(|c| !matches!(c, Component::CurDir)).collect();
        let real = std::fs::canonicalize(&lexical)
            .map_err(|source| HostPathError::Unresolvable { path: path.to_owned(), source })?;
        if !self.allowed.iter().any(|a| real.starts_with(a)) {
            return Err(HostPathError::Outside { path: path.to_owned(), resolved: real, allowed: allowed() });
        }
        Ok(real)
    }
}

/// The mounts of `volumes` (SECRET volumes are skipped: they are files).
pub fn mounts(
    volumes: &[Volume],
    host_paths: &HostPaths,
    volume_options: &VolumeOptions,
) -> Result<Vec<MountPlan>, MountError> {
    let mut out = Vec::new();
    for volume in volumes {
        let target = &volume.container_path;
        let read_only = volume.mode == VolumeMode::Ro;
        if let Some(host) = &volume.host_path {
            let source =
                host_paths.check(host).map_err(|source| MountError::HostPath { target: target.clone(), source })?;
            check_target(target)?;
            out.push(MountPlan::Bind { source: source.display().to_string(), target: target.clone(), read_only });
            continue;
        }
        let Some(source) = &volume.source else {
            return Err(MountError::NoSource { target: target.clone() });
        };
        let kind = source.get("type").and_then(|t| t.as_str()).unwrap_or("");
        let plan = match kind {
            "SECRET" => continue,
            "DOCKER_VOLUME" => docker_volume(source.get("docker_volume"), target, read_only, volume_options)?,
            "HOST_PATH" => {
                let path = source
                    .get("host_path")
                    .and_then(|h| h.get("path"))
                    .and_then(|p| p.as_str())
                    .ok_or_else(|| MountError::HostPathMissing { target: target.clone() })?;
                let real =
                    host_paths.check(path).map_err(|source| MountError::HostPath { target: target.clone(), source })?;
                MountPlan::Bind { source: real.display().to_string(), target: target.clone(), read_only }
            }
            other => return Err(MountError::SourceType { target: target.clone(), kind: other.to_owned() }),
        };
        check_target(target)?;
        out.push(plan);
    }
    Ok(out)
}

fn docker_volume(
    spec: Option<&serde_json::Value>,
    target: &str,
    read_only: bool,
    volume_options: &VolumeOptions,
) -> Result<MountPlan, MountError> {
    let target_owned = || target.to_owned();
    let spec = spec.ok_or_else(|| MountError::DockerVolumeMissing { target: target_owned() })?;
    let driver = spec.get("driver").and_then(|d| d.as_str()).filter(|d| !d.is_empty());
    let options: Vec<(String, String)> = spec
        .get("driver_options")
        .and_then(|o| o.get("parameter"))
        .and_then(|p| p.as_array())
        .into_iter()
        .flatten()
        .filter_map(|p| Some((p.get("key")?.as_str()?.to_owned(), p.get("value")?.as_str()?.to_owned())))
        .collect();
    if driver == Some(TMPFS_DRIVER) {
        let mut size_bytes = None;
        let mut mode = None;
        for (key, value) in &options {
            match key.as_str() {
                "size" => {
                    size_bytes = Some(
                        size(value)
                            .ok_or_else(|| MountError::TmpfsSize { target: target_owned(), value: value.clone() })?,
                    )
                }
                "mode" => {
                    mode = Some(
                        i64::from_str_radix(value, 8)
                            .map_err(|_| MountError::TmpfsMode { target: target_owned(), value: value.clone() })?,
                    )
                }
                other => return Err(MountError::TmpfsOption { target: target_owned(), option: other.to_owned() }),
            }
        }
        if read_only {
            return Err(MountError::TmpfsReadOnly { target: target_owned() });
        }
        return Ok(MountPlan::Tmpfs { target: target.to_owned(), size_bytes, mode });
    }
    let name = spec.get("name").and_then(|n| n.as_str()).unwrap_or("");
    if !is_volume_name(name) {
        return Err(MountError::VolumeName { target: target_owned(), name: name.to_owned() });
    }
    volume_options.check(target, driver.unwrap_or(LOCAL_DRIVER), &options)?;
    Ok(MountPlan::Volume {
        name: name.to_owned(),
        driver: driver.map(str::to_owned),
        options,
        target: target.to_owned(),
        read_only,
    })
}

fn is_volume_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// `67108864`, `64k`, `64m`, `1g` (binary units) as bytes.
fn size(text: &str) -> Option<i64> {
    let lower = text.trim().to_ascii_lowercase();
    let (digits, unit) = match lower.char_indices().last()? {
        (i, 'k') => (&lower[..i], 1i64 << 10),
        (i, 'm') => (&lower[..i], 1 << 20),
        (i, 'g') => (&lower[..i], 1 << 30),
        _ => (lower.as_str(), 1),
    };
    digits.parse::<i64>().ok().filter(|n| *n > 0)?.checked_mul(unit)
}

fn check_target(target: &str) -> Result<(), MountError> {
    let p = Path::new(target);
    if !p.is_absolute() || p.components().any(|c| matches!(c, Component::ParentDir)) || target == "/" {
        return Err(MountError::ContainerPath { target: target.to_owned() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn volume(json: serde_json::Value) -> Volume {
        serde_json::from_value(json).unwrap()
    }

    fn allow(dir: &Path) -> HostPaths {
        HostPaths::allow(&[dir.to_owned()]).unwrap()
    }

    #[test]
    fn named_volumes_and_tmpfs_are_docker_volumes_and_secrets_are_left_to_files() {
        let v = [
            volume(serde_json::json!({"container_path": "/data", "mode": "RW", "source": {"type": "DOCKER_VOLUME",
                "docker_volume": {"name": "job-data", "driver": "local",
                    "driver_options": {"parameter": [{"key": "o", "value": "uid=1000"}]}}}})),
            volume(serde_json::json!({"container_path": "/in", "mode": "RO", "source": {"type": "DOCKER_VOLUME",
                "docker_volume": {"name": "inputs"}}})),
            volume(serde_json::json!({"container_path": "/scratch", "mode": "RW", "source": {"type": "DOCKER_VOLUME",
                "docker_volume": {"name": "ignored", "driver": "tmpfs",
                    "driver_options": {"parameter": [{"key": "size", "value": "64m"}, {"key": "mode", "value": "1777"}]}}}})),
            volume(serde_json::json!({"container_path": "/run/secrets/k", "mode": "RO", "source": {"type": "SECRET",
                "secret": {"type": "VALUE", "value": {"data": "eA=="}}}})),
        ];
        let uid = VolumeOptions::allow(&["local:o".to_owned()]).unwrap();
        assert_eq!(
            mounts(&v, &HostPaths::none(), &uid).unwrap(),
            vec![
                MountPlan::Volume {
                    name: "job-data".into(),
                    driver: Some("local".into()),
                    options: vec![("o".into(), "uid=1000".into())],
                    target: "/data".into(),
                    read_only: false
                },
                MountPlan::Volume {
                    name: "inputs".into(),
                    driver: None,
                    options: vec![],
                    target: "/in".into(),
                    read_only: true
                },
                MountPlan::Tmpfs { target: "/scratch".into(), size_bytes: Some(64 << 20), mode: Some(0o1777) },
            ]
        );
    }

    #[test]
    fn host_paths_are_bound_only_under_an_allowed_prefix_after_resolution() {
        let root = tempfile::tempdir().unwrap();
        let allowed = root.path().join("allowed");
        std::fs::create_dir_all(allowed.join("in")).unwrap();
        std::fs::create_dir_all(root.path().join("private")).unwrap();
        std::os::unix::fs::symlink(root.path().join("private"), allowed.join("sneaky")).unwrap();
        let policy = allow(&allowed);
        let bind = |path: &str| {
            let v = volume(serde_json::json!({"container_path": "/in", "mode": "RO",
                "source": {"type": "HOST_PATH", "host_path": {"path": path}}}));
            mounts(&[v], &policy, &VolumeOptions::none())
        };
        let inside = format!("{}/in", allowed.display());
        let real_inside = std::fs::canonicalize(&inside).unwrap().display().to_string();
        assert_eq!(
            bind(&inside).unwrap(),
            vec![MountPlan::Bind { source: real_inside, target: "/in".into(), read_only: true }]
        );
        for escape in
            [format!("{}/in/../../private", allowed.display()), format!("{}/sneaky", allowed.display()), "/etc".into()]
        {
            let err = bind(&escape).unwrap_err().to_string();
            assert!(
                err.contains(&format!("host path '{escape}'")) && err.contains("not under an allowed prefix"),
                "{err}"
            );
        }
        assert!(bind("relative/path").unwrap_err().to_string().contains("is not absolute"));
        assert!(
            bind(&format!("{}/missing", allowed.display())).unwrap_err().to_string().contains("cannot be resolved")
        );
        // The deprecated top-level host_path follows the same rule.
        let legacy = volume(serde_json::json!({"container_path": "/in", "mode": "RW", "host_path": "/etc"}));
        assert!(
            mounts(&[legacy], &policy, &VolumeOptions::none()).unwrap_err().to_string().contains("host path '/etc'")
        );
        let none = volume(serde_json::json!({"container_path": "/in", "mode": "RW", "host_path": inside}));
        let err = mounts(&[none], &HostPaths::none(), &VolumeOptions::none()).unwrap_err().to_string();
        assert!(err.contains("--allow-host-path-prefix"), "{err}");
    }

    #[test]
    fn unsupported_sources_and_bad_fields_name_what_is_wrong() {
        let refuse = |json: serde_json::Value| {
            mounts(&[volume(json)], &HostPaths::none(), &VolumeOptions::none()).unwrap_err().to_string()
        };
        assert!(
            refuse(serde_json::json!({"container_path": "/x", "mode": "RW", "source": {"type": "SANDBOX_PATH"}}))
                .contains("'SANDBOX_PATH' is not supported")
        );
        assert!(
            refuse(serde_json::json!({"container_path": "/x", "mode": "RW", "source": {"type": "UNKNOWN"}}))
                .contains("'UNKNOWN'")
        );
        assert!(refuse(serde_json::json!({"container_path": "/x", "mode": "RW"})).contains("no source"));
        assert!(refuse(serde_json::json!({"container_path": "/x", "mode": "RW", "source": {"type": "DOCKER_VOLUME", "docker_volume": {"name": "../up"}}})).contains("'../up' is not a Docker volume name"));
        assert!(refuse(serde_json::json!({"container_path": "/x", "mode": "RW", "source": {"type": "DOCKER_VOLUME", "docker_volume": {"driver": "tmpfs", "name": "t", "driver_options": {"parameter": [{"key": "size", "value": "lots"}]}}}})).contains("tmpfs size 'lots'"));
        assert!(refuse(serde_json::json!({"container_path": "/x", "mode": "RO", "source": {"type": "DOCKER_VOLUME", "docker_volume": {"driver": "tmpfs", "name": "t"}}})).contains("cannot be read-only"));
        assert!(refuse(serde_json::json!({"container_path": "rel", "mode": "RW", "source": {"type": "DOCKER_VOLUME", "docker_volume": {"name": "v"}}})).contains("container_path 'rel'"));
        assert_eq!(size("1g"), Some(1 << 30));
        assert_eq!(size("0"), None);
    }

    #[test]
    fn the_readme_example_parses_and_means_what_it_says() {
        let readme = include_str!("../README.md");
        let start = readme.find("\"volumes\": [\n").expect("the README has a volumes example");
        let end = start + readme[start..].find("\n]\n").expect("the example ends with ]") + 2;
        let json = format!("{{{}}}", &readme[start..end]);
        let example: serde_json::Value = serde_json::from_str(&json).unwrap();
        let volumes: Vec<Volume> = serde_json::from_value(example["volumes"].clone()).unwrap();
        let (host, others): (Vec<_>, Vec<_>) = volumes.into_iter().partition(|v| v.container_path == "/input");
        let plans = mounts(&others, &HostPaths::none(), &VolumeOptions::none()).unwrap();
        assert!(matches!(&plans[0], MountPlan::Volume { name, read_only: false, .. } if name == "pi-results"));
        assert!(matches!(&plans[1], MountPlan::Tmpfs { size_bytes: Some(n), .. } if *n == 256 << 20));
        let err = mounts(&host, &HostPaths::none(), &VolumeOptions::none()).unwrap_err().to_string();
        assert!(err.contains("host path '/srv/datasets/pi'"), "{err}");
    }

    #[test]
    fn driver_options_pass_only_when_allowed_and_the_local_driver_never_binds_a_host_path() {
        let with = |driver: &str, options: serde_json::Value| {
            volume(serde_json::json!({"container_path": "/data", "mode": "RW", "source": {"type": "DOCKER_VOLUME",
                "docker_volume": {"name": "v", "driver": driver, "driver_options": {"parameter": options}}}}))
        };
        let root = serde_json::json!([{"key": "type", "value": "none"}, {"key": "o", "value": "bind"}, {"key": "device", "value": "/"}]);
        let everything = VolumeOptions::allow(&["local:type".into(), "local:o".into(), "local:device".into()]).unwrap();
        for allowed in [VolumeOptions::none(), everything.clone()] {
            let err = mounts(&[with("local", root.clone())], &HostPaths::none(), &allowed).unwrap_err().to_string();
            assert!(err.contains("the local driver would bind a host directory"), "{err}");
        }
        let rw_bind = serde_json::json!([{"key": "o", "value": "rw,bind"}, {"key": "device", "value": "/var/run"}]);
        assert!(mounts(&[with("local", rw_bind)], &HostPaths::none(), &everything).is_err(), "o=rw,bind binds too");
        // What a review found past the first version of the check.
        for (options, says) in [
            (
                serde_json::json!([{"key": "o", "value": "uid=1000"}, {"key": "o", "value": "bind"}, {"key": "device", "value": "/"}]),
                "driver option 'o' is given twice",
            ),
            (
                serde_json::json!([{"key": "type", "value": "nfs"}, {"key": "o", "value": "rbind"}, {"key": "device", "value": "/"}]),
                "would bind a host directory (o=rbind)",
            ),
            (
                serde_json::json!([{"key": "type", "value": "ext4"}, {"key": "device", "value": "/dev/sda1"}]),
                "type=ext4",
            ),
            (
                serde_json::json!([{"key": "type", "value": "overlay"}, {"key": "o", "value": "lowerdir=/,upperdir=/tmp/u,workdir=/tmp/w"}, {"key": "device", "value": "overlay"}]),
                "type=overlay",
            ),
            (serde_json::json!([{"key": "device", "value": "/dev/sda1"}]), "mounts a device only with a type"),
        ] {
            let err =
                mounts(&[with("local", options.clone())], &HostPaths::none(), &everything).unwrap_err().to_string();
            assert!(err.contains(says), "{options}: {err}");
        }
        let nfs = serde_json::json!([{"key": "type", "value": "nfs"}, {"key": "o", "value": "addr=10.0.0.1"}, {"key": "device", "value": ":/export"}]);
        let err = mounts(&[with("local", nfs.clone())], &HostPaths::none(), &VolumeOptions::none()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "volume /data: driver option 'type' of driver 'local' is not allowed on this agent (its operator may allow it with --allow-volume-option local:type)"
        );
        assert!(mounts(&[with("local", nfs)], &HostPaths::none(), &everything).is_ok(), "an allowed NFS volume");
        let plugin = serde_json::json!([{"key": "size", "value": "1G"}]);
        assert!(mounts(&[with("rexray", plugin.clone())], &HostPaths::none(), &everything).is_err(), "per driver");
        let rexray = VolumeOptions::allow(&["rexray:size".into()]).unwrap();
        assert!(mounts(&[with("rexray", plugin)], &HostPaths::none(), &rexray).is_ok());
        assert!(VolumeOptions::allow(&["nokey".into()]).unwrap_err().to_string().contains("is not DRIVER:KEY"));
    }
}
