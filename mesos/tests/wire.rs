//! The scheduler API JSON as Mesos writes and reads it (examples from
//! scheduler.proto's shape, not the erroneous prose docs).

use mpiswarm_mesos::scheduler::{Call, CallType, Event, EventType};
use mpiswarm_mesos::{Filters, MasterError, Reason, TaskState};

#[test]
fn offers_are_nested_under_offers_offers_with_roles_and_attributes() {
    let json = r#"{"type":"OFFERS","offers":{"offers":[{"id":{"value":"O1"},"framework_id":{"value":"F-0000"},"agent_id":{"value":"S1"},
      "hostname":"node1","url":{"scheme":"http","address":{"hostname":"node1","ip":"10.0.0.5","port":5051},"path":"/slave(1)"},
      "resources":[{"name":"cpus","type":"SCALAR","scalar":{"value":4.0},"role":"*","allocation_info":{"role":"mpi"}},
                   {"name":"ports","type":"RANGES","ranges":{"range":[{"begin":31000,"end":32000}]},"role":"*","allocation_info":{"role":"mpi"}}],
      "attributes":[{"name":"rack","type":"TEXT","text":{"value":"r1"}}],
      "executor_ids":[{"value":"E1"}],"allocation_info":{"role":"mpi"}}]}}"#;
    let event: Event = serde_json::from_str(json).unwrap();
    assert_eq!(event.kind, EventType::Offers);
    let offer = &event.offers.unwrap().offers[0];
    assert_eq!(offer.resources[0].scalar_value(), Some(4.0));
    assert_eq!(offer.resources[1].ranges.as_ref().unwrap().range[0].end, 32000);
    assert_eq!(offer.attributes[0].text_value(), Some("r1"));
    assert_eq!(offer.allocation_info.as_ref().unwrap().role.as_deref(), Some("mpi"));
}

#[test]
fn unknown_fields_are_ignored_and_the_deprecated_role_is_kept() {
    let json = r#"{"type":"SUBSCRIBE","slave_id":{"value":"x"},"subscribe":{"framework_info":{"user":"root","name":"py","role":"batch","credentials":{}}}}"#;
    let call: Call = serde_json::from_str(json).unwrap();
    assert_eq!(call.kind, Some(CallType::Subscribe));
    assert_eq!(call.subscribe.unwrap().framework_info.effective_roles(), vec!["batch".to_owned()]);
}

#[test]
fn a_missing_required_field_is_an_error_naming_it() {
    let err = serde_json::from_str::<Call>(r#"{"type":"SUBSCRIBE","subscribe":{"framework_info":{"name":"x"}}}"#)
        .unwrap_err();
    assert!(err.to_string().contains("user"), "{err}");
}

#[test]
fn an_update_carries_state_reason_and_a_base64_uuid() {
    let json = r#"{"type":"UPDATE","update":{"status":{"task_id":{"value":"t1"},"state":"TASK_LOST","reason":"REASON_INVALID_OFFERS",
      "source":"SOURCE_MASTER","agent_id":{"value":"S1"},"timestamp":1.7e9,"uuid":"AAECAwQFBgcICQoLDA0ODw=="}}}"#;
    let event: Event = serde_json::from_str(json).unwrap();
    let status = event.update.unwrap().status;
    assert_eq!(status.state, TaskState::Lost);
    assert_eq!(status.reason, Some(Reason::ReasonInvalidOffers));
    assert_eq!(status.uuid.unwrap().as_slice(), (0u8..16).collect::<Vec<_>>().as_slice());
}

#[test]
fn calls_serialise_as_type_plus_lowercase_submessage() {
    let f = "F".into();
    let decline = Call::decline(&f, vec!["O1".into()], Some(Filters::refuse(30.0)));
    assert_eq!(
        serde_json::to_string(&decline).unwrap(),
        r#"{"framework_id":{"value":"F"},"type":"DECLINE","decline":{"offer_ids":[{"value":"O1"}],"filters":{"refuse_seconds":30.0}}}"#
    );
    assert_eq!(
        serde_json::to_string(&Call::revive(&f, vec!["mpi".into()])).unwrap(),
        r#"{"framework_id":{"value":"F"},"type":"REVIVE","revive":{"roles":["mpi"]}}"#
    );
    assert_eq!(
        serde_json::to_string(&Call::teardown(&f)).unwrap(),
        r#"{"framework_id":{"value":"F"},"type":"TEARDOWN"}"#
    );
    assert_eq!(serde_json::to_string(&Event::heartbeat()).unwrap(), r#"{"type":"HEARTBEAT"}"#);
    assert_eq!(
        serde_json::to_string(&Event::error("Framework failed over")).unwrap(),
        r#"{"type":"ERROR","error":{"message":"Framework failed over"}}"#
    );
}

#[test]
fn an_unknown_event_type_from_a_newer_master_is_tolerated() {
    let event: Event = serde_json::from_str(r#"{"type":"SOMETHING_NEW","something_new":{}}"#).unwrap();
    assert_eq!(event.kind, EventType::Unknown);
}

#[test]
fn refuse_seconds_follow_mesos_defaults_and_caps() {
    assert_eq!(Filters::effective_refuse_seconds(None), 5.0);
    assert_eq!(Filters::effective_refuse_seconds(Some(&Filters::refuse(-1.0))), 5.0);
    assert_eq!(Filters::effective_refuse_seconds(Some(&Filters::refuse(0.0))), 0.0);
    assert_eq!(Filters::effective_refuse_seconds(Some(&Filters::refuse(1e12))), Filters::MAX_REFUSE_SECONDS);
    assert!(TaskState::Lost.is_terminal() && !TaskState::Unreachable.is_terminal());
}

#[test]
fn a_real_masters_error_events_are_read_as_what_they_mean() {
    // As a Mesos master writes them (src/master/master.cpp: validateFramework's
    // refusal of a removed framework id, and the failover notice).
    let removed: Event =
        serde_json::from_str(r#"{"type":"ERROR","error":{"message":"Framework has been removed"}}"#).unwrap();
    assert_eq!(removed.error.unwrap().kind(), MasterError::FrameworkRemoved);
    let failed_over: Event =
        serde_json::from_str(r#"{"type":"ERROR","error":{"message":"Framework failed over"}}"#).unwrap();
    assert_eq!(failed_over.error.unwrap().kind(), MasterError::FrameworkFailedOver);
    let other: Event = serde_json::from_str(
        r#"{"type":"ERROR","error":{"message":"User 'root' is not allowed to run frameworks without --root_submissions set"}}"#,
    )
    .unwrap();
    assert!(matches!(other.error.unwrap().kind(), MasterError::Other(m) if m.starts_with("User 'root'")));
}
