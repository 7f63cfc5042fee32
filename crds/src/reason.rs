//! The reasons an `MpiJob`'s conditions carry: the one list of them, so the
//! controller can only write a reason that is declared here, and the
//! controller's README (whose test reads [`ConditionReason::ALL`]) can only
//! document reasons that exist. On the wire a reason stays the plain string
//! of a Kubernetes `Condition` (its variant's name); this module never reads
//! or writes a status.

/// Declares the enum, its complete [`ConditionReason::ALL`] and its
/// spelling from one list, so the three cannot disagree.
macro_rules! condition_reasons {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// Why a condition has its status. The variant's name is the
        /// `reason` written into the condition, CamelCase as Kubernetes wants.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ConditionReason {
            $($(#[$doc])* $name,)*
        }

        impl ConditionReason {
            /// Every reason, in declaration order.
            pub const ALL: &'static [ConditionReason] = &[$(ConditionReason::$name,)*];

            /// The reason as the condition carries it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ConditionReason::$name => stringify!($name),)*
                }
            }
        }
    };
}

condition_reasons! {
    /// `Created`: the controller accepted the job.
    Created,
    /// `Invalid`: the spec breaks a rule the schema cannot check (`validate()`).
    InvalidSpec,
    /// `Invalid`: the job's namespace does not allow its `spec.role`
    /// (annotation `mpiswarm.io/allowed-roles` on the Namespace).
    RoleNotAllowed,
    /// `Failed`: the job failed because it is invalid.
    Invalid,
    /// `Suspended` (and `Running`, `Unschedulable` cleared): `runPolicy.suspend` is true.
    Suspended,
    /// `Suspended` turned False: `runPolicy.suspend` was set back to false.
    Resumed,
    /// `Scheduled` (and `Unschedulable` cleared): the policy engine placed the gang.
    Placed,
    /// `Running` (and `Restarting` cleared): every worker and the launcher run.
    GangRunning,
    /// `Succeeded`: the launcher (`mpirun`) exited 0.
    LauncherSucceeded,
    /// `Failed`: the job ran longer than `runPolicy.activeDeadlineSeconds`.
    DeadlineExceeded,
    /// `Unschedulable`: the gang does not fit even on everything the cluster ever offered.
    ExceedsCluster,
    /// `Unschedulable`: the gang needs more than its role's quota limit (the
    /// offer layer's `--quota`) lets the role hold.
    ExceedsQuota,
    /// `Unschedulable`: no offer round placed the gang within `schedulingTimeoutSeconds`.
    GangDoesNotFit,
    /// `Restarting` or `Failed`: the launcher exited non-zero.
    LauncherFailed,
    /// `Restarting` or `Failed`: a worker failed while mpirun ran.
    WorkerFailed,
    /// `Restarting` or `Failed`: a worker exited while mpirun ran.
    WorkerExited,
    /// `Restarting` or `Failed`: a task could not start (missing image, refused TaskInfo).
    LaunchFailed,
    /// `Restarting` or `Failed`: a node was lost (TASK_LOST, UNREACHABLE, GONE...).
    NodeLost,
    /// `Restarting` or `Failed`: the gang was not all running within the launch timeout.
    LaunchTimeout,
    /// `Restarting`: the offer was rescinded or invalid; costs no restart.
    OfferRescinded,
    /// `Restarting`: the master dropped the launch, or the ACCEPT never reached it; costs no restart.
    LaunchDropped,
    /// `Restarting` or `Failed`: after a controller restart the master did not know a task.
    TaskUnknown,
    /// `Restarting` or `Failed`: a task was killed while the gang ran.
    TaskKilled,
    /// `Restarting` or `Failed`: a task ended in another terminal state.
    TaskEnded,
}

impl std::fmt::Display for ConditionReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_is_spelled_as_its_name_once() {
        let mut seen = std::collections::BTreeSet::new();
        for r in ConditionReason::ALL {
            assert_eq!(format!("{r:?}"), r.as_str(), "the wire spelling is the variant's name");
            assert!(seen.insert(r.as_str()), "{r} listed twice");
        }
        assert!(seen.contains("NodeLost") && seen.contains("GangDoesNotFit"));
    }
}
