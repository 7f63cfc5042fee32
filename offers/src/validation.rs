//! Scheduler call validation, in the order and words of Mesos'
//! `validation::scheduler::call::validate`: the checks that need no state.
//! A failure is answered `400 Failed to validate scheduler::Call: <why>`.
//! Success is a [`CheckedCall`] that carries what was checked (the
//! framework id, the sub-message the call type needs) in its type, so the
//! master never has to trust that a field "was validated" elsewhere.
//! Never looks at the master's books.

use mpiswarm_mesos::FrameworkId;
use mpiswarm_mesos::scheduler::{
    Accept, Acknowledge, Call, CallType, Decline, Kill, Message, Reconcile, Shutdown, Subscribe,
};

/// A scheduler call whose shape is valid.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckedCall {
    /// SUBSCRIBE; any outer `framework_id` equals `framework_info.id`.
    Subscribe(Subscribe),
    /// Every other call, from the framework `framework_id`.
    Framework { framework_id: FrameworkId, call: FrameworkCall },
}

/// A non-SUBSCRIBE call with the sub-message its type needs.
#[derive(Debug, Clone, PartialEq)]
pub enum FrameworkCall {
    Teardown,
    Accept(Accept),
    Decline(Decline),
    /// REVIVE of these roles (all of the framework's when empty).
    Revive(Vec<String>),
    /// SUPPRESS of these roles (all of the framework's when empty).
    Suppress(Vec<String>),
    Kill(Kill),
    Shutdown(Shutdown),
    /// ACKNOWLEDGE; its uuid is 16 bytes.
    Acknowledge(Acknowledge),
    Reconcile(Reconcile),
    Message(Message),
    /// UPDATE_FRAMEWORK; its `framework_info.id`, if set, is the caller's.
    UpdateFramework(Subscribe),
    /// Calls the offer layer accepts and has nothing to do for: REQUEST
    /// (Mesos' allocator ignores it too), inverse offers, operation feedback.
    Ignored(CallType),
    /// `type: UNKNOWN`.
    Unknown,
}

impl FrameworkCall {
    /// Whether Mesos answers this call `200 OK` rather than `202 Accepted`.
    pub fn answers_ok(&self) -> bool {
        matches!(self, Self::UpdateFramework(_))
    }
}

/// `Expecting '<field>' to be present`, with the field named after the call type.
fn missing(kind: CallType) -> String {
    let field = serde_json::to_value(kind).ok().and_then(|v| v.as_str().map(str::to_lowercase)).unwrap_or_default();
    format!("Expecting '{field}' to be present")
}

/// Checks a call's shape: `type`, the sub-message its type needs, ids, uuids.
pub fn validate_call(call: Call) -> Result<CheckedCall, String> {
    let kind = call.kind.ok_or("Expecting 'type' to be present")?;
    if kind == CallType::Subscribe {
        let subscribe = call.subscribe.ok_or("Expecting 'subscribe' to be present")?;
        if call.framework_id.is_some() && call.framework_id != subscribe.framework_info.id {
            return Err("'framework_id' differs from 'subscribe.framework_info.id'".into());
        }
        return Ok(CheckedCall::Subscribe(subscribe));
    }
    let framework_id = call.framework_id.ok_or("Expecting 'framework_id' to be present")?;
    let checked = match kind {
        CallType::Accept => FrameworkCall::Accept(call.accept.ok_or_else(|| missing(kind))?),
        CallType::Decline => FrameworkCall::Decline(call.decline.ok_or_else(|| missing(kind))?),
        CallType::Kill => FrameworkCall::Kill(call.kill.ok_or_else(|| missing(kind))?),
        CallType::Shutdown => FrameworkCall::Shutdown(call.shutdown.ok_or_else(|| missing(kind))?),
        CallType::Reconcile => FrameworkCall::Reconcile(call.reconcile.ok_or_else(|| missing(kind))?),
        CallType::Message => FrameworkCall::Message(call.message.ok_or_else(|| missing(kind))?),
        CallType::Acknowledge => {
            let ack = call.acknowledge.ok_or_else(|| missing(kind))?;
            if ack.uuid.as_slice().len() != 16 {
                return Err(format!(
                    "Failed to parse 'acknowledge.uuid': a UUID is 16 bytes, got {} bytes",
                    ack.uuid.as_slice().len()
                ));
            }
            FrameworkCall::Acknowledge(ack)
        }
        CallType::UpdateFramework => {
            let update = call.update_framework.ok_or_else(|| missing(kind))?;
            if update.framework_info.id.as_ref().is_some_and(|id| *id != framework_id) {
                return Err("'framework_id' differs from 'update_framework.framework_info.id'".into());
            }
            FrameworkCall::UpdateFramework(update)
        }
        ignored @ (CallType::AcceptInverseOffers
        | CallType::DeclineInverseOffers
        | CallType::AcknowledgeOperationStatus
        | CallType::ReconcileOperations
        | CallType::Request) => {
            let present = match ignored {
                CallType::AcceptInverseOffers => call.accept_inverse_offers.is_some(),
                CallType::DeclineInverseOffers => call.decline_inverse_offers.is_some(),
                CallType::AcknowledgeOperationStatus => call.acknowledge_operation_status.is_some(),
                CallType::ReconcileOperations => call.reconcile_operations.is_some(),
                _ => call.request.is_some(),
            };
            if !present {
                return Err(missing(kind));
            }
            FrameworkCall::Ignored(ignored)
        }
        CallType::Revive => FrameworkCall::Revive(call.revive.map(|r| r.roles).unwrap_or_default()),
        CallType::Suppress => FrameworkCall::Suppress(call.suppress.map(|r| r.roles).unwrap_or_default()),
        CallType::Teardown => FrameworkCall::Teardown,
        CallType::Unknown => FrameworkCall::Unknown,
        // Handled above; kept here so the match stays exhaustive.
        CallType::Subscribe => return Err("Expecting 'subscribe' to be present".into()),
    };
    Ok(CheckedCall::Framework { framework_id, call: checked })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(json: &str) -> Call {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn each_call_type_needs_its_own_sub_message() {
        let err = validate_call(call(r#"{"type":"ACCEPT_INVERSE_OFFERS","framework_id":{"value":"f"}}"#)).unwrap_err();
        assert_eq!(err, "Expecting 'accept_inverse_offers' to be present");
        let err = validate_call(call(r#"{"type":"ACCEPT","framework_id":{"value":"f"}}"#)).unwrap_err();
        assert_eq!(err, "Expecting 'accept' to be present");
        let revive = validate_call(call(r#"{"type":"REVIVE","framework_id":{"value":"f"}}"#)).unwrap();
        assert_eq!(
            revive,
            CheckedCall::Framework { framework_id: FrameworkId::new("f"), call: FrameworkCall::Revive(Vec::new()) }
        );
        assert!(validate_call(call(r#"{"type":"TEARDOWN","framework_id":{"value":"f"}}"#)).is_ok());
    }

    #[test]
    fn the_checked_call_carries_its_sub_message() {
        let c = call(r#"{"type":"KILL","framework_id":{"value":"f"},"kill":{"task_id":{"value":"t1"}}}"#);
        let CheckedCall::Framework { framework_id, call: FrameworkCall::Kill(kill) } = validate_call(c).unwrap() else {
            panic!("a KILL call");
        };
        assert_eq!((framework_id.value.as_str(), kill.task_id.value.as_str()), ("f", "t1"));
    }

    #[test]
    fn type_and_framework_id_come_first() {
        assert_eq!(validate_call(call(r#"{}"#)).unwrap_err(), "Expecting 'type' to be present");
        assert_eq!(
            validate_call(call(r#"{"type":"KILL","kill":{"task_id":{"value":"t"}}}"#)).unwrap_err(),
            "Expecting 'framework_id' to be present"
        );
    }

    #[test]
    fn an_acknowledge_uuid_must_be_16_bytes() {
        let c = call(
            r#"{"type":"ACKNOWLEDGE","framework_id":{"value":"f"},"acknowledge":{"agent_id":{"value":"a"},"task_id":{"value":"t"},"uuid":"AAEC"}}"#,
        );
        assert_eq!(
            validate_call(c).unwrap_err(),
            "Failed to parse 'acknowledge.uuid': a UUID is 16 bytes, got 3 bytes"
        );
    }

    #[test]
    fn a_subscribe_with_a_different_outer_framework_id_is_refused() {
        let c = call(
            r#"{"type":"SUBSCRIBE","framework_id":{"value":"a"},"subscribe":{"framework_info":{"user":"u","name":"n"}}}"#,
        );
        assert_eq!(validate_call(c).unwrap_err(), "'framework_id' differs from 'subscribe.framework_info.id'");
    }

    #[test]
    fn an_update_framework_for_another_framework_is_refused() {
        let c = call(
            r#"{"type":"UPDATE_FRAMEWORK","framework_id":{"value":"a"},"update_framework":{"framework_info":{"user":"u","name":"n","id":{"value":"b"}}}}"#,
        );
        assert_eq!(validate_call(c).unwrap_err(), "'framework_id' differs from 'update_framework.framework_info.id'");
        assert!(matches!(
            validate_call(call(
                r#"{"type":"UPDATE_FRAMEWORK","framework_id":{"value":"a"},"update_framework":{"framework_info":{"user":"u","name":"n"}}}"#
            )),
            Ok(CheckedCall::Framework { call: FrameworkCall::UpdateFramework(_), .. })
        ));
    }
}
