//! Who the offer layer's replicas (`up --split --offers-replicas N`) are to
//! the API server: not the admin, but the service account user of
//! `mpiswarm_offers::rbac` in the Lease's namespace, allowed exactly what
//! the manifests' StatefulSet is allowed (its Lease and its OfferRegistry,
//! there, and nothing else), so the local stack runs the replicas under
//! the same Role a cluster does:
//!
//! - a bearer token for that user in the stack's token file (0600, kept
//!   across restarts of the stack, as a tenant's is);
//! - the Role and its RoleBinding, applied by the admin;
//! - `DATA/offers.kubeconfig` (0600): the API server and its CA, the token,
//!   the namespace; the replicas' `--kubeconfig`.
//!
//! A single offer layer keeps its registry on disk and needs none of it.

use std::path::{Path, PathBuf};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, Patch, PatchParams};

use crate::error::{Result, StackError};

/// The Lease (and the name of the shared registry) of `--offers-replicas`.
pub const OFFERS_LEASE: &str = "mpiswarm-offers";
/// The namespace of the replicas' Lease and registry (`offers
/// --lease-namespace`, whose default `up` keeps).
pub const NAMESPACE: &str = "default";
/// The group of every service account user, as Kubernetes names it.
const SERVICE_ACCOUNTS_GROUP: &str = "system:serviceaccounts";
/// The field manager of what `up` applies here.
const MANAGER: &str = "mpiswarm-up";

/// The replicas' kubeconfig in the stack's data directory.
pub fn kubeconfig_file(data_dir: &Path) -> PathBuf {
    data_dir.join("offers.kubeconfig")
}

/// Makes the replicas' identity through the admin kubeconfig `admin` and
/// returns their kubeconfig once the API server takes its token.
pub async fn prepare(data_dir: &Path, admin: &Path) -> Result<PathBuf> {
    let user = mpiswarm_offers::rbac::service_account_user(NAMESPACE);
    let tokens = crate::tenant::tokens_file(data_dir);
    let token = {
        let user = user.clone();
        tokio::task::spawn_blocking(move || crate::tenant::ensure_token(&tokens, &user, SERVICE_ACCOUNTS_GROUP))
            .await??
    };
    let client = mpiswarm_controller::client(Some(admin))
        .await
        .map_err(|e| StackError::Client { kubeconfig: admin.to_owned(), source: Box::new(e) })?;
    let apply = PatchParams::apply(MANAGER).force();
    let name = mpiswarm_offers::rbac::NAME;
    let err = |what: &'static str| move |source: kube::Error| StackError::OffersIdentity { what, source };
    Api::<Role>::namespaced(client.clone(), NAMESPACE)
        .patch(name, &apply, &Patch::Apply(&mpiswarm_offers::rbac::role(NAMESPACE)))
        .await
        .map_err(err("applying the Role"))?;
    Api::<RoleBinding>::namespaced(client, NAMESPACE)
        .patch(name, &apply, &Patch::Apply(&mpiswarm_offers::rbac::role_binding(NAMESPACE)))
        .await
        .map_err(err("applying the RoleBinding"))?;
    let out = kubeconfig_file(data_dir);
    let (admin, written) = (admin.to_owned(), out.clone());
    tokio::task::spawn_blocking(move || crate::tenant::write_kubeconfig(&admin, &written, &user, &token, NAMESPACE))
        .await??;
    accepted(&out).await?;
    Ok(out)
}

/// Waits until the API server takes the token (it reads its token file
/// again about once a second): a read of the Lease through the new
/// kubeconfig is answered, found or not.
async fn accepted(kubeconfig: &Path) -> Result<()> {
    let probe = |client: kube::Client| async move {
        Api::<Lease>::namespaced(client, NAMESPACE).get_opt(OFFERS_LEASE).await.map(drop)
    };
    crate::tenant::token_accepted(kubeconfig, probe)
        .await?
        .map_err(|source| StackError::OffersIdentity { what: "the API server accepting the token", source })
}
