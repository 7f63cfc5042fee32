//! Creating and removing what a task group needs on Swarm: networks, then
//! secrets and configs, then the services, all or nothing; and the garbage
//! collection of networks, secrets and configs no service of this agent
//! references any more.
//!
//! Removing a task's service ends with it gone ([`Objects::remove_service`]):
//! Swarm removes a service's containers, and then lets its networks,
//! secrets and configs go, only after `docker service rm` returned; a task's
//! terminal status waits for that, so that a job whose tasks all ended has
//! nothing left on Swarm.
//!
//! The two are ordered by [`Objects`], the only way in: a launch and a
//! collection never overlap, so a collection never removes the network,
//! secret or config of a service a concurrent launch is about to create
//! (until the service exists, nothing references them). It holds an async
//! mutex across the Swarm calls (a tokio one, made to be held across
//! `.await`) and no std lock.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bollard::models::Service;

use crate::existing::{NetworkRefusal, TrustedVolumes, VolumeLookup, VolumeRefusal, check_network, check_volume};
use crate::mounts::{MountPlan, VolumeOptions};
use crate::plan::{FileKind, NetworkPlan, TaskPlan};
use crate::spec::{self, ObjectIds};
use crate::swarm::{ObjectKind, Owned, Swarm, SwarmError};

/// How often a service whose network vanished under it is tried again.
const MISSING_NETWORK_RETRIES: u32 = 3;

/// The longest a removal waits for Swarm to let a service's containers and
/// objects go. The controller waits 20 s per pass for a KILL's terminal
/// update (and then sends the KILL again, which is harmless): a normal
/// teardown takes a few seconds.
const GONE_DEADLINE: Duration = Duration::from_secs(15);

/// How often a removal looks whether Swarm is done.
const GONE_POLL: Duration = Duration::from_millis(250);

/// One launch in the queue: counted from `enter` until dropped.
struct InQueue<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> InQueue<'a> {
    fn enter(depth: &'a std::sync::atomic::AtomicUsize) -> Self {
        depth.fetch_add(1, Ordering::Relaxed);
        Self(depth)
    }
}

impl Drop for InQueue<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Why a group did not start, and which task was the cause.
#[derive(Debug, thiserror::Error)]
#[error("launching task '{task_id}' failed: {source}")]
pub struct LaunchFailure {
    pub task_id: String,
    #[source]
    pub source: LaunchError,
}

/// What stopped a launch: Docker, or what it found already there.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(transparent)]
    Swarm(#[from] SwarmError),
    #[error(transparent)]
    Volume(#[from] VolumeRefusal),
    #[error(transparent)]
    Network(#[from] NetworkRefusal),
}

/// Which existing named volumes a task may mount ([`crate::existing`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct VolumeRules<'a> {
    /// The driver options a task may create a volume with.
    pub(crate) allowed: &'a VolumeOptions,
    /// The volumes the operator vouches for.
    pub(crate) trusted: &'a TrustedVolumes,
}

/// The agent's networks, secrets and configs: launches and collections,
/// one at a time, and whether a collection is due.
///
/// Launches queue on `order` in the order they came (tokio's mutex is
/// fair): that is the node's launch queue, and `queued` its depth. It is
/// bounded by the offer layer, which offers an agent to no one while
/// `--agent-launch-backlog` of its tasks are launched and not yet started.
pub(crate) struct Objects {
    order: tokio::sync::Mutex<()>,
    /// Task groups waiting for their launch or being created now.
    queued: std::sync::atomic::AtomicUsize,
    /// Something may have become garbage (a service went, a launch failed,
    /// a collection left busy objects).
    due: AtomicBool,
}

impl Objects {
    /// A collection is due at start: a previous incarnation may have left garbage.
    pub(crate) fn new() -> Self {
        Self { order: tokio::sync::Mutex::new(()), queued: Default::default(), due: AtomicBool::new(true) }
    }

    /// Creates every object and service of `plans`, all or nothing (see
    /// [`launch_group`]), while no collection runs.
    pub(crate) async fn launch<S: Swarm>(
        &self,
        swarm: &S,
        node_id: &str,
        agent_id: &str,
        plans: &[TaskPlan],
        volumes: VolumeRules<'_>,
    ) -> Result<(), LaunchFailure> {
        let result = {
            // Counted until this launch is done, also if it is dropped midway.
            let _queued = InQueue::enter(&self.queued);
            let _order = self.order.lock().await;
            launch_group(swarm, node_id, agent_id, plans, volumes).await
        };
        if result.is_err() {
            self.collect_later();
        }
        result
    }

    /// Task groups waiting for their launch or being created now.
    pub(crate) fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Removes the service `name` and waits (at most [`GONE_DEADLINE`]) until
    /// it is gone: nothing of it left on `node_id` (see
    /// [`Swarm::service_left`]), and none of the networks, secrets and
    /// configs it used left among this agent's, unless another of its
    /// services uses them (the node's last task of a job takes them along).
    /// Returns the names of the objects collected meanwhile. What is still
    /// there at the deadline is left to later collections.
    pub(crate) async fn remove_service<S: Swarm>(
        &self,
        swarm: &S,
        node_id: &str,
        agent_id: &str,
        name: &str,
    ) -> Result<Vec<String>, SwarmError> {
        // Listed before it goes, for its id and what it uses; not listed
        // when a removal under way (the resync's of a task that ended, met
        // by a KILL) got there first: its containers are still waited for.
        let service = swarm.services(agent_id).await?.into_iter().find(|s| service_name(s) == Some(name));
        swarm.remove_service(name).await?;
        self.collect_later();
        let deadline = tokio::time::Instant::now() + GONE_DEADLINE;
        let late = |what: &str| {
            tracing::warn!(
                service = name,
                "{what} still there {}s after the removal; collecting later",
                GONE_DEADLINE.as_secs()
            );
        };
        let id = service.as_ref().and_then(|s| s.id.as_deref());
        while swarm.service_left(node_id, name, id).await? {
            if tokio::time::Instant::now() >= deadline {
                late("its containers are");
                return Ok(Vec::new());
            }
            tokio::time::sleep(GONE_POLL).await;
        }
        // What it used; unknown when it was not listed: then every object
        // still busy may be one of them.
        let used: Option<HashSet<String>> = service.as_ref().map(|s| references(s).collect());
        let mine = |o: &Owned| used.as_ref().is_none_or(|u| u.contains(&o.id) || u.contains(&o.name));
        let mut removed = Vec::new();
        loop {
            let collected = self.collect(swarm, agent_id).await?;
            removed.extend(collected.removed);
            if !collected.busy.iter().any(mine) {
                return Ok(removed);
            }
            if tokio::time::Instant::now() >= deadline {
                late("its networks, secrets or configs are");
                return Ok(removed);
            }
            tokio::time::sleep(GONE_POLL).await;
        }
    }

    /// Marks a collection as due.
    pub(crate) fn collect_later(&self) {
        self.due.store(true, Ordering::SeqCst);
    }

    /// Whether a collection is due.
    pub(crate) fn due(&self) -> bool {
        self.due.load(Ordering::SeqCst)
    }

    /// Collects the garbage (see [`collect_garbage`]) while no launch runs;
    /// what could not be removed yet is collected at a later call.
    pub(crate) async fn collect<S: Swarm>(&self, swarm: &S, agent_id: &str) -> Result<Collected, SwarmError> {
        let _order = self.order.lock().await;
        self.due.store(false, Ordering::SeqCst);
        let result = collect_garbage(swarm, agent_id).await;
        if result.as_ref().map_or(true, |c| !c.busy.is_empty()) {
            self.collect_later();
        }
        result
    }
}

/// Checks the named volumes of `plans` that exist on the node, before
/// anything is created.
async fn check_volumes<S: Swarm>(
    swarm: &S,
    node_id: &str,
    plans: &[TaskPlan],
    rules: VolumeRules<'_>,
) -> Result<(), LaunchFailure> {
    let mut checked = HashSet::new();
    for plan in plans {
        let fail = |source: LaunchError| LaunchFailure { task_id: plan.task_id.value.clone(), source };
        for mount in &plan.mounts {
            let MountPlan::Volume { name, .. } = mount else { continue };
            if !checked.insert(name.as_str()) {
                continue;
            }
            let found = if rules.trusted.contains(name) {
                VolumeLookup::Absent
            } else {
                swarm.volume(name).await.map_err(|e| fail(e.into()))?
            };
            check_volume(name, node_id, &found, rules.allowed, rules.trusted).map_err(|e| fail(e.into()))?;
        }
    }
    Ok(())
}

/// Makes the job's overlay unless it exists, and joins an existing one
/// only if the agents made it for the same job. Another node's agent may be
/// making it this very moment: then its network is checked instead.
async fn ensure_network<S: Swarm>(swarm: &S, network: &NetworkPlan, agent_id: &str) -> Result<(), LaunchError> {
    // A network found after a conflict may be collected by its maker before
    // it is listed; a few rounds settle it.
    for _ in 0..3 {
        if let Some(existing) = swarm.network(&network.name).await? {
            return Ok(check_network(&existing, &network.owner)?);
        }
        if swarm.create_network(spec::network_request(network, agent_id)).await? {
            return Ok(());
        }
    }
    Err(SwarmError::NetworkVanished { name: network.name.clone() }.into())
}

/// Creates every object and service of `plans`. On failure, removes the
/// services it created, so the group leaves nothing running; the caller then
/// collects the garbage.
async fn launch_group<S: Swarm>(
    swarm: &S,
    node_id: &str,
    agent_id: &str,
    plans: &[TaskPlan],
    volumes: VolumeRules<'_>,
) -> Result<(), LaunchFailure> {
    check_volumes(swarm, node_id, plans, volumes).await?;
    let mut created: Vec<&str> = Vec::new();
    let result = async {
        let mut networks = HashSet::new();
        for plan in plans {
            let fail = |source: LaunchError| LaunchFailure { task_id: plan.task_id.value.clone(), source };
            let swarm_fail = |source: SwarmError| fail(source.into());
            for network in &plan.networks {
                if networks.insert((&network.name, &network.owner)) {
                    ensure_network(swarm, network, agent_id).await.map_err(fail)?;
                }
            }
            let mut ids = ObjectIds::new();
            for file in &plan.files {
                let id = match file.kind {
                    FileKind::Secret => swarm.ensure_secret(spec::secret_spec(file, agent_id)).await,
                    FileKind::Config => swarm.ensure_config(spec::config_spec(file, agent_id)).await,
                }
                .map_err(swarm_fail)?;
                ids.insert(file.object_name.clone(), id);
            }
            let spec = spec::service_spec(plan, node_id, &ids);
            let mut attempts = 0;
            loop {
                match swarm.create_service(spec.clone()).await {
                    Ok(_) => break,
                    // The job's overlay is shared by every node's agent, and
                    // the agent that made it collects it once none of its
                    // own services uses it: between a gang's kill and its
                    // restart that can be the moment after this launch
                    // found it. Make it again and retry.
                    Err(e) if e.is_missing_network() && attempts < MISSING_NETWORK_RETRIES => {
                        attempts += 1;
                        tracing::info!(service = %plan.service_name, error = %e, "the job's network went meanwhile; making it again");
                        for network in &plan.networks {
                            ensure_network(swarm, network, agent_id).await.map_err(fail)?;
                        }
                    }
                    Err(e) => return Err(swarm_fail(e)),
                }
            }
            created.push(&plan.service_name);
        }
        Ok(())
    }
    .await;
    if result.is_err() {
        for name in created {
            if let Err(e) = swarm.remove_service(name).await {
                tracing::warn!(service = name, error = %e, "could not roll back a service of a failed group");
            }
        }
    }
    result
}

/// What a garbage collection did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Collected {
    pub removed: Vec<String>,
    /// Unreferenced objects Swarm would not remove yet (a container of a
    /// removed service still stopping, or another agent's service using
    /// them): collect again later.
    pub busy: Vec<Owned>,
}

fn service_name(service: &Service) -> Option<&str> {
    service.spec.as_ref()?.name.as_deref()
}

/// The networks, secrets and configs `service` uses, by id and by name.
fn references(service: &Service) -> impl Iterator<Item = String> + '_ {
    let template = service.spec.as_ref().and_then(|s| s.task_template.as_ref());
    let networks = template.into_iter().flat_map(|t| t.networks.iter().flatten()).flat_map(|n| n.target.clone());
    let container = template.and_then(|t| t.container_spec.as_ref());
    let secrets = container
        .into_iter()
        .flat_map(|c| c.secrets.iter().flatten())
        .flat_map(|s| s.secret_id.clone().into_iter().chain(s.secret_name.clone()));
    let configs = container
        .into_iter()
        .flat_map(|c| c.configs.iter().flatten())
        .flat_map(|c| c.config_id.clone().into_iter().chain(c.config_name.clone()));
    networks.chain(secrets).chain(configs)
}

/// Removes this agent's networks, secrets and configs that none of its
/// services references.
async fn collect_garbage<S: Swarm>(swarm: &S, agent_id: &str) -> Result<Collected, SwarmError> {
    let services = swarm.services(agent_id).await?;
    let used: HashSet<String> = services.iter().flat_map(references).collect();
    let mut collected = Collected::default();
    for kind in [ObjectKind::Secret, ObjectKind::Config, ObjectKind::Network] {
        for object in swarm.owned(kind, agent_id).await? {
            if used.contains(&object.id) || used.contains(&object.name) {
                continue;
            }
            match swarm.remove(kind, &object.id).await {
                Ok(()) => collected.removed.push(object.name),
                Err(e) => {
                    tracing::debug!(name = %object.name, error = %e, "still in use; collecting later");
                    collected.busy.push(object);
                }
            }
        }
    }
    Ok(collected)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_swarm::{FakeSwarm, Hold};
    use crate::plan::{FilePlan, LaunchContext};
    use mpiswarm_mesos::task::{CommandInfo, ContainerInfo, NetworkInfo};
    use mpiswarm_mesos::{AgentId, FrameworkId, TaskInfo};
    use std::sync::Arc;
    use std::task::Poll;

    fn plan(name: &str) -> TaskPlan {
        plan_with(name, |_| {})
    }

    /// A task of job `uid-1` on network `net`, changed by `tweak` before planning.
    fn plan_with(name: &str, tweak: impl FnOnce(&mut TaskInfo)) -> TaskPlan {
        let mut t = TaskInfo::new(name, name, &AgentId::new("A"));
        t.labels = Some(mpiswarm_mesos::Labels::from_pairs([("mpiswarm.io/job-uid", "uid-1")]));
        t.command = Some(CommandInfo::shell("true"));
        let mut c = ContainerInfo::docker("img");
        c.network_infos = vec![NetworkInfo { name: Some("net".into()), ..NetworkInfo::default() }];
        t.container = Some(c);
        t.command.as_mut().unwrap().uris = vec![mpiswarm_mesos::task::CommandUri {
            value: "data:,hosts".into(),
            executable: None,
            extract: None,
            cache: None,
            output_file: Some("/etc/mpi/hostfile".into()),
        }];
        tweak(&mut t);
        let fw = FrameworkId::new("F");
        TaskPlan::from_task_info(
            &t,
            &LaunchContext {
                agent_id: "A",
                framework_id: &fw,
                framework_role: None,
                executor_id: None,
                host_paths: &crate::mounts::HostPaths::none(),
                volume_options: &crate::mounts::VolumeOptions::none(),
            },
        )
        .unwrap()
    }

    fn no_volume_rules() -> (VolumeOptions, TrustedVolumes) {
        (VolumeOptions::none(), TrustedVolumes::default())
    }

    fn rules<'a>((allowed, trusted): &'a (VolumeOptions, TrustedVolumes)) -> VolumeRules<'a> {
        VolumeRules { allowed, trusted }
    }

    #[tokio::test]
    async fn a_group_whose_second_service_fails_leaves_nothing_after_collection() {
        let plans = vec![plan("a"), plan("b")];
        let swarm = FakeSwarm { refuse_service: Some(plans[1].service_name.clone()), ..Default::default() };
        let err = launch_group(&swarm, "node", "A", &plans, rules(&no_volume_rules())).await.unwrap_err();
        assert_eq!(err.task_id, "b");
        assert!(swarm.names().iter().all(|(k, _)| k != "service"), "{:?}", swarm.names());
        collect_garbage(&swarm, "A").await.unwrap();
        assert!(swarm.names().is_empty(), "left behind: {:?}", swarm.names());
    }

    #[tokio::test]
    async fn collection_keeps_what_a_live_service_references() {
        let plans = vec![plan("a"), plan("b")];
        let swarm = FakeSwarm::default();
        launch_group(&swarm, "node", "A", &plans, rules(&no_volume_rules())).await.unwrap();
        swarm.remove_service(&plans[0].service_name).await.unwrap();
        collect_garbage(&swarm, "A").await.unwrap();
        let left = swarm.names();
        assert!(left.contains(&("network".into(), "net".into())), "{left:?}");
        let FilePlan { object_name, .. } = &plans[1].files[0];
        assert!(left.contains(&("config".into(), object_name.clone())), "{left:?}");
        swarm.remove_service(&plans[1].service_name).await.unwrap();
        collect_garbage(&swarm, "A").await.unwrap();
        assert!(swarm.names().is_empty(), "{:?}", swarm.names());
    }

    #[tokio::test]
    async fn removing_the_last_service_of_a_job_returns_once_its_objects_are_gone() {
        let plans = vec![plan("a"), plan("b")];
        let swarm = FakeSwarm::default();
        let objects = Objects::new();
        objects.launch(&swarm, "node", "A", &plans, rules(&no_volume_rules())).await.unwrap();
        let removed = objects.remove_service(&swarm, "node", "A", &plans[0].service_name).await.unwrap();
        assert!(removed.is_empty(), "a sibling still uses them: {removed:?}");
        assert!(swarm.names().contains(&("network".into(), "net".into())), "{:?}", swarm.names());
        let removed = objects.remove_service(&swarm, "node", "A", &plans[1].service_name).await.unwrap();
        assert!(swarm.names().is_empty(), "left behind: {:?}", swarm.names());
        assert!(removed.contains(&"net".to_owned()), "{removed:?}");
    }

    #[tokio::test]
    async fn a_collection_never_removes_the_objects_of_a_launch_under_way() {
        let hold = Arc::new(Hold::default());
        let swarm = Arc::new(FakeSwarm { hold: Some(Arc::clone(&hold)), ..Default::default() });
        let objects = Arc::new(Objects::new());
        let plans = vec![plan("a")];
        let config = ("config".to_owned(), plans[0].files[0].object_name.clone());
        let network = ("network".to_owned(), "net".to_owned());
        let launch = {
            let (swarm, objects, plans) = (Arc::clone(&swarm), Arc::clone(&objects), plans.clone());
            tokio::spawn(async move { objects.launch(&*swarm, "node", "A", &plans, rules(&no_volume_rules())).await })
        };
        // The launch made the network and the config and is creating the
        // service: until it exists, nothing references them.
        hold.entered.notified().await;
        assert!(swarm.names().contains(&network) && swarm.names().contains(&config), "{:?}", swarm.names());
        let collection = objects.collect(&*swarm, "A");
        tokio::pin!(collection);
        // A collection that does not wait for the launch runs to its end here.
        let early = futures::poll!(&mut collection);
        hold.release.notify_one();
        launch.await.unwrap().unwrap();
        let collected = match early {
            Poll::Ready(collected) => collected,
            Poll::Pending => collection.await,
        }
        .unwrap();
        assert!(collected.removed.is_empty(), "a collection removed {:?} from under a launch", collected.removed);
        let left = swarm.names();
        assert!(left.contains(&network) && left.contains(&config), "the launched task lost its objects: {left:?}");
        assert!(left.contains(&("service".to_owned(), plans[0].service_name.clone())), "{left:?}");
        assert!(!objects.due(), "nothing is left to collect");
    }

    fn with_volume(name: &str, volume: &str) -> TaskPlan {
        plan_with(name, |t| {
            let v = serde_json::json!({"container_path": "/data", "mode": "RW",
                "source": {"type": "DOCKER_VOLUME", "docker_volume": {"name": volume}}});
            t.container.as_mut().unwrap().volumes.push(serde_json::from_value(v).unwrap());
        })
    }

    fn bind_volume() -> VolumeLookup {
        VolumeLookup::Found(crate::existing::ExistingVolume {
            driver: "local".into(),
            options: [("type", "none"), ("o", "bind"), ("device", "/tmp/x")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        })
    }

    #[tokio::test]
    async fn an_existing_volume_that_binds_a_node_path_stops_the_group_before_anything_is_made() {
        let plans = vec![plan("a"), with_volume("b", "rootfs")];
        let swarm = FakeSwarm { volumes: [("rootfs".to_owned(), bind_volume())].into(), ..Default::default() };
        let err = launch_group(&swarm, "node-1", "A", &plans, rules(&no_volume_rules())).await.unwrap_err();
        assert_eq!(err.task_id, "b");
        assert!(matches!(err.source, LaunchError::Volume(VolumeRefusal::Unsafe { .. })), "{err}");
        let text = err.to_string();
        assert!(text.contains("volume 'rootfs' already exists on node node-1") && text.contains("o=bind"), "{text}");
        assert!(swarm.names().is_empty(), "nothing is made for a refused group: {:?}", swarm.names());

        // The operator vouches for it by name: mounted as it is.
        let vouched = (VolumeOptions::none(), TrustedVolumes::new(["rootfs".to_owned()]));
        launch_group(&swarm, "node-1", "A", &plans, rules(&vouched)).await.unwrap();
        // A volume the agent cannot see on its node is not mounted blind.
        let blind = FakeSwarm { volumes: [("v".to_owned(), VolumeLookup::Unseen)].into(), ..Default::default() };
        let err =
            launch_group(&blind, "node-2", "A", &[with_volume("c", "v")], rules(&no_volume_rules())).await.unwrap_err();
        assert!(matches!(err.source, LaunchError::Volume(VolumeRefusal::Unseen { .. })), "{err}");
    }

    #[tokio::test]
    async fn a_task_joins_the_network_its_job_made_and_no_other() {
        let swarm = FakeSwarm::default();
        launch_group(&swarm, "node", "A", &[plan("a")], rules(&no_volume_rules())).await.unwrap();
        // Another agent's task of the same job joins the network the first made.
        launch_group(&swarm, "node", "B", &[plan("b")], rules(&no_volume_rules())).await.unwrap();
        let other_job = plan_with("c", |t| {
            t.labels = Some(mpiswarm_mesos::Labels::from_pairs([("mpiswarm.io/job-uid", "uid-2")]));
        });
        let err = launch_group(&swarm, "node", "A", &[other_job], rules(&no_volume_rules())).await.unwrap_err();
        assert!(matches!(err.source, LaunchError::Network(NetworkRefusal::OtherJob { .. })), "{err}");
        assert!(err.to_string().contains("belongs to another job (framework 'F', job uid 'uid-1')"), "{err}");
        assert!(!swarm.names().contains(&("service".to_owned(), "c".to_owned())));

        // An overlay someone else made under the name a task asks for.
        let foreign = FakeSwarm::default();
        foreign.networks.lock().unwrap().insert(
            "net".into(),
            crate::existing::ExistingNetwork {
                name: "net".into(),
                driver: "overlay".into(),
                scope: "swarm".into(),
                labels: Default::default(),
            },
        );
        let err = launch_group(&foreign, "node", "A", &[plan("d")], rules(&no_volume_rules())).await.unwrap_err();
        assert!(matches!(err.source, LaunchError::Network(NetworkRefusal::NotMpiswarm { .. })), "{err}");
        assert!(foreign.names().is_empty(), "{:?}", foreign.names());
    }
}
