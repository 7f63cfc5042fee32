//! [`TaskPlan`] -> Swarm API objects (bollard models): the service, the
//! networks, secrets and configs it references. Pure rendering; the checks
//! were made in [`crate::plan`], and nothing here talks to Docker.

use std::collections::HashMap;

use base64::Engine as _;
use bollard::models::{
    ConfigSpec, EndpointSpec, EndpointSpecModeEnum, Limit, NetworkAttachmentConfig, NetworkCreateRequest,
    ResourceObject, SecretSpec, ServiceSpec, ServiceSpecMode, ServiceSpecModeReplicated, TaskSpec,
    TaskSpecContainerSpec, TaskSpecContainerSpecConfigs, TaskSpecContainerSpecFile, TaskSpecContainerSpecFile1,
    TaskSpecContainerSpecSecrets, TaskSpecPlacement, TaskSpecResources, TaskSpecRestartPolicy,
    TaskSpecRestartPolicyConditionEnum,
};

use crate::labels;
use crate::plan::{FileKind, FilePlan, NetworkPlan, TaskPlan};

/// Swarm's object ids for the files of a plan, by object name.
pub type ObjectIds = HashMap<String, String>;

/// The service for `plan`, pinned to `node_id`. `ids` maps each file's
/// object name to the id Swarm gave the secret or config.
pub fn service_spec(plan: &TaskPlan, node_id: &str, ids: &ObjectIds) -> ServiceSpec {
    let labels: HashMap<String, String> = plan.labels.clone().into_iter().collect();
    let nano_cpus = (plan.cpus > 0.0).then(|| (plan.cpus * 1e9).round() as i64);
    let memory_bytes = (plan.mem_mib > 0.0).then(|| (plan.mem_mib * 1024.0 * 1024.0).round() as i64);
    let mut secrets = Vec::new();
    let mut configs = Vec::new();
    for file in &plan.files {
        let id = ids.get(&file.object_name).cloned();
        match file.kind {
            FileKind::Secret => secrets.push(TaskSpecContainerSpecSecrets {
                file: Some(TaskSpecContainerSpecFile {
                    name: Some(file.target.clone()),
                    uid: Some("0".into()),
                    gid: Some("0".into()),
                    mode: Some(file.mode),
                }),
                secret_id: id,
                secret_name: Some(file.object_name.clone()),
            }),
            FileKind::Config => configs.push(TaskSpecContainerSpecConfigs {
                file: Some(TaskSpecContainerSpecFile1 {
                    name: Some(file.target.clone()),
                    uid: Some("0".into()),
                    gid: Some("0".into()),
                    mode: Some(file.mode),
                }),
                config_id: id,
                config_name: Some(file.object_name.clone()),
                runtime: None,
            }),
        }
    }
    let networks: Vec<NetworkAttachmentConfig> = plan
        .networks
        .iter()
        .map(|n| NetworkAttachmentConfig {
            target: Some(n.name.clone()),
            aliases: Some(plan.aliases.clone()),
            driver_opts: None,
        })
        .collect();
    ServiceSpec {
        name: Some(plan.service_name.clone()),
        labels: Some(labels.clone()),
        task_template: Some(TaskSpec {
            container_spec: Some(TaskSpecContainerSpec {
                image: Some(plan.image.clone()),
                labels: Some(labels),
                command: plan.command.clone(),
                args: plan.args.clone(),
                hostname: Some(plan.hostname.clone()),
                env: Some(plan.env.clone()),
                secrets: Some(secrets),
                configs: Some(configs),
                ..Default::default()
            }),
            resources: Some(TaskSpecResources {
                limits: Some(Limit { nano_cpus, memory_bytes, pids: None }),
                reservations: Some(ResourceObject { nano_cpus, memory_bytes, generic_resources: None }),
                ..Default::default()
            }),
            // A task runs once: its exit is the Mesos task's end, and the
            // framework (not Swarm) decides whether to run it again.
            restart_policy: Some(TaskSpecRestartPolicy {
                condition: Some(TaskSpecRestartPolicyConditionEnum::NONE),
                max_attempts: Some(0),
                ..Default::default()
            }),
            placement: Some(TaskSpecPlacement {
                constraints: Some(vec![format!("node.id=={node_id}")]),
                ..Default::default()
            }),
            networks: Some(networks),
            ..Default::default()
        }),
        mode: Some(ServiceSpecMode {
            replicated: Some(ServiceSpecModeReplicated { replicas: Some(1) }),
            ..Default::default()
        }),
        // DNS round robin: peers reach the container itself (MPI needs every
        // port of it), not a virtual IP load balancer.
        endpoint_spec: Some(EndpointSpec { mode: Some(EndpointSpecModeEnum::DNSRR), ports: None }),
        ..Default::default()
    }
}

/// The attachable overlay for a task's network, owned by this agent.
pub fn network_request(network: &NetworkPlan, agent_id: &str) -> NetworkCreateRequest {
    NetworkCreateRequest {
        name: network.name.clone(),
        driver: Some(network.driver.clone()),
        attachable: Some(true),
        labels: Some(owner_labels(agent_id)),
        ..Default::default()
    }
}

pub fn secret_spec(file: &FilePlan, agent_id: &str) -> SecretSpec {
    SecretSpec {
        name: Some(file.object_name.clone()),
        labels: Some(file_labels(file, agent_id)),
        data: Some(base64::engine::general_purpose::STANDARD.encode(&file.data)),
        ..Default::default()
    }
}

pub fn config_spec(file: &FilePlan, agent_id: &str) -> ConfigSpec {
    ConfigSpec {
        name: Some(file.object_name.clone()),
        labels: Some(file_labels(file, agent_id)),
        data: Some(base64::engine::general_purpose::STANDARD.encode(&file.data)),
        ..Default::default()
    }
}

fn owner_labels(agent_id: &str) -> HashMap<String, String> {
    HashMap::from([
        (labels::MANAGED_BY.to_owned(), labels::MANAGED_BY_VALUE.to_owned()),
        (labels::AGENT_ID.to_owned(), agent_id.to_owned()),
    ])
}

fn file_labels(file: &FilePlan, agent_id: &str) -> HashMap<String, String> {
    let mut l = owner_labels(agent_id);
    l.insert(format!("{}target", labels::PREFIX), file.target.clone());
    l
}
