//! The Deployment of `manifests/30-controller.yaml` wires TLS and
//! credentials from Secrets, checked by running it: both containers start
//! as written (their args, their environment, their Secret volumes
//! materialized from a test CA at the mount paths, under a temp root), and
//! the controller subscribes to the offer layer over HTTPS with its own
//! credential. The offer layer refuses a client without credentials (401)
//! and does not speak plain HTTP. Kubernetes itself is the embedded API
//! server; what a test cannot take from the manifest is overridden and
//! said: listen addresses (loopback, a port the system picks), the
//! `valueFrom` fields, and `--kubeconfig` for the in-cluster config.

#[path = "../../controller/tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

const CONTROLLER_PRINCIPAL: &str = "mpiswarm-controller";
const CONTROLLER_SECRET: &str = "controller-s3cret";

/// A child process killed when the test ends, pass or panic.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn deployment() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/30-controller.yaml");
    let text = std::fs::read_to_string(&path).expect("manifests/30-controller.yaml");
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| <Value as serde::Deserialize>::deserialize(d).expect("a YAML document"))
        .find(|d| d["kind"] == "Deployment")
        .expect("a Deployment in manifests/30-controller.yaml")
}

/// What the Secrets hold, made from a test CA as an operator would.
fn secrets(pki: &mpiswarm_testkit::TestPki) -> BTreeMap<&'static str, BTreeMap<&'static str, String>> {
    let read = |p: &Path| std::fs::read_to_string(p).expect("a test PKI file");
    let credentials = format!(
        r#"{{"credentials":[{{"principal":"{CONTROLLER_PRINCIPAL}","secret":"{CONTROLLER_SECRET}"}},{{"principal":"mpiswarm-agent","secret":"agent-s3cret"}}]}}"#
    );
    BTreeMap::from([
        (
            "mpiswarm-offers-tls",
            BTreeMap::from([
                ("tls.crt", read(&pki.cert_file)),
                ("tls.key", read(&pki.key_file)),
                ("ca.crt", read(&pki.ca_file)),
            ]),
        ),
        (
            "mpiswarm-credentials",
            BTreeMap::from([
                ("credentials.json", credentials),
                ("controller", format!("{CONTROLLER_PRINCIPAL} {CONTROLLER_SECRET}\n")),
            ]),
        ),
    ])
}

/// A container of the Deployment, its volumes materialized under `root`.
struct Container {
    args: Vec<String>,
    env: Vec<(String, String)>,
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
            .unwrap_or_else(|| panic!("no container {name} in the Deployment"));
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
        let mut container = Self { args, env, mounts };
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

    fn command(&self, overrides: &[(&str, &str)], log: &Path) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mpiswarm"));
        cmd.args(&self.args).env_clear().env("PATH", std::env::var("PATH").unwrap_or_default());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        for (k, v) in overrides {
            cmd.env(k, v);
        }
        cmd.stdout(Stdio::null()).stderr(std::fs::File::create(log).expect("a log file"));
        cmd
    }
}

/// The URL the offer layer printed (`... listening on URL`), within the deadline.
fn printed_url(log: &Path) -> String {
    let started = std::time::Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.contains("listening on ")) {
            return line.split("listening on ").nth(1).expect("a URL").trim().to_owned();
        }
        assert!(started.elapsed() < common::DEADLINE, "the offer layer printed no address: {text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deployment_runs_as_written_and_the_controller_subscribes_over_tls_with_its_credential() {
    let pki = mpiswarm_testkit::TestPki::new();
    let secrets = secrets(&pki);
    let stack = common::Stack::without_controller(vec![]).await;
    let root = stack.dir.path().join("pod");
    let d = deployment();
    let pod = &d["spec"]["template"]["spec"];
    let offers = Container::of(pod, "offers", &root, &secrets);
    let controller = Container::of(pod, "controller", &root, &secrets);

    // The offer layer, as written but on a loopback port the system picks.
    let offers_log = root.join("offers.log");
    let _offers =
        Process(offers.command(&[("MPISWARM_OFFERS_LISTEN", "127.0.0.1:0")], &offers_log).spawn().expect("offers"));
    let url = printed_url(&offers_log);
    assert!(url.starts_with("https://"), "the offer layer serves {url}, not HTTPS");
    let port = url.rsplit(':').next().expect("a port").trim_end_matches('/');

    // The controller, as written: its master is the sidecar over loopback.
    let master = controller.env("MPISWARM_MASTER");
    assert_eq!(master, "https://localhost:5050", "the controller's master in the Deployment");
    let master = master.replace(":5050", &format!(":{port}"));
    let kubeconfig = stack.api.kubeconfig.to_str().expect("UTF-8").to_owned();
    let controller_log = root.join("controller.log");
    let overrides = [
        ("MPISWARM_MASTER", master.as_str()),
        ("MPISWARM_CONTROLLER_LISTEN", "127.0.0.1:0"),
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
}
