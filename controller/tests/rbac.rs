//! The controller's RBAC (`manifests/20-rbac.yaml`, bound to the service
//! account the Deployment in `manifests/30-controller.yaml` runs as) is
//! checked against what the controller really does, not against a list
//! kept by hand: jobs go through their whole life (created, finalized,
//! status, Events, SSH key Secret, framework-id ConfigMap, leader Lease,
//! success and TTL deletion, failure with a restart, an invalid spec, a
//! controller restart that takes the Lease over, deletion of a running job),
//! the API server's audit log records every request, and each (verb, group,
//! resource, subresource) that the controller's client used -- told apart
//! by its User-Agent, `mpiswarm_controller::USER_AGENT`, since the embedded
//! API server has one token for every client -- must be allowed by the
//! rules bound to that service account. Kubernetes also authorizes two
//! things a Metadata-level log does not show as requests, so they are
//! derived from what the log and the cluster do show: a PATCH or PUT that
//! creates its object (answered 201) needs `create` as well, and writing an
//! object whose ownerReference sets `blockOwnerDeletion` needs `update` on
//! the owner's `finalizers` subresource (the OwnerReferencesPermissionEnforcement
//! admission plugin); the objects are those that name the controller in
//! their managedFields. Rules nothing exercised are printed, for a human to
//! judge.
//!
//! The offer layer's Role (bound to the service account of the StatefulSet
//! in `manifests/40-offers.yaml`) is checked the same way: two replicas
//! elect a leader with their Lease, an agent registers (the registry is
//! written), the leader stops and the other takes the Lease over and claims
//! the registry; every request of the replicas' client
//! (`mpiswarm_offers::USER_AGENT`) must be allowed by the Role, and in its
//! namespace, the only one a Role grants anything in. The Role's rules are
//! those of `mpiswarm_offers::rbac`, which `mpiswarm up --offers-replicas`
//! grants its replicas.

mod common;

use std::collections::BTreeSet;

use common::{Stack, controller_client, job_yaml, loopback_logs, options, program, settings};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, Subject};
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::Discovery;
use mpiswarm_apiserver::audit::Event;
use mpiswarm_crds::Phase;
use mpiswarm_testkit::AgentSpec;
use serde::Deserialize;

/// One kind of request: what RBAC decides on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Request {
    verb: String,
    group: String,
    resource: String,
    subresource: String,
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() { "core" } else { &self.group };
        match self.subresource.as_str() {
            "" => write!(f, "{} {group}/{}", self.verb, self.resource),
            sub => write!(f, "{} {group}/{}/{sub}", self.verb, self.resource),
        }
    }
}

/// Kubernetes' RBAC matching (`k8s.io/kubernetes/pkg/apis/rbac/v1` helpers):
/// `*` matches any verb, group or resource, `*/sub` any resource's subresource.
fn allows(rule: &PolicyRule, r: &Request) -> bool {
    let has = |list: &[String], v: &str| list.iter().any(|x| x == "*" || x == v);
    let resources = rule.resources.as_deref().unwrap_or_default();
    let combined =
        if r.subresource.is_empty() { r.resource.clone() } else { format!("{}/{}", r.resource, r.subresource) };
    let resource_ok = has(resources, &combined)
        || (!r.subresource.is_empty() && resources.iter().any(|x| *x == format!("*/{}", r.subresource)));
    // resourceNames can never allow create, list, watch or deletecollection.
    let names_ok = rule.resource_names.as_ref().is_none_or(Vec::is_empty);
    has(&rule.verbs, &r.verb)
        && has(rule.api_groups.as_deref().unwrap_or_default(), &r.group)
        && resource_ok
        && names_ok
}

/// The kinds of request among `events` that name a resource.
fn requests(events: &[&Event]) -> BTreeSet<Request> {
    events
        .iter()
        .filter_map(|e| e.object_ref.as_ref().map(|o| (e, o)))
        .map(|(e, o)| Request {
            verb: e.verb.clone(),
            group: o.api_group.clone(),
            resource: o.resource.clone(),
            subresource: o.subresource.clone(),
        })
        .collect()
}

/// Every (verb, group, resource/subresource) a rule grants, for the report.
fn granted(rule: &PolicyRule) -> Vec<String> {
    let mut out = Vec::new();
    for g in rule.api_groups.as_deref().unwrap_or_default() {
        for res in rule.resources.as_deref().unwrap_or_default() {
            for v in &rule.verbs {
                out.push(format!("{v} {}/{res}", if g.is_empty() { "core" } else { g }));
            }
        }
    }
    out
}

fn manifest_docs(file: &str) -> Vec<serde_json::Value> {
    let path = format!("{}/../manifests/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde_json::Value::deserialize(d).unwrap_or_else(|e| panic!("{path}: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}

fn of_kind<T: serde::de::DeserializeOwned>(docs: &[serde_json::Value], kind: &str) -> Vec<T> {
    docs.iter()
        .filter(|d| d["kind"] == kind)
        .map(|d| serde_json::from_value(d.clone()).unwrap_or_else(|e| panic!("a {kind} that is not valid: {e}")))
        .collect()
}

/// The namespace and service account of workload `kind`/`name` in
/// `manifests/FILE` (its pod template's serviceAccountName), checked to be
/// a ServiceAccount of `manifests/20-rbac.yaml`.
fn service_account_of(file: &str, kind: &str, name: &str) -> (String, String) {
    let docs = manifest_docs(file);
    let workload = docs
        .iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in manifests/{file}"));
    let namespace = workload["metadata"]["namespace"].as_str().expect("the workload's namespace").to_owned();
    let account = workload["spec"]["template"]["spec"]["serviceAccountName"]
        .as_str()
        .unwrap_or_else(|| panic!("{kind} {name} names no serviceAccountName"))
        .to_owned();
    let rbac = manifest_docs("20-rbac.yaml");
    assert!(
        rbac.iter().any(|a| a["kind"] == "ServiceAccount"
            && a["metadata"]["name"] == account.as_str()
            && a["metadata"]["namespace"] == namespace.as_str()),
        "manifests/20-rbac.yaml has no ServiceAccount {namespace}/{account}, which {kind} {name} runs as"
    );
    (namespace, account)
}

/// Whether `subjects` name service account `namespace`/`account`.
fn names_account(subjects: Option<&[Subject]>, namespace: &str, account: &str) -> bool {
    subjects
        .unwrap_or_default()
        .iter()
        .any(|s| s.kind == "ServiceAccount" && s.name == account && s.namespace.as_deref() == Some(namespace))
}

/// The rules granted cluster-wide to the service account the controller's
/// Deployment runs as, through the manifests' ClusterRoleBindings.
fn controller_rules() -> Vec<PolicyRule> {
    let (namespace, account) = service_account_of("30-controller.yaml", "Deployment", "mpiswarm-controller");
    let rbac = manifest_docs("20-rbac.yaml");
    let roles: Vec<ClusterRole> = of_kind(&rbac, "ClusterRole");
    let bindings: Vec<ClusterRoleBinding> = of_kind(&rbac, "ClusterRoleBinding");
    let mut rules = Vec::new();
    for b in bindings.iter().filter(|b| names_account(b.subjects.as_deref(), &namespace, &account)) {
        assert_eq!(b.role_ref.kind, "ClusterRole", "binding {:?}", b.metadata.name);
        let role = roles
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(b.role_ref.name.as_str()))
            .unwrap_or_else(|| panic!("binding {:?} names a ClusterRole that is not there", b.metadata.name));
        rules.extend(role.rules.clone().unwrap_or_default());
    }
    assert!(!rules.is_empty(), "no ClusterRoleBinding grants anything to {namespace}/{account}");
    rules
}

/// The rules granted to the service account the offer layer's StatefulSet
/// (`manifests/40-offers.yaml`) runs as, through the RoleBindings of
/// `manifests/20-rbac.yaml`, and the namespace they hold in (the
/// StatefulSet's: Roles grant nothing elsewhere).
fn offers_rules() -> (Vec<PolicyRule>, String) {
    let (namespace, account) = service_account_of("40-offers.yaml", "StatefulSet", "mpiswarm-offers");
    let rbac = manifest_docs("20-rbac.yaml");
    let roles: Vec<Role> = of_kind(&rbac, "Role");
    let bindings: Vec<RoleBinding> = of_kind(&rbac, "RoleBinding");
    let in_namespace = |m: &kube::core::ObjectMeta| m.namespace.as_deref() == Some(namespace.as_str());
    let mut rules = Vec::new();
    for b in bindings
        .iter()
        .filter(|b| in_namespace(&b.metadata) && names_account(b.subjects.as_deref(), &namespace, &account))
    {
        assert_eq!(b.role_ref.kind, "Role", "binding {:?}", b.metadata.name);
        let role = roles
            .iter()
            .find(|r| in_namespace(&r.metadata) && r.metadata.name.as_deref() == Some(b.role_ref.name.as_str()))
            .unwrap_or_else(|| panic!("binding {:?} names a Role that is not in {namespace}", b.metadata.name));
        rules.extend(role.rules.clone().unwrap_or_default());
    }
    assert!(!rules.is_empty(), "no RoleBinding grants anything to {namespace}/{account}");
    (rules, namespace)
}

/// What Kubernetes authorizes besides the verbs in the log (see the module
/// doc): `create` for a patch or update that created its object, and
/// `update` of `<owner>/finalizers` for every blocking ownerReference on an
/// object the controller wrote.
async fn implied(
    client: &kube::Client,
    used: &BTreeSet<Request>,
    created_by_write: &BTreeSet<Request>,
) -> BTreeSet<Request> {
    let mut out: BTreeSet<Request> =
        created_by_write.iter().map(|r| Request { verb: "create".into(), ..r.clone() }).collect();
    let discovery = Discovery::new(client.clone()).run().await.expect("API discovery");
    let written: BTreeSet<(&str, &str)> = used
        .iter()
        .filter(|r| matches!(r.verb.as_str(), "create" | "patch" | "update") && r.subresource.is_empty())
        .map(|r| (r.group.as_str(), r.resource.as_str()))
        .collect();
    for (group, resource) in written {
        let (ar, caps) = discovery
            .get(group)
            .and_then(|g| g.recommended_resources().into_iter().find(|(ar, _)| ar.plural == resource))
            .unwrap_or_else(|| panic!("discovery has no {group}/{resource}"));
        if !caps.supports_operation(kube::discovery::verbs::LIST) {
            continue; // answered, never stored (TokenReview, SubjectAccessReview): no owner to check
        }
        let objects = Api::<DynamicObject>::all_with(client.clone(), &ar).list(&ListParams::default()).await;
        for o in objects.expect("listing what the controller wrote").items {
            let by_controller = o
                .metadata
                .managed_fields
                .iter()
                .flatten()
                .any(|m| m.manager.as_deref() == Some(mpiswarm_controller::context::FIELD_MANAGER));
            for owner in o.metadata.owner_references.iter().flatten().filter(|_| by_controller) {
                if owner.block_owner_deletion != Some(true) {
                    continue;
                }
                let (group, version) = owner.api_version.split_once('/').unwrap_or(("", &owner.api_version));
                let gvk = kube::core::GroupVersionKind::gvk(group, version, &owner.kind);
                let (owner_ar, _) =
                    discovery.resolve_gvk(&gvk).unwrap_or_else(|| panic!("discovery has no kind {gvk:?}"));
                out.insert(Request {
                    verb: "update".into(),
                    group: owner_ar.group,
                    resource: owner_ar.plural,
                    subresource: "finalizers".into(),
                });
            }
        }
    }
    out
}

/// Paths every authenticated user may read on any cluster (the default
/// `system:discovery` and `system:public-info-viewer` roles).
fn discovery_path(uri: &str) -> bool {
    let path = uri.split('?').next().unwrap_or_default();
    matches!(path, "/api" | "/apis" | "/version" | "/healthz" | "/livez" | "/readyz" | "/openapi/v2")
        || path.starts_with("/api/")
        || path.starts_with("/apis/")
        || path.starts_with("/openapi/")
}

fn two_nodes() -> Vec<AgentSpec> {
    vec![AgentSpec::new("node1").cpus(2.0).mem(4096.0), AgentSpec::new("node2").cpus(2.0).mem(4096.0)]
}

/// Jobs through the lifecycle paths the controller has, driven with kubectl.
async fn lifecycle(s: &mut Stack) {
    let ttl = job_yaml("short-lived", 2, 0.5, &program("sleep 1"), "  runPolicy: {ttlSecondsAfterFinished: 1}\n");
    let failing = job_yaml("failing", 2, 0.5, &program("false"), "  runPolicy: {backoffLimit: 1}\n");
    let invalid = job_yaml("bad-flags", 2, 0.5, &program("true"), "  mpi: {mpirunArgs: [\"-np\", \"8\"]}\n");
    let long = job_yaml("long", 2, 0.5, &program("sleep 600"), "");
    s.kubectl_ok(&["apply", "-f", "-"], Some(&[ttl, failing, invalid, long].join("---\n")));
    s.until_phase("bad-flags", Phase::Failed).await;
    let failed = s.until_phase("failing", Phase::Failed).await;
    assert_eq!(failed.status.map(|st| st.restarts), Some(1), "the failing job was restarted once");
    s.until_gone("short-lived").await;
    s.until_phase("long", Phase::Running).await;

    // A controller restart: the new one takes the Lease over and adopts the running gang.
    let first = s.controller.take().expect("the stack's controller");
    first.stop();
    first.wait().await.expect("the first controller stops cleanly");
    let mut second_options = options(&s.offers.url(), settings(&s.round_log), "test-controller-2");
    second_options.logs = Some(loopback_logs());
    let second = mpiswarm_controller::start(controller_client(&s.api.kubeconfig).await, second_options)
        .await
        .expect("the second controller starts");
    let (logs, _) = second.logs.clone().expect("the second controller serves the log endpoint");
    s.controller = Some(second);
    // A new job proves the second controller leads; then the running one is deleted.
    s.kubectl_ok(&["apply", "-f", "-"], Some(&job_yaml("after-restart", 1, 0.5, &program("true"), "")));
    s.until_phase("after-restart", Phase::Succeeded).await;
    // A read of the log endpoint: a TokenReview, a SubjectAccessReview,
    // the job. Test agents keep no output, so it ends at the agent, past
    // both reviews (not 401 or 403).
    let read = reqwest::Client::new()
        .get(format!("http://{logs}/logs/default/after-restart"))
        .bearer_auth(&s.api.token)
        .timeout(std::time::Duration::from_secs(60))
        .send()
        .await
        .expect("the log endpoint answers");
    assert!(!matches!(read.status().as_u16(), 200 | 401 | 403), "{}: {:?}", read.status(), read.text().await);
    s.kubectl_ok(&["delete", "mpijob", "long", "--wait=false"], None);
    s.until_gone("long").await;
    s.agents.wait_for_running(|running| running.is_empty()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_cluster_role_covers_every_request_the_controller_makes_through_a_job_lifecycle() {
    let rules = controller_rules();
    let mut s = Stack::start(two_nodes()).await;
    lifecycle(&mut s).await;

    let events = s.audit_events().await;
    let controller: Vec<&Event> = events.iter().filter(|e| e.user_agent == mpiswarm_controller::USER_AGENT).collect();
    let others: BTreeSet<&str> = events.iter().map(|e| e.user_agent.as_str()).collect();
    let used = requests(&controller);
    eprintln!("the controller ({}) used, over {} requests:", mpiswarm_controller::USER_AGENT, controller.len());
    for r in &used {
        eprintln!("  {r}");
    }
    eprintln!("other clients in the log: {others:?}");
    let created_by_write: BTreeSet<Request> = controller
        .iter()
        .filter(|e| matches!(e.verb.as_str(), "patch" | "update") && e.response_status.code == 201)
        .filter_map(|e| e.object_ref.as_ref())
        .map(|o| Request {
            verb: String::new(),
            group: o.api_group.clone(),
            resource: o.resource.clone(),
            subresource: o.subresource.clone(),
        })
        .collect();
    let implied = implied(&s.client, &used, &created_by_write).await;
    eprintln!("implied by those requests:");
    for r in &implied {
        eprintln!("  {r}");
    }
    let used: BTreeSet<Request> = used.into_iter().chain(implied).collect();
    let non_resource: BTreeSet<String> =
        controller.iter().filter(|e| e.object_ref.is_none()).map(|e| format!("{} {}", e.verb, e.request_uri)).collect();

    // The log must have seen the lifecycle, or the check below proves nothing.
    for expected in [
        ("patch", "mpiswarm.io", "mpijobs", "status"),
        ("patch", "mpiswarm.io", "mpijobs", ""),
        ("delete", "mpiswarm.io", "mpijobs", ""),
        ("watch", "mpiswarm.io", "mpijobs", ""),
        ("create", "events.k8s.io", "events", ""),
        ("create", "", "secrets", ""),
        ("patch", "", "configmaps", ""),
        ("get", "coordination.k8s.io", "leases", ""),
        ("create", "", "configmaps", ""),
        ("create", "authentication.k8s.io", "tokenreviews", ""),
        ("create", "authorization.k8s.io", "subjectaccessreviews", ""),
        ("get", "mpiswarm.io", "mpijobs", ""),
    ] {
        let r = Request {
            verb: expected.0.into(),
            group: expected.1.into(),
            resource: expected.2.into(),
            subresource: expected.3.into(),
        };
        assert!(used.contains(&r), "the audit log never saw the controller {r}: the lifecycle did not run");
    }

    let missing: Vec<String> =
        used.iter().filter(|r| !rules.iter().any(|rule| allows(rule, r))).map(ToString::to_string).collect();
    assert!(
        missing.is_empty(),
        "manifests/20-rbac.yaml does not allow what the controller did: {missing:#?}\n(it used {used:#?})"
    );
    let outside: Vec<&String> =
        non_resource.iter().filter(|u| !discovery_path(u.split(' ').nth(1).unwrap_or(""))).collect();
    assert!(outside.is_empty(), "the controller requested non-resource URLs no default role grants: {outside:?}");

    let unexercised: Vec<String> = rules
        .iter()
        .flat_map(granted)
        .filter(|g| {
            !used.iter().any(|r| {
                let res = if r.subresource.is_empty() {
                    r.resource.clone()
                } else {
                    format!("{}/{}", r.resource, r.subresource)
                };
                let group = if r.group.is_empty() { "core" } else { &r.group };
                *g == format!("{} {group}/{res}", r.verb)
            })
        })
        .collect();
    eprintln!("granted but never used in this run ({}):", unexercised.len());
    for g in &unexercised {
        eprintln!("  {g}");
    }
}

/// The leader among `urls` by what each says (`/master/state`'s leader),
/// once one says it leads itself, within the deadline.
async fn leader_among(urls: &[String]) -> String {
    let http = reqwest::Client::new();
    let found = tokio::time::timeout(common::DEADLINE, async {
        loop {
            for url in urls {
                let state = http.get(format!("{url}/master/state")).send().await;
                let state: serde_json::Value = match state {
                    Ok(r) => r.json().await.unwrap_or_default(),
                    Err(_) => continue,
                };
                let own = format!("master@{}", url.trim_start_matches("http://"));
                if state["leader"].as_str() == Some(own.as_str()) {
                    return url.clone();
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    })
    .await;
    found.unwrap_or_else(|_| panic!("none of {urls:?} led within {:?}", common::DEADLINE))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_offers_role_covers_every_request_the_replicas_make_through_an_election_and_a_takeover() {
    let (rules, namespace) = offers_rules();
    // What `mpiswarm up --offers-replicas` grants is what the manifests do.
    assert_eq!(
        rules,
        mpiswarm_offers::rbac::rules(),
        "the offers Role of manifests/20-rbac.yaml and mpiswarm_offers::rbac"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let mut api_args = mpiswarm_apiserver::ApiserverArgs::for_dir(dir.path().join("api"));
    api_args.audit_log = Some(dir.path().join("audit.jsonl"));
    let api = mpiswarm_apiserver::start(api_args).await.expect("API server starts");
    let client = common::client(&api.kubeconfig).await;
    // What an operator applies first: the namespace and the registry's CRD.
    for (file, kind) in [("00-namespace.yaml", "Namespace"), ("11-offer-registry-crd.yaml", "CustomResourceDefinition")]
    {
        for doc in manifest_docs(file).into_iter().filter(|d| d["kind"] == kind) {
            let object: DynamicObject = serde_json::from_value(doc).expect("an object");
            let gvk = kube::core::GroupVersionKind::try_from(object.types.as_ref().expect("types")).expect("a GVK");
            let (ar, _) = kube::discovery::pinned_kind(&client, &gvk).await.expect("the kind is served");
            Api::<DynamicObject>::all_with(client.clone(), &ar)
                .create(&kube::api::PostParams::default(), &object)
                .await
                .unwrap_or_else(|e| panic!("manifests/{file}: {e}"));
        }
    }

    // Two replicas elect a leader; an agent registers (the registry is
    // written); the leader stops and the other takes the Lease over and
    // claims the registry.
    let lease = "mpiswarm-offers";
    let a = mpiswarm_offers::start(common::replica_args(&api.kubeconfig, &namespace, lease)).await.expect("replica a");
    let b = mpiswarm_offers::start(common::replica_args(&api.kubeconfig, &namespace, lease)).await.expect("replica b");
    let urls = vec![a.url(), b.url()];
    let first = leader_among(&urls).await;
    let mut agent = mpiswarm_testkit::TestAgent::start(
        &urls.join(","),
        "node1",
        vec![mpiswarm_mesos::Resource::scalar("cpus", 2.0), mpiswarm_mesos::Resource::scalar("mem", 2048.0)],
    );
    mpiswarm_testkit::scheduler::within("the agent's registration", agent.subscribed(1)).await;
    let (leader, standby) = if first == a.url() { (a, b) } else { (b, a) };
    leader.stop().await.expect("the leader stops cleanly");
    let second = leader_among(std::slice::from_ref(&standby.url())).await;
    eprintln!("{first} led, then {second}");

    let events = common::audit_events(&api).await;
    let offers: Vec<&Event> = events.iter().filter(|e| e.user_agent == mpiswarm_offers::USER_AGENT).collect();
    let others: BTreeSet<&str> = events.iter().map(|e| e.user_agent.as_str()).collect();
    eprintln!(
        "the replicas ({}) made {} requests; other clients: {others:?}",
        mpiswarm_offers::USER_AGENT,
        offers.len()
    );
    let elsewhere: Vec<String> = offers
        .iter()
        .filter_map(|e| e.object_ref.as_ref())
        .filter(|o| o.namespace != namespace)
        .map(|o| format!("{} {}/{}", o.resource, o.namespace, o.name))
        .collect();
    assert!(elsewhere.is_empty(), "requests outside {namespace}, where the Role grants nothing: {elsewhere:?}");
    let used = requests(&offers);
    for r in &used {
        eprintln!("  {r}");
    }
    let non_resource: Vec<String> = offers
        .iter()
        .filter(|e| e.object_ref.is_none() && !discovery_path(&e.request_uri))
        .map(|e| format!("{} {}", e.verb, e.request_uri))
        .collect();
    assert!(
        non_resource.is_empty(),
        "the replicas requested non-resource URLs no default role grants: {non_resource:?}"
    );
    // The election, the claim and a write must all be in the log, or the
    // check below proves nothing.
    for (verb, group, resource) in [
        ("get", "coordination.k8s.io", "leases"),
        ("create", "coordination.k8s.io", "leases"),
        ("update", "coordination.k8s.io", "leases"),
        ("get", "offers.mpiswarm.io", "offerregistries"),
        ("create", "offers.mpiswarm.io", "offerregistries"),
        ("update", "offers.mpiswarm.io", "offerregistries"),
    ] {
        let r =
            Request { verb: verb.into(), group: group.into(), resource: resource.into(), subresource: String::new() };
        assert!(used.contains(&r), "the audit log never saw a replica {r}: the election or the registry did not run");
    }
    let missing: Vec<String> =
        used.iter().filter(|r| !rules.iter().any(|rule| allows(rule, r))).map(ToString::to_string).collect();
    assert!(missing.is_empty(), "manifests/20-rbac.yaml does not allow what the replicas did: {missing:#?}");
    let unexercised: Vec<String> =
        rules.iter().flat_map(granted).filter(|g| !used.iter().any(|r| *g == r.to_string())).collect();
    eprintln!("granted but never used in this run: {unexercised:?}");
    drop(agent);
    standby.stop().await.expect("the second leader stops cleanly");
}

#[test]
fn the_rule_matcher_knows_wildcards_subresources_and_resource_names() {
    let rule = |groups: &[&str], resources: &[&str], verbs: &[&str]| PolicyRule {
        api_groups: Some(groups.iter().map(|s| s.to_string()).collect()),
        resources: Some(resources.iter().map(|s| s.to_string()).collect()),
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        ..PolicyRule::default()
    };
    let req = |verb: &str, group: &str, resource: &str, sub: &str| Request {
        verb: verb.into(),
        group: group.into(),
        resource: resource.into(),
        subresource: sub.into(),
    };
    let status = req("patch", "mpiswarm.io", "mpijobs", "status");
    assert!(allows(&rule(&["mpiswarm.io"], &["mpijobs/status"], &["patch"]), &status));
    assert!(
        !allows(&rule(&["mpiswarm.io"], &["mpijobs"], &["patch"]), &status),
        "a resource does not grant its status"
    );
    assert!(!allows(
        &rule(&["mpiswarm.io"], &["mpijobs/status"], &["patch"]),
        &req("patch", "mpiswarm.io", "mpijobs", "")
    ));
    assert!(allows(&rule(&["*"], &["*/status"], &["*"]), &status));
    assert!(allows(&rule(&["mpiswarm.io"], &["*"], &["patch"]), &status));
    assert!(!allows(&rule(&[""], &["mpijobs/status"], &["patch"]), &status), "the core group is not every group");
    assert!(!allows(&rule(&["mpiswarm.io"], &["mpijobs/status"], &["update"]), &status));
    let mut named = rule(&[""], &["secrets"], &["create"]);
    named.resource_names = Some(vec!["key".into()]);
    assert!(!allows(&named, &req("create", "", "secrets", "")));
}
