//! `mpiswarm tenant add NAME`: a team on the local stack, made as an
//! operator makes one on a cluster, in one command:
//!
//! - a bearer token for user `NAME` (group [`TENANT_GROUP`]) in the API
//!   server's token file `DATA/tokens.csv` (kube-apiserver's
//!   `--token-auth-file` format, `token,user,uid,"groups"`; 0600; the server
//!   reads it again when it changes, so a running stack takes the tenant at
//!   once); adding a tenant again keeps its token;
//! - its Namespace (default `NAME`), annotated with the Mesos roles its
//!   MpiJobs may use (`mpiswarm.io/allowed-roles`, default the role `NAME`;
//!   roles already listed there stay);
//! - the Role [`TENANT_ROLE`] in that namespace (MpiJobs, their status and
//!   logs, and the events that tell their story) and a RoleBinding of it to
//!   the user;
//! - a kubeconfig (`DATA/tenants/NAME.kubeconfig`, 0600) with the token,
//!   the API server and its CA, and the namespace as the default;
//! - once for all tenants: the Role [`DISCOVERY_ROLE`] in the controller's
//!   namespace (`default` on `up`), which may `get` the one ConfigMap where
//!   the controller records its log endpoint (`mpiswarm-framework`, by
//!   `resourceNames`), bound to the group [`TENANT_GROUP`], so that
//!   `mpiswarm logs` with a tenant's kubeconfig finds the endpoint. That
//!   ConfigMap holds no secret (framework id, master URL, log endpoint URL);
//!   a tenant may read nothing else there. One binding to the group, not
//!   one per user: what it grants is the same for every tenant, and a
//!   tenant whose token goes loses it with the token.
//!
//! What the role may hold of the cluster is the offer layer's quota
//! (`mpiswarm up --quota ROLE=cpus:N;mem:M`); this command does not change it.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::Resource;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use mpiswarm_controller::role_policy::ALLOWED_ROLES;
use mpiswarm_crds::MpiJob;

use crate::error::{FileAction, Result, StackError, file};
use crate::stack_file::{self, DEFAULT_DATA_DIR};

/// The group every tenant's user is in.
pub const TENANT_GROUP: &str = "mpiswarm:tenants";
/// The Role a tenant gets in its namespace.
pub const TENANT_ROLE: &str = "mpiswarm-tenant";
/// The Role that lets tenants find the controller's log endpoint.
pub const DISCOVERY_ROLE: &str = "mpiswarm-tenant-discovery";
/// The field manager of what this command applies.
const MANAGER: &str = "mpiswarm-tenant";

/// The API server's token file of the stack in `data_dir`.
pub fn tokens_file(data_dir: &Path) -> PathBuf {
    data_dir.join("tokens.csv")
}

/// The token file of the stack in `data_dir`, created empty and `0600` if
/// it does not exist (an empty file lists no user: only the admin token
/// works until `tenant add` adds one), for the API server to read and
/// re-read when `tenant add` changes it. Blocking.
pub fn ensure_tokens_file(data_dir: &Path) -> Result<PathBuf> {
    let path = tokens_file(data_dir);
    file(FileAction::Creating, &path, mpiswarm_guard::private::file(&path))?;
    Ok(path)
}

/// Where `tenant add` writes the kubeconfig of tenant `name`.
pub fn kubeconfig_file(data_dir: &Path, name: &str) -> PathBuf {
    data_dir.join("tenants").join(format!("{name}.kubeconfig"))
}

#[derive(clap::Args, Debug)]
pub struct TenantArgs {
    #[command(subcommand)]
    pub command: TenantCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum TenantCommand {
    /// Add a tenant (or bring one up to date): its token, namespace, allowed roles, RBAC and kubeconfig.
    Add(AddArgs),
}

#[derive(clap::Args, Debug)]
pub struct AddArgs {
    /// The tenant's user name (letters, digits, '-', '.', '_').
    pub name: String,
    /// Its namespace (default: the tenant's name).
    #[arg(long)]
    pub namespace: Option<String>,
    /// A Mesos role its MpiJobs may use (repeatable; default: the tenant's name).
    #[arg(long = "role")]
    pub roles: Vec<String>,
    /// The data dir of the running stack.
    #[arg(long, default_value = DEFAULT_DATA_DIR, env = "MPISWARM_DATA_DIR")]
    pub data_dir: PathBuf,
    /// The controller's namespace (its lease namespace), where its framework
    /// ConfigMap says where the log endpoint is.
    #[arg(long, default_value = "default")]
    pub controller_namespace: String,
}

/// What `tenant add` made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Added {
    pub name: String,
    pub namespace: String,
    pub roles: Vec<String>,
    pub kubeconfig: PathBuf,
}

/// `mpiswarm tenant ...`.
pub async fn run(args: TenantArgs) -> Result<()> {
    match args.command {
        TenantCommand::Add(add) => {
            let added = self::add(add).await?;
            println!(
                "tenant {}: namespace {} (roles {}), kubeconfig {}\n  try: kubectl --kubeconfig {} auth can-i create mpijobs",
                added.name,
                added.namespace,
                added.roles.join(", "),
                added.kubeconfig.display(),
                added.kubeconfig.display(),
            );
            Ok(())
        }
    }
}

/// Adds the tenant to the stack running in `args.data_dir`.
pub async fn add(args: AddArgs) -> Result<Added> {
    if !is_name(&args.name) {
        return Err(StackError::TenantName(args.name));
    }
    let namespace = args.namespace.clone().unwrap_or_else(|| args.name.clone());
    let roles = if args.roles.is_empty() { vec![args.name.clone()] } else { args.roles.clone() };
    for role in &roles {
        mpiswarm_mesos::roles::validate_role(role).map_err(|e| StackError::TenantRole(e.to_string()))?;
    }
    let stack = stack_file::running(&args.data_dir)?;
    let admin = stack.kubeconfig.clone();
    let (data_dir, name) = (args.data_dir.clone(), args.name.clone());
    let token =
        tokio::task::spawn_blocking(move || ensure_token(&tokens_file(&data_dir), &name, TENANT_GROUP)).await??;

    let client = mpiswarm_controller::client(Some(&admin))
        .await
        .map_err(|e| StackError::Client { kubeconfig: admin.clone(), source: Box::new(e) })?;
    let apply = PatchParams::apply(MANAGER).force();
    let kube_err = |what: &'static str| move |source: kube::Error| StackError::Tenant { what, source };

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let listed = namespaces.get_opt(&namespace).await.map_err(kube_err("reading the namespace"))?;
    let existing = listed.as_ref().and_then(|n| n.metadata.annotations.as_ref()).and_then(|a| a.get(ALLOWED_ROLES));
    let allowed = merged_roles(existing.map(String::as_str), &roles);
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(namespace.clone()),
            annotations: Some([(ALLOWED_ROLES.to_owned(), allowed)].into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    namespaces.patch(&namespace, &apply, &Patch::Apply(&ns)).await.map_err(kube_err("applying the namespace"))?;

    let role = tenant_role(&namespace);
    let role_api: Api<Role> = Api::namespaced(client.clone(), &namespace);
    role_api.patch(TENANT_ROLE, &apply, &Patch::Apply(&role)).await.map_err(kube_err("applying the Role"))?;
    let binding = tenant_binding(&namespace, &args.name);
    let binding_name = binding.metadata.name.clone().unwrap_or_default();
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), &namespace);
    bindings
        .patch(&binding_name, &apply, &Patch::Apply(&binding))
        .await
        .map_err(kube_err("applying the RoleBinding"))?;

    let discovery = discovery_role(&args.controller_namespace);
    let roles_there: Api<Role> = Api::namespaced(client.clone(), &args.controller_namespace);
    roles_there
        .patch(DISCOVERY_ROLE, &apply, &Patch::Apply(&discovery))
        .await
        .map_err(kube_err("applying the log endpoint's discovery Role"))?;
    let bindings_there: Api<RoleBinding> = Api::namespaced(client, &args.controller_namespace);
    bindings_there
        .patch(DISCOVERY_ROLE, &apply, &Patch::Apply(&discovery_binding(&args.controller_namespace)))
        .await
        .map_err(kube_err("applying the log endpoint's discovery RoleBinding"))?;

    let out = kubeconfig_file(&args.data_dir, &args.name);
    let (name, ns) = (args.name.clone(), namespace.clone());
    let written = out.clone();
    tokio::task::spawn_blocking(move || write_kubeconfig(&admin, &written, &name, &token, &ns)).await??;
    accepted(&out, &namespace).await?;
    Ok(Added { name: args.name, namespace, roles, kubeconfig: out })
}

/// How long the API server may take to read its token file again.
const TOKEN_ACCEPTED_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

/// Waits until the API server accepts the tenant's token (it reads its token
/// file again about once a second), so that the kubeconfig works as soon
/// as the command returns: a list of the tenant's MpiJobs through it.
async fn accepted(kubeconfig: &Path, namespace: &str) -> Result<()> {
    let probe = |client: kube::Client| async move {
        let jobs: Api<MpiJob> = Api::namespaced(client, namespace);
        jobs.list(&kube::api::ListParams::default().limit(1)).await.map(drop)
    };
    token_accepted(kubeconfig, probe)
        .await?
        .map_err(|source| StackError::Tenant { what: "the API server accepting the token", source })
}

/// Retries `probe` through a client of `kubeconfig` until it is answered,
/// for at most [`TOKEN_ACCEPTED_WITHIN`]: the API server then accepts the
/// kubeconfig's token. The inner error is the probe's last, at the deadline.
pub(crate) async fn token_accepted<F, Fut>(kubeconfig: &Path, probe: F) -> Result<std::result::Result<(), kube::Error>>
where
    F: Fn(kube::Client) -> Fut,
    Fut: std::future::Future<Output = std::result::Result<(), kube::Error>>,
{
    let client = mpiswarm_controller::client(Some(kubeconfig))
        .await
        .map_err(|e| StackError::Client { kubeconfig: kubeconfig.to_owned(), source: Box::new(e) })?;
    let deadline = tokio::time::Instant::now() + TOKEN_ACCEPTED_WITHIN;
    loop {
        match probe(client.clone()).await {
            Ok(()) => return Ok(Ok(())),
            Err(e) if tokio::time::Instant::now() >= deadline => return Ok(Err(e)),
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
        }
    }
}

fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        && name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
}

/// The namespace's allowed roles after adding `roles` to what it lists
/// (`*`, all roles, stays all roles).
fn merged_roles(existing: Option<&str>, roles: &[String]) -> String {
    let mut all: Vec<String> = existing
        .into_iter()
        .flat_map(|e| e.split(','))
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(str::to_owned)
        .collect();
    if all.iter().any(|r| r == "*") {
        return "*".to_owned();
    }
    for r in roles {
        if !all.contains(r) {
            all.push(r.clone());
        }
    }
    all.join(",")
}

/// What a tenant may do in its namespace.
fn tenant_role(namespace: &str) -> Role {
    let rule = |groups: &[&str], resources: &[&str], verbs: &[&str]| PolicyRule {
        api_groups: Some(groups.iter().map(|s| (*s).to_owned()).collect()),
        resources: Some(resources.iter().map(|s| (*s).to_owned()).collect()),
        verbs: verbs.iter().map(|s| (*s).to_owned()).collect(),
        ..PolicyRule::default()
    };
    let read = ["get", "list", "watch"];
    let group = MpiJob::group(&());
    Role {
        metadata: ObjectMeta {
            name: Some(TENANT_ROLE.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        rules: Some(vec![
            rule(
                &[&group],
                &["mpijobs"],
                &["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"],
            ),
            rule(&[&group], &["mpijobs/status", "mpijobs/log"], &["get"]),
            rule(&["", "events.k8s.io"], &["events"], &read),
        ]),
    }
}

/// `get` on the controller's framework ConfigMap only, which says where the log endpoint is.
fn discovery_role(namespace: &str) -> Role {
    Role {
        metadata: ObjectMeta {
            name: Some(DISCOVERY_ROLE.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["configmaps".to_owned()]),
            resource_names: Some(vec![mpiswarm_controller::framework_id::CONFIG_MAP.to_owned()]),
            verbs: vec!["get".to_owned()],
            ..PolicyRule::default()
        }]),
    }
}

/// [`DISCOVERY_ROLE`] for every tenant (the group [`TENANT_GROUP`]).
fn discovery_binding(namespace: &str) -> RoleBinding {
    role_binding(namespace, DISCOVERY_ROLE, DISCOVERY_ROLE, "Group", TENANT_GROUP)
}

fn tenant_binding(namespace: &str, user: &str) -> RoleBinding {
    role_binding(namespace, &format!("{TENANT_ROLE}-{user}"), TENANT_ROLE, "User", user)
}

/// The RoleBinding `name` in `namespace` of the Role `role` to one subject (`User` or `Group`).
fn role_binding(namespace: &str, name: &str, role: &str, kind: &str, subject: &str) -> RoleBinding {
    RoleBinding {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "Role".to_owned(),
            name: role.to_owned(),
        },
        subjects: Some(vec![Subject {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: kind.to_owned(),
            name: subject.to_owned(),
            namespace: None,
        }]),
    }
}

/// The token of `user` in the token file at `path`, added (with a new
/// random token, in `group`) if the file does not list the user yet. Blocking.
pub(crate) fn ensure_token(path: &Path, user: &str, group: &str) -> Result<String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => return Err(StackError::File { action: FileAction::Reading, path: path.to_owned(), source }),
    };
    if let Some(token) = token_of(&text, user) {
        return Ok(token);
    }
    let token = crate::credentials::new_secret();
    let mut text = text;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&token_line(&token, user, group));
    file(FileAction::Writing, path, mpiswarm_guard::private::write(path, text.as_bytes()))?;
    Ok(token)
}

/// The token file line of a user: `token,user,uid,"groups"`.
fn token_line(token: &str, user: &str, group: &str) -> String {
    format!("{token},{user},{user},\"{group}\"\n")
}

/// The token the file gives `user`, if it lists the user.
fn token_of(text: &str, user: &str) -> Option<String> {
    text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).find_map(|l| {
        let mut fields = l.splitn(3, ',');
        let (token, name) = (fields.next()?, fields.next()?);
        (name.trim().trim_matches('"') == user).then(|| token.trim().trim_matches('"').to_owned())
    })
}

/// Writes the tenant's kubeconfig: the admin one's cluster (server and CA),
/// the tenant's token, its namespace. Blocking.
pub(crate) fn write_kubeconfig(admin: &Path, out: &Path, user: &str, token: &str, namespace: &str) -> Result<()> {
    let text = std::fs::read_to_string(admin).map_err(|source| StackError::File {
        action: FileAction::Reading,
        path: admin.to_owned(),
        source,
    })?;
    let config = tenant_kubeconfig(&text, user, token, namespace)
        .ok_or_else(|| StackError::Kubeconfig { path: admin.to_owned() })?;
    if let Some(dir) = out.parent() {
        file(FileAction::Creating, dir, mpiswarm_guard::private::dir(dir))?;
    }
    file(FileAction::Writing, out, mpiswarm_guard::private::write(out, config.as_bytes()))
}

/// The tenant's kubeconfig made from the admin kubeconfig `admin` (YAML).
fn tenant_kubeconfig(admin: &str, user: &str, token: &str, namespace: &str) -> Option<String> {
    let admin: serde_json::Value = serde_yaml::from_str(admin).ok()?;
    let cluster = admin.get("clusters")?.as_array()?.first()?.clone();
    let cluster_name = cluster.get("name")?.as_str()?.to_owned();
    let context = format!("{user}@{cluster_name}");
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": cluster_name, "user": user, "namespace": namespace}}],
        "current-context": context,
    });
    serde_yaml::to_string(&config).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_file_keeps_a_tenants_token_and_adds_new_ones_privately() {
        let dir = tempfile::tempdir().unwrap();
        let path = tokens_file(dir.path());
        let a = ensure_token(&path, "team-a", TENANT_GROUP).unwrap();
        assert_eq!(a.len(), 64);
        assert_eq!(ensure_token(&path, "team-a", TENANT_GROUP).unwrap(), a, "adding a tenant again keeps its token");
        let b = ensure_token(&path, "team-b", TENANT_GROUP).unwrap();
        assert_ne!(a, b);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("{a},team-a,team-a,\"mpiswarm:tenants\"\n{b},team-b,team-b,\"mpiswarm:tenants\"\n"));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(token_of("# comment\n\n\"t1\",\"ops\",u,\"a,b\"\n", "ops").as_deref(), Some("t1"));
    }

    #[test]
    fn roles_are_added_to_what_the_namespace_allows_and_star_stays_star() {
        let r = |s: &[&str]| s.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        assert_eq!(merged_roles(None, &r(&["team-a"])), "team-a");
        assert_eq!(merged_roles(Some("batch, team-a"), &r(&["team-a", "gpu"])), "batch,team-a,gpu");
        assert_eq!(merged_roles(Some("*"), &r(&["team-a"])), "*");
    }

    #[test]
    fn tenants_may_get_only_the_controllers_framework_config_map_in_its_namespace() {
        let role = discovery_role("default");
        assert_eq!(role.metadata.namespace.as_deref(), Some("default"));
        let rules = role.rules.unwrap();
        assert_eq!(rules.len(), 1);
        assert_eq!(rules[0].verbs, ["get"]);
        assert_eq!(rules[0].resources.as_deref(), Some(&["configmaps".to_owned()][..]));
        assert_eq!(rules[0].resource_names.as_deref(), Some(&["mpiswarm-framework".to_owned()][..]));
        let binding = discovery_binding("default");
        let subjects = binding.subjects.unwrap();
        assert_eq!((subjects[0].kind.as_str(), subjects[0].name.as_str()), ("Group", TENANT_GROUP));
        assert_eq!(binding.role_ref.name, DISCOVERY_ROLE);
    }

    #[test]
    fn the_tenant_kubeconfig_has_the_admin_cluster_and_the_tenants_token_and_namespace() {
        let admin = mpiswarm_apiserver::tls::kubeconfig("https://127.0.0.1:6443", "admin-token", Some("PEM"));
        let text = tenant_kubeconfig(&admin, "team-a", "tenant-token", "team-a").unwrap();
        assert!(!text.contains("admin-token"), "{text}");
        let config = kube::config::Kubeconfig::from_yaml(&text).unwrap();
        assert_eq!(config.clusters[0].cluster.as_ref().unwrap().server.as_deref(), Some("https://127.0.0.1:6443"));
        assert!(config.clusters[0].cluster.as_ref().unwrap().certificate_authority_data.is_some());
        assert_eq!(config.auth_infos[0].name, "team-a");
        let context = config.contexts[0].context.as_ref().unwrap();
        assert_eq!((context.user.as_deref(), context.namespace.as_deref()), (Some("team-a"), Some("team-a")));
        assert_eq!(config.current_context.as_deref(), Some("team-a@mpiswarm"));
        assert!(!is_name("") && !is_name("-x") && !is_name("a,b") && is_name("team-a"));
    }
}
