//! The manifests wire TLS, credentials and the offer layer's replicas,
//! checked by running them: the controller container of the Deployment in
//! `manifests/30-controller.yaml` and a replica of the StatefulSet in
//! `manifests/40-offers.yaml` start as written (their args, with `$(VAR)`
//! expanded as the kubelet does, their environment, their Secret volumes
//! materialized from test CAs at the mount paths, under a temp root). The
//! replica elects itself through its Lease, under the DNS name the
//! StatefulSet and its headless Service give it, and keeps its registry in
//! the OfferRegistry of `manifests/11-offer-registry-crd.yaml`; the
//! controller's masters as written are exactly the replicas' URLs, and it
//! subscribes over HTTPS with its own credential. The offer layer refuses a
//! client without credentials (401) and does not speak plain HTTP. The
//! controller's log endpoint, as written, serves HTTPS with the certificate
//! of its Secret to a client that trusts that Secret's CA and asks for the
//! host of `--logs-url`: no token is 401, a token the API server knows
//! whose user may not `get mpijobs/log` in the namespace is 403 naming
//! user, verb, resource and namespace, and a user a Role allows it gets as
//! far as the job (404, no such job); the URL as written is what the
//! controller records for `mpiswarm logs`. The Service of the manifest
//! carries that one port: its port is the URL's, its target the container's
//! log port, which is the port the endpoint listens on as written.
//! Kubernetes itself is the embedded API server (with two token-file
//! users); what a test cannot take from the manifest is overridden and
//! said: listen addresses (loopback, a port the system picks; clients reach
//! the URL's host there), the controller's masters (the one replica, on
//! loopback: the cluster's DNS names resolve nowhere here), the `valueFrom`
//! fields (namespace `default`, pod `mpiswarm-offers-0`), and the
//! kubeconfig for the in-cluster config.

#[path = "../../controller/tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

const CONTROLLER_PRINCIPAL: &str = "mpiswarm-controller";
const CONTROLLER_SECRET: &str = "controller-s3cret";
/// A tenant a Role in its namespace allows `get mpijobs/log`.
const TEAM_A: &str = "team-a-token-0c5e2b7a-8d4f-4a61-9b3e-7f2d1c6a5e40";
/// A user the API server knows, with no RBAC at all.
const TEAM_B: &str = "team-b-token-5d9a3f1e-2c7b-4e86-a0d4-3b8f6e1c9a27";

/// A child process killed when the test ends, pass or panic.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The documents of manifests/30-controller.yaml (the controller),
/// 40-offers.yaml (the offer layer's replicas) and 11-offer-registry-crd.yaml.
fn documents() -> Vec<Value> {
    ["30-controller.yaml", "40-offers.yaml", "11-offer-registry-crd.yaml"]
        .iter()
        .flat_map(|file| {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests").join(file);
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("manifests/{file}: {e}"));
            serde_yaml::Deserializer::from_str(&text)
                .map(|d| <Value as serde::Deserialize>::deserialize(d).expect("a YAML document"))
                .collect::<Vec<Value>>()
        })
        .collect()
}

fn document<'a>(docs: &'a [Value], kind: &str, name: Option<&str>) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && name.is_none_or(|n| d["metadata"]["name"] == n))
        .unwrap_or_else(|| panic!("no {kind} {} in the manifests", name.unwrap_or_default()))
}

/// What the Secrets hold, made from test CAs as an operator would: `pki`
/// for the offer layer, `logs_pki` for the log endpoint.
fn secrets(
    pki: &mpiswarm_testkit::TestPki,
    logs_pki: &mpiswarm_testkit::TestPki,
) -> BTreeMap<&'static str, BTreeMap<&'static str, String>> {
    let read = |p: &Path| std::fs::read_to_string(p).expect("a test PKI file");
    let tls = |pki: &mpiswarm_testkit::TestPki| {
        BTreeMap::from([
            ("tls.crt", read(&pki.cert_file)),
            ("tls.key", read(&pki.key_file)),
            ("ca.crt", read(&pki.ca_file)),
        ])
    };
    let credentials = format!(
        r#"{{"credentials":[{{"principal":"{CONTROLLER_PRINCIPAL}","secret":"{CONTROLLER_SECRET}"}},{{"principal":"mpiswarm-agent","secret":"agent-s3cret"}}]}}"#
    );
    BTreeMap::from([
        ("mpiswarm-offers-tls", tls(pki)),
        ("mpiswarm-logs-tls", tls(logs_pki)),
        (
            "mpiswarm-credentials",
            BTreeMap::from([
                ("credentials.json", credentials),
                ("controller", format!("{CONTROLLER_PRINCIPAL} {CONTROLLER_SECRET}\n")),
            ]),
        ),
    ])
}

/// A container of a pod template, its volumes materialized under `root`.
struct Container {
    args: Vec<String>,
    env: Vec<(String, String)>,
    /// Its named ports: name -> containerPort.
    ports: BTreeMap<String, u16>,
    /// Mount path in the pod -> where it is under `root`.
    mounts: Vec<(String, PathBuf)>,
}

impl Container {
    fn of(pod: &Value, name: &str, root: &Path, secrets: &BTreeMap<&str, BTreeMap<&str, String>>) -> Self {
        let c = pod["containers"]
            .as_array()
            .expect("containers")
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no container {name} in the pod"));
        let volumes = pod["volumes"].as_array().expect("volumes");
        let mut mounts = Vec::new();
        for m in c["volumeMounts"].as_array().into_iter().flatten() {
            let (vname, path) = (m["name"].as_str().expect("a mount's volume"), m["mountPath"].as_str().expect("path"));
            let volume = volumes
                .iter()
                .find(|v| v["name"] == vname)
                .unwrap_or_else(|| panic!("container {name} mounts volume {vname}, which the pod does not have"));
            let local = root.join(name).join(path.trim_start_matches('/'));
            std::fs::create_dir_all(&local).expect("a mount directory");
            if let Some(secret) = volume.get("secret") {
                let sname = secret["secretName"].as_str().expect("secretName");
                let data = secrets.get(sname).unwrap_or_else(|| panic!("volume {vname} names unknown Secret {sname}"));
                let files: Vec<(String, String)> = match secret["items"].as_array() {
                    Some(items) => items
                        .iter()
                        .map(|i| {
                            (i["key"].as_str().expect("key").to_owned(), i["path"].as_str().expect("path").to_owned())
                        })
                        .collect(),
                    None => data.keys().map(|k| (k.to_string(), k.to_string())).collect(),
                };
                for (key, file) in files {
                    let text = data.get(key.as_str()).unwrap_or_else(|| panic!("Secret {sname} has no key {key}"));
                    std::fs::write(local.join(file), text).expect("a secret file");
                }
            }
            mounts.push((path.to_owned(), local));
        }
        let args = c["args"].as_array().expect("args").iter().map(|a| a.as_str().expect("an arg").to_owned()).collect();
        let env = c["env"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| Some((e["name"].as_str()?.to_owned(), e["value"].as_str()?.to_owned())))
            .collect();
        let ports = c["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| Some((p["name"].as_str()?.to_owned(), u16::try_from(p["containerPort"].as_u64()?).ok()?)))
            .collect();
        let mut container = Self { args, env, ports, mounts };
        container.args = container.args.iter().map(|a| container.local(a)).collect();
        container.env = container.env.iter().map(|(k, v)| (k.clone(), container.local(v))).collect();
        container
    }

    /// `value` with every mount path in it pointing into the temp root.
    fn local(&self, value: &str) -> String {
        let mut out = value.to_owned();
        for (path, local) in &self.mounts {
            out = out.replace(path.as_str(), local.to_str().expect("a UTF-8 temp path"));
        }
        out
    }

    fn env(&self, name: &str) -> &str {
        self.env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).unwrap_or_else(|| panic!("no env {name}"))
    }

    /// The container's process: its args, in which `$(NAME)` is the value
    /// of variable NAME of its environment (as the kubelet expands them),
    /// and its environment with `overrides` applied.
    fn command(&self, overrides: &[(&str, &str)], log: &Path) -> Command {
        let mut env: BTreeMap<&str, &str> = self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        env.extend(overrides.iter().copied());
        let expand = |arg: &String| env.iter().fold(arg.clone(), |a, (k, v)| a.replace(&format!("$({k})"), v));
        let args: Vec<String> = self.args.iter().map(expand).collect();
        assert!(args.iter().all(|a| !a.contains("$(")), "a variable the environment does not set: {args:?}");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mpiswarm"));
        cmd.args(&args).env_clear().env("PATH", std::env::var("PATH").unwrap_or_default());
        for (k, v) in &env {
            cmd.env(k, v);
        }
        cmd.stdout(Stdio::null()).stderr(std::fs::File::create(log).expect("a log file"));
        cmd
    }
}

/// The first line of `log` with `marker` in it, within the deadline.
fn printed(log: &Path, marker: &str, who: &str) -> String {
    let started = std::time::Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.contains(marker)) {
            return line.to_owned();
        }
        assert!(
            started.elapsed() < common::DEADLINE,
            "{who} printed no {marker:?} within {:?}: {text}",
            common::DEADLINE
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The URL the offer layer printed (`... listening on URL`).
fn printed_url(log: &Path) -> String {
    let line = printed(log, "listening on ", "the offer layer");
    line.split("listening on ").nth(1).expect("a URL").trim().to_owned()
}

/// The port of an address as the manifest writes it (`0.0.0.0:8444`).
fn port_of(addr: &str) -> u16 {
    addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).unwrap_or_else(|| panic!("no port in {addr}"))
}

/// The Service that `url` (`https://NAME.NAMESPACE.svc:PORT`) names, checked
/// against the controller container: in the Deployment's namespace, selecting
/// its pods, with one port, the URL's, whose target is the container port
/// the log endpoint listens on as written.
fn check_logs_service(docs: &[Value], url: &reqwest::Url, controller: &Container) {
    let d = document(docs, "Deployment", None);
    let host = url.host_str().expect("a host in the log endpoint's URL");
    let (name, rest) = host.split_once('.').unwrap_or_else(|| panic!("{url} does not name a Service"));
    let (namespace, suffix) = rest.split_once('.').unwrap_or_else(|| panic!("{url} does not name a namespace"));
    assert!(suffix == "svc" || suffix == "svc.cluster.local", "{url} is not a Service's DNS name");
    let service = document(docs, "Service", Some(name));
    assert_eq!(service["metadata"]["namespace"], namespace, "the namespace of Service {name} and of {url}");
    assert_eq!(service["metadata"]["namespace"], d["metadata"]["namespace"], "Service {name} and the Deployment");
    let labels = &d["spec"]["template"]["metadata"]["labels"];
    let selector = service["spec"]["selector"].as_object().expect("the Service's selector");
    assert!(!selector.is_empty() && selector.iter().all(|(k, v)| labels[k] == *v), "{selector:?} selects not {labels}");
    let ports = service["spec"]["ports"].as_array().expect("the Service's ports");
    assert_eq!(ports.len(), 1, "Service {name} exposes the log endpoint only: {ports:?}");
    let port = &ports[0];
    assert_eq!(port["port"].as_u64(), url.port_or_known_default().map(u64::from), "Service {name}'s port and {url}");
    let target = match &port["targetPort"] {
        Value::String(named) => *controller.ports.get(named).unwrap_or_else(|| panic!("no container port {named}")),
        Value::Number(n) => n.as_u64().and_then(|n| u16::try_from(n).ok()).expect("a port number"),
        other => panic!("Service {name}'s targetPort is {other}"),
    };
    let listen = controller.env("MPISWARM_CONTROLLER_LOGS_LISTEN");
    assert_eq!(target, port_of(listen), "Service {name} targets {target}; the log endpoint listens on {listen}");
    assert!(controller.ports.values().any(|p| *p == target), "the controller container declares no port {target}");
}

/// The URLs of the offer layer's replicas as the StatefulSet and its
/// headless Service make them: `https://NAME-i.SERVICE.NAMESPACE.svc:PORT`
/// for each replica, where PORT is the Service's, which targets the port
/// the container listens on as written, and the Service selects the
/// StatefulSet's pods whether ready or not (a standby answers redirects).
fn replica_urls(docs: &[Value], offers: &Container) -> Vec<String> {
    let sts = document(docs, "StatefulSet", Some("mpiswarm-offers"));
    let (name, namespace) = (sts["metadata"]["name"].as_str().expect("a name"), &sts["metadata"]["namespace"]);
    let service_name = sts["spec"]["serviceName"].as_str().expect("the StatefulSet's serviceName");
    let service = document(docs, "Service", Some(service_name));
    assert_eq!(service["metadata"]["namespace"], *namespace, "Service {service_name} and the StatefulSet");
    assert_eq!(service["spec"]["clusterIP"], "None", "Service {service_name} is headless: a DNS name per replica");
    assert_eq!(service["spec"]["publishNotReadyAddresses"], true, "standbys resolve too");
    let labels = &sts["spec"]["template"]["metadata"]["labels"];
    let selector = service["spec"]["selector"].as_object().expect("the Service's selector");
    assert!(!selector.is_empty() && selector.iter().all(|(k, v)| labels[k] == *v), "{selector:?} selects not {labels}");
    let ports = service["spec"]["ports"].as_array().expect("the Service's ports");
    assert_eq!(ports.len(), 1, "Service {service_name}: {ports:?}");
    let target = ports[0]["targetPort"].as_str().expect("a named targetPort");
    let listen = offers.env("MPISWARM_OFFERS_LISTEN");
    assert_eq!(offers.ports.get(target).copied(), Some(port_of(listen)), "{service_name} targets {target}; {listen}");
    let port = ports[0]["port"].as_u64().expect("the Service's port");
    let replicas = sts["spec"]["replicas"].as_u64().expect("the StatefulSet's replicas");
    let namespace = namespace.as_str().expect("a namespace");
    (0..replicas).map(|i| format!("https://{name}-{i}.{service_name}.{namespace}.svc:{port}")).collect()
}

/// The API server's users of the test: TEAM_A and TEAM_B (token file).
fn tokens_file(dir: &Path) -> PathBuf {
    let path = dir.join("tokens.csv");
    let text =
        format!("{TEAM_A},team-a,team-a-uid,\"mpiswarm:tenants\"\n{TEAM_B},team-b,team-b-uid,\"mpiswarm:tenants\"\n");
    std::fs::write(&path, text).expect("the token file");
    path
}

/// Namespace `team`, a Role there that may `get mpijobs/log`, bound to user `team`.
async fn allow_logs(client: &kube::Client, team: &str) {
    let pp = PostParams::default();
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": team}})).expect("a Namespace");
    Api::<Namespace>::all(client.clone()).create(&pp, &namespace).await.expect("the namespace is created");
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "logs-reader", "namespace": team},
        "rules": [{"apiGroups": ["mpiswarm.io"], "resources": ["mpijobs/log"], "verbs": ["get"]}],
    }))
    .expect("a Role");
    Api::<Role>::namespaced(client.clone(), team).create(&pp, &role).await.expect("the Role is created");
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "logs-reader", "namespace": team},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "logs-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": team}],
    }))
    .expect("a RoleBinding");
    Api::<RoleBinding>::namespaced(client.clone(), team).create(&pp, &binding).await.expect("the binding is created");
}

/// One GET of the log endpoint: the status and the JSON body (a Status on refusals).
async fn get_logs(client: &reqwest::Client, url: &str, token: Option<&str>) -> (u16, Value) {
    let mut req = client.get(url).timeout(Duration::from_secs(30));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap_or_else(|e| panic!("GET {url} (HTTPS, the certificate of its Secret): {e:?}"));
    (resp.status().as_u16(), resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_and_an_offers_replica_run_as_written_subscribe_over_tls_and_serve_the_log_endpoint() {
    let docs = documents();
    let d = document(&docs, "Deployment", None);
    let pod = &d["spec"]["template"]["spec"];
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("pod");
    // The log endpoint's certificate names the host of its URL as written.
    let logs_url = pod["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["name"] == "controller")
        .flat_map(|c| c["env"].as_array().into_iter().flatten())
        .find(|e| e["name"] == "MPISWARM_CONTROLLER_LOGS_URL")
        .and_then(|e| e["value"].as_str())
        .expect("the controller's MPISWARM_CONTROLLER_LOGS_URL");
    let logs_url = reqwest::Url::parse(logs_url).unwrap_or_else(|e| panic!("{logs_url}: {e}"));
    assert_eq!(logs_url.scheme(), "https", "the log endpoint's URL as written");
    let logs_host = logs_url.host_str().expect("a host").to_owned();
    let pki = mpiswarm_testkit::TestPki::new();
    let logs_pki = mpiswarm_testkit::TestPki::for_hosts(&[&logs_host]);
    let secrets = secrets(&pki, &logs_pki);
    let offers_pod = &document(&docs, "StatefulSet", Some("mpiswarm-offers"))["spec"]["template"]["spec"];
    let offers = Container::of(offers_pod, "offers", &root, &secrets);
    let controller = Container::of(pod, "controller", &root, &secrets);
    check_logs_service(&docs, &logs_url, &controller);
    let replicas = replica_urls(&docs, &offers);

    // Kubernetes: the embedded API server, which knows the tenants' tokens.
    let mut api_args = mpiswarm_apiserver::ApiserverArgs::for_dir(dir.path().join("api"));
    api_args.token_auth_file = Some(tokens_file(dir.path()));
    let api = mpiswarm_apiserver::start(api_args).await.expect("the API server starts");
    let client = common::client(&api.kubeconfig).await;
    common::install_crd(&client).await;
    let registry_crd: CustomResourceDefinition =
        serde_json::from_value(document(&docs, "CustomResourceDefinition", None).clone()).expect("the CRD");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &registry_crd)
        .await
        .expect("manifests/11-offer-registry-crd.yaml is accepted");
    let kubeconfig = api.kubeconfig.to_str().expect("UTF-8").to_owned();

    // A replica of the offer layer, as written (its Lease and registry in
    // the API server) but on a loopback port the system picks, as the
    // first pod of the StatefulSet in namespace default.
    let offers_log = root.join("offers.log");
    let offers_env = [
        ("MPISWARM_OFFERS_LISTEN", "127.0.0.1:0"),
        ("MPISWARM_OFFERS_KUBECONFIG", kubeconfig.as_str()),
        ("POD_NAME", "mpiswarm-offers-0"),
        ("POD_NAMESPACE", "default"),
        ("MPISWARM_OFFERS_LEASE_NAMESPACE", "default"),
    ];
    let _offers = Process(offers.command(&offers_env, &offers_log).spawn().expect("offers"));
    let url = printed_url(&offers_log);
    assert!(url.starts_with("https://"), "the offer layer serves {url}, not HTTPS");
    let port = url.rsplit(':').next().expect("a port").trim_end_matches('/');

    // The controller, as written: its masters are the replicas, by the
    // names the StatefulSet and its Service give them; here the one
    // replica, on loopback (a name in the cluster's DNS resolves nowhere here).
    let masters = controller.env("MPISWARM_MASTER");
    assert_eq!(masters.split(',').collect::<Vec<_>>(), replicas, "the controller's masters in the Deployment");
    let master = format!("https://localhost:{port}");
    let controller_log = root.join("controller.log");
    let overrides = [
        ("MPISWARM_MASTER", master.as_str()),
        ("MPISWARM_CONTROLLER_LISTEN", "127.0.0.1:0"),
        ("MPISWARM_CONTROLLER_LOGS_LISTEN", "127.0.0.1:0"),
        ("MPISWARM_KUBECONFIG", kubeconfig.as_str()),
        ("POD_NAMESPACE", "default"),
        ("MPISWARM_IDENTITY", "manifest-test"),
    ];
    let _controller = Process(controller.command(&overrides, &controller_log).spawn().expect("controller"));

    // It subscribes, as its own principal, trusting the CA from the Secret.
    let ca = reqwest::Certificate::from_pem(secrets["mpiswarm-offers-tls"]["ca.crt"].as_bytes()).expect("CA");
    let https = reqwest::Client::builder().add_root_certificate(ca).build().expect("client");
    let state_url = format!("{master}/master/state");
    let subscribed = tokio::time::timeout(common::DEADLINE, async {
        loop {
            let state: Option<Value> =
                match https.get(&state_url).basic_auth(CONTROLLER_PRINCIPAL, Some(CONTROLLER_SECRET)).send().await {
                    Ok(r) => r.json().await.ok(),
                    Err(_) => None,
                };
            let active = state
                .as_ref()
                .and_then(|s| s["frameworks"].as_array())
                .and_then(|fs| fs.iter().find(|f| f["active"] == true && f["principal"] == CONTROLLER_PRINCIPAL))
                .cloned();
            if let Some(f) = active {
                return f;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "the controller never subscribed; its log:\n{}\noffers log:\n{}",
            std::fs::read_to_string(&controller_log).unwrap_or_default(),
            std::fs::read_to_string(&offers_log).unwrap_or_default()
        )
    });
    eprintln!("subscribed: {} ({})", subscribed["name"], subscribed["id"]);
    // The replica leads under its DNS name (its Lease identity), and keeps
    // the registry in the OfferRegistry named like the Lease.
    let state = https.get(&state_url).basic_auth(CONTROLLER_PRINCIPAL, Some(CONTROLLER_SECRET)).send().await;
    let state: Value = state.expect("state").json().await.expect("JSON");
    let leader = format!("master@mpiswarm-offers-0.mpiswarm-offers.default.svc:{port}");
    assert_eq!(state["leader"].as_str(), Some(leader.as_str()), "{}", state["leader"]);
    let lease_name = offers.args.iter().find_map(|a| a.strip_prefix("--lease-name=")).expect("--lease-name");
    let registries: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("offers.mpiswarm.io", "v1", "OfferRegistry"),
            "offerregistries",
        ),
    );
    let registry = registries.get(lease_name).await.expect("the registry object");
    assert_eq!(registry.data["spec"]["holder"].as_str(), Some(&leader["master@".len()..]), "{:?}", registry.data);

    // Without credentials: 401. In plain HTTP: no answer at all.
    let anonymous = https
        .post(format!("{master}/api/v1/scheduler"))
        .header("Content-Type", "application/json")
        .body(r#"{"type":"SUBSCRIBE","subscribe":{"framework_info":{"user":"x","name":"x"}}}"#)
        .send()
        .await
        .expect("an HTTPS answer");
    assert_eq!(anonymous.status(), 401);
    let plain = reqwest::get(format!("http://127.0.0.1:{port}/health")).await;
    assert!(plain.map(|r| !r.status().is_success()).unwrap_or(true), "plain HTTP was served");

    // The log endpoint, as written but on a loopback port the system picks:
    // HTTPS with the Secret's certificate, to a client that trusts the
    // Secret's CA and asks for the URL's host.
    let line = printed(&controller_log, "serving the tenants' log endpoint", "the controller");
    let addr = line.split_whitespace().find_map(|w| w.strip_prefix("addr=")).expect("the endpoint's address");
    let addr: std::net::SocketAddr = addr.parse().unwrap_or_else(|e| panic!("{addr}: {e}"));
    let logs_ca = reqwest::Certificate::from_pem(secrets["mpiswarm-logs-tls"]["ca.crt"].as_bytes()).expect("CA");
    let tenants =
        reqwest::Client::builder().add_root_certificate(logs_ca).resolve(&logs_host, addr).build().expect("client");
    let mut base = logs_url.clone();
    base.set_port(Some(addr.port())).expect("a port");
    let base = base.as_str().trim_end_matches('/').to_owned();

    let (code, body) = get_logs(&tenants, &format!("{base}/logs/team-a/pi"), None).await;
    assert_eq!((code, body["reason"].as_str()), (401, Some("Unauthorized")), "without a token: {body}");
    let (code, body) = get_logs(&tenants, &format!("{base}/logs/team-a/pi"), Some(TEAM_B)).await;
    assert_eq!((code, body["reason"].as_str()), (403, Some("Forbidden")), "a user without RBAC: {body}");
    let message = body["message"].as_str().unwrap_or_default();
    for part in ["User \"team-b\"", "cannot get", "\"mpijobs/log\"", "\"mpiswarm.io\"", "namespace \"team-a\""] {
        assert!(message.contains(part), "{part} is not in {message}");
    }
    allow_logs(&client, "team-a").await;
    let (code, body) = get_logs(&tenants, &format!("{base}/logs/team-a/pi"), Some(TEAM_A)).await;
    assert_eq!((code, body["reason"].as_str()), (404, Some("NotFound")), "an allowed user, no such job: {body}");

    // What `mpiswarm logs` reads: the URL as written.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let recorded = tokio::time::timeout(common::DEADLINE, async {
        loop {
            let cm = cms.get_opt(mpiswarm_controller::framework_id::CONFIG_MAP).await.ok().flatten();
            let data = cm.and_then(|c| c.data).unwrap_or_default();
            if let Some(url) = data.get(mpiswarm_controller::framework_id::LOGS_URL_KEY) {
                return url.clone();
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the controller recorded no log endpoint within {:?}", common::DEADLINE));
    assert_eq!(reqwest::Url::parse(&recorded).ok().as_ref(), Some(&logs_url), "the recorded URL: {recorded}");
}
