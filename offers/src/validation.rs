//! Scheduler call validation, in the order and words of Mesos'
//! `validation::scheduler::call::validate`: the checks that need no state.
//! A failure is answered `400 Failed to validate scheduler::Call: <why>`.

use mpiswarm_mesos::scheduler::{Call, CallType};

/// Checks a call's shape: `type`, the sub-message its type needs, ids, uuids.
pub fn validate_call(call: &Call) -> Result<(), String> {
    let kind = call.kind.ok_or("Expecting 'type' to be present")?;
    if kind == CallType::Subscribe {
        let subscribe = call.subscribe.as_ref().ok_or("Expecting 'subscribe' to be present")?;
        if call.framework_id.is_some() && call.framework_id != subscribe.framework_info.id {
            return Err("'framework_id' differs from 'subscribe.framework_info.id'".into());
        }
        return Ok(());
    }
    if call.framework_id.is_none() {
        return Err("Expecting 'framework_id' to be present".into());
    }
    let present = match kind {
        CallType::Accept => call.accept.is_some(),
        CallType::Decline => call.decline.is_some(),
        CallType::AcceptInverseOffers => call.accept_inverse_offers.is_some(),
        CallType::DeclineInverseOffers => call.decline_inverse_offers.is_some(),
        CallType::Kill => call.kill.is_some(),
        CallType::Shutdown => call.shutdown.is_some(),
        CallType::Acknowledge => call.acknowledge.is_some(),
        CallType::AcknowledgeOperationStatus => call.acknowledge_operation_status.is_some(),
        CallType::Reconcile => call.reconcile.is_some(),
        CallType::ReconcileOperations => call.reconcile_operations.is_some(),
        CallType::Message => call.message.is_some(),
        CallType::Request => call.request.is_some(),
        CallType::UpdateFramework => call.update_framework.is_some(),
        CallType::Subscribe | CallType::Teardown | CallType::Revive | CallType::Suppress | CallType::Unknown => true,
    };
    if !present {
        let field = serde_json::to_value(kind).ok().and_then(|v| v.as_str().map(str::to_lowercase)).unwrap_or_default();
        return Err(format!("Expecting '{field}' to be present"));
    }
    if let Some(ack) = &call.acknowledge
        && ack.uuid.as_slice().len() != 16
    {
        return Err(format!(
            "Failed to parse 'acknowledge.uuid': a UUID is 16 bytes, got {} bytes",
            ack.uuid.as_slice().len()
        ));
    }
    if let Some(update) = &call.update_framework
        && update.framework_info.id.is_some()
        && update.framework_info.id != call.framework_id
    {
        return Err("'framework_id' differs from 'update_framework.framework_info.id'".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(json: &str) -> Call {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn each_call_type_needs_its_own_sub_message() {
        let err = validate_call(&call(r#"{"type":"ACCEPT_INVERSE_OFFERS","framework_id":{"value":"f"}}"#)).unwrap_err();
        assert_eq!(err, "Expecting 'accept_inverse_offers' to be present");
        assert!(validate_call(&call(r#"{"type":"REVIVE","framework_id":{"value":"f"}}"#)).is_ok());
        assert!(validate_call(&call(r#"{"type":"TEARDOWN","framework_id":{"value":"f"}}"#)).is_ok());
    }

    #[test]
    fn a_subscribe_with_a_different_outer_framework_id_is_refused() {
        let c = call(
            r#"{"type":"SUBSCRIBE","framework_id":{"value":"a"},"subscribe":{"framework_info":{"user":"u","name":"n"}}}"#,
        );
        assert_eq!(validate_call(&c).unwrap_err(), "'framework_id' differs from 'subscribe.framework_info.id'");
    }
}
