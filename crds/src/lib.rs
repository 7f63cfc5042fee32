//! The `MpiJob` API, `mpiswarm.io/v1alpha1`: types, CRD generation and the
//! validation rules a schema cannot express. This crate depends on nothing
//! else of mpiswarm's and does no I/O; every other crate that speaks of an
//! MpiJob uses these types.

mod hostfile;
mod manifest;
pub mod quantity;
mod reason;
mod spec;
mod status;
mod validate;

pub use manifest::{ManifestError, parse_manifest};
pub use reason::ConditionReason;
pub use spec::{
    CleanPolicy, DockerVolumeSource, EnvVar, HostPathSource, Implementation, MEMORY_PATTERN, MpiJob, MpiJobSpec,
    MpiSpec, PlacementPolicy, PlacementSpec, Profile, ROLE_PATTERN, RankResources, RunPolicy, TmpfsSource, Volume,
};
pub use status::{
    AppliedPolicy, ConditionType, LauncherStatus, MpiJobStatus, NodePlacement, Phase, PlacementStatus, WorkersStatus,
};
pub use validate::{FieldError, ValidationErrors, is_image_reference};

use kube::CustomResourceExt;

/// `apiVersion` of every MpiJob.
pub const API_VERSION: &str = "mpiswarm.io/v1alpha1";

/// Finalizer the controller puts on every MpiJob so that deleting one first
/// tears its tasks down.
pub const FINALIZER: &str = "mpiswarm.io/teardown";

/// The CustomResourceDefinition, as `kubectl apply` wants it.
pub fn crd() -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    MpiJob::crd()
}

/// The CRD as YAML, exactly what `mpiswarm crd` prints and `crds/mpijob.yaml` holds.
pub fn crd_yaml() -> Result<String, serde_yaml::Error> {
    serde_yaml::to_string(&crd())
}
