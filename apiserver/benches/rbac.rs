//! The cost of RBAC per request and per policy change, over a grid of
//! tenants (one namespace, Role and RoleBinding each, plus the default
//! ClusterRoles and bindings):
//! - `authorize`: a tenant allowed in its own namespace, the same tenant
//!   refused in another (every binding that could apply is looked at), a
//!   discovery path, and an admin (system:masters);
//! - `build`: the policy rebuilt from every object, which happens once
//!   after an RBAC object changes.
//!
//! Run: `cargo bench -p mpiswarm-apiserver --bench rbac`

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use mpiswarm_apiserver::rbac::{AUTHENTICATED, Attributes, MASTERS, Policy, ResourceAttributes, User};
use serde_json::{Value, json};

fn tenant_objects(tenants: usize) -> Vec<Value> {
    let (mut objects, bindings) = mpiswarm_apiserver::rbac_defaults::objects();
    objects.extend(bindings);
    for i in 0..tenants {
        let ns = format!("team-{i}");
        objects.push(json!({"kind": "Role", "metadata": {"name": "mpijobs", "namespace": ns}, "rules": [
            {"apiGroups": ["mpiswarm.io"], "resources": ["mpijobs"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
            {"apiGroups": ["mpiswarm.io"], "resources": ["mpijobs/log", "mpijobs/status"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]},
        ]}));
        objects.push(json!({"kind": "RoleBinding", "metadata": {"name": ns, "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "mpijobs"},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": ns}]}));
    }
    objects
}

fn list_jobs(ns: &str) -> Attributes {
    Attributes::Resource(ResourceAttributes {
        verb: "list".into(),
        namespace: ns.into(),
        group: "mpiswarm.io".into(),
        resource: "mpijobs".into(),
        ..ResourceAttributes::default()
    })
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("rbac");
    for tenants in [10usize, 100, 1000] {
        let objects = tenant_objects(tenants);
        let policy = Policy::from_objects(&objects);
        let last = format!("team-{}", tenants - 1);
        let tenant = User { name: last.clone(), uid: String::new(), groups: vec![AUTHENTICATED.into()] };
        let admin =
            User { name: "admin".into(), uid: String::new(), groups: vec![MASTERS.into(), AUTHENTICATED.into()] };
        let own = list_jobs(&last);
        let other = list_jobs("team-0");
        let discovery = Attributes::NonResource { verb: "get".into(), path: "/apis/mpiswarm.io/v1alpha1".into() };
        assert!(policy.authorize(&tenant, &own).allowed() && !policy.authorize(&tenant, &other).allowed());
        g.bench_with_input(BenchmarkId::new("allowed_own_namespace", tenants), &own, |b, a| {
            b.iter(|| policy.authorize(&tenant, a))
        });
        g.bench_with_input(BenchmarkId::new("refused_other_namespace", tenants), &other, |b, a| {
            b.iter(|| policy.authorize(&tenant, a))
        });
        g.bench_with_input(BenchmarkId::new("discovery_path", tenants), &discovery, |b, a| {
            b.iter(|| policy.authorize(&tenant, a))
        });
        g.bench_with_input(BenchmarkId::new("admin", tenants), &other, |b, a| b.iter(|| policy.authorize(&admin, a)));
        g.bench_with_input(BenchmarkId::new("build", tenants), &objects, |b, o| b.iter(|| Policy::from_objects(o)));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
