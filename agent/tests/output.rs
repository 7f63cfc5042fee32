//! Tasks' output kept like a Mesos sandbox, against the real Docker engine:
//! read back through `/files/read` with offsets while the task runs and
//! after it finished, listed by `/files/browse`, bounded when large, kept
//! after a FINISHED task is acknowledged and removed when a KILL says its
//! job is gone.

mod support;

use std::time::Duration;

use mpiswarm_mesos::TaskState;
use support::{RANK_IMAGE, harness, harness_with};

const DEADLINE: Duration = Duration::from_secs(120);

async fn read(base: &str, fw: &str, task: &str, stream: &str, offset: i64) -> (u16, serde_json::Value) {
    let url = format!("{base}/files/read?path=/tasks/{fw}/{task}/{stream}&offset={offset}");
    let resp = reqwest::get(url).await.unwrap();
    let status = resp.status().as_u16();
    let body = resp.text().await.unwrap();
    (status, serde_json::from_str(&body).unwrap_or(serde_json::Value::String(body)))
}

/// Follows a stream like `mpiswarm logs -f` would: from `offset`, until
/// `until` is in what was read, within one overall deadline.
async fn follow(base: &str, fw: &str, task: &str, stream: &str, until: &str) -> String {
    let wait = async {
        let mut text = String::new();
        let mut offset = 0i64;
        loop {
            let (status, body) = read(base, fw, task, stream, offset).await;
            if status == 200 {
                let data = body["data"].as_str().unwrap();
                assert_eq!(body["offset"].as_i64(), Some(offset), "nothing was dropped, so data starts where asked");
                text.push_str(data);
                offset += i64::try_from(data.len()).unwrap();
                if text.contains(until) {
                    return text;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::time::timeout(DEADLINE, wait)
        .await
        .unwrap_or_else(|_| panic!("'{until}' not in {stream} within {DEADLINE:?}"))
}

/// Waits (one overall deadline) until the task's output answers 404.
async fn until_removed(base: &str, fw: &str, task: &str) {
    let gone = async {
        while read(base, fw, task, "stdout", 0).await.0 != 404 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(DEADLINE, gone).await.unwrap_or_else(|_| panic!("the output of {task} is still there"));
}

/// Launches one task running `script` in the rank image; its id.
async fn launch(h: &support::Harness, name: &str, script: &str) -> mpiswarm_mesos::TaskId {
    let task = h.task(name, RANK_IMAGE, script);
    let id = task.task_id.clone();
    h.launch(vec![task]).await;
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_stdout_and_stderr_are_read_back_with_offsets_while_running_and_after_it_finished() {
    let mut h = harness("output").await;
    let base = h.serve_http().await;
    let script = "for i in 1 2 3; do echo out-$i; echo err-$i >&2; done; \
                  while [ ! -e /tmp/go ]; do sleep 0.2; done; echo out-last; echo err-last >&2";
    let id = launch(&h, "printer", script).await;
    h.wait_for(&id, TaskState::Running).await;
    let fw = h.framework_id.value.clone();

    // While it runs: the first lines, followed live.
    let early = follow(&base, &fw, &id.value, "stdout", "out-3\n").await;
    assert_eq!(early, "out-1\nout-2\nout-3\n");
    assert_eq!(follow(&base, &fw, &id.value, "stderr", "err-3\n").await, "err-1\nerr-2\nerr-3\n");
    let service = mpiswarm_agent::plan::service_name(&h.framework_id, &id);
    let container = support::container_of(&service);
    let touched = std::process::Command::new("docker").args(["exec", &container, "touch", "/tmp/go"]).status().unwrap();
    assert!(touched.success());
    let finished = h.wait_for(&id, TaskState::Finished).await;
    assert!(finished.message.as_deref().unwrap_or("").contains("out-last"), "{:?}", finished.message);
    h.wait_until_clean().await;

    // After it finished and its service is gone: all of it, and reads at offsets.
    let (status, all) = read(&base, &fw, &id.value, "stdout", 0).await;
    assert_eq!(status, 200);
    assert_eq!(all["data"], "out-1\nout-2\nout-3\nout-last\n");
    let (_, tail) = read(&base, &fw, &id.value, "stdout", 6).await;
    assert_eq!((tail["data"].as_str(), tail["offset"].as_i64()), (Some("out-2\nout-3\nout-last\n"), Some(6)));
    let (_, size) = read(&base, &fw, &id.value, "stderr", -1).await;
    assert_eq!((size["data"].as_str(), size["offset"].as_i64()), (Some(""), Some(27)), "offset=-1 is the size");
    let browse: serde_json::Value =
        reqwest::get(format!("{base}/files/browse?path=/tasks/{fw}/{}", id.value)).await.unwrap().json().await.unwrap();
    let files: Vec<(String, i64)> = browse
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["path"].as_str().unwrap().to_owned(), f["size"].as_i64().unwrap()))
        .collect();
    let dir = format!("/tasks/{fw}/{}", id.value);
    assert_eq!(files, vec![(format!("{dir}/stdout"), 27), (format!("{dir}/stderr"), 27)]);

    // Unknown paths are 404s that say where output is.
    let (status, body) = read(&base, &fw, "no-such-task", "stdout", 0).await;
    assert_eq!(status, 404);
    assert!(body.as_str().unwrap().contains("/tasks/<framework id>/<task id>/stdout"), "{body}");
    let (status, _) = read(&base, &fw, &id.value, "environ", 0).await;
    assert_eq!(status, 404);

    // Acknowledging a FINISHED task keeps its output (for the retention period) ...
    h.acknowledge(&finished);
    assert!(h.agent.reported_tasks().is_empty(), "the task is forgotten");
    assert_eq!(read(&base, &fw, &id.value, "stdout", 0).await.1["data"], "out-1\nout-2\nout-3\nout-last\n");
    // ... and a KILL of it (its job was deleted) removes the output.
    h.agent.kill_task(&h.framework_id, &id).await;
    until_removed(&base, &fw, &id.value).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_output_stays_bounded_and_keeps_its_end() {
    const LIMIT: u64 = 64 * 1024;
    let mut h = harness_with("bigout", |c| c.output_limit = LIMIT).await;
    let base = h.serve_http().await;
    // 200,000 lines of 5 bytes: 1,000,000 bytes, fifteen times the bound.
    let id = launch(&h, "chatty", "yes line | head -n 200000; echo the-end").await;
    h.wait_for(&id, TaskState::Finished).await;
    let fw = h.framework_id.value.clone();
    let (_, size) = read(&base, &fw, &id.value, "stdout", -1).await;
    assert_eq!(size["offset"].as_u64(), Some(1_000_008), "every byte is counted: {size}");
    let (_, kept) = read(&base, &fw, &id.value, "stdout", 0).await;
    let data = kept["data"].as_str().unwrap();
    let from = kept["offset"].as_u64().unwrap();
    assert!(data.len() as u64 <= LIMIT && data.len() as u64 >= LIMIT / 2, "kept {} bytes", data.len());
    assert_eq!(from + data.len() as u64, 1_000_008, "the kept bytes are the last ones");
    assert!(data.ends_with("line\nthe-end\n"), "{}", &data[data.len() - 20..]);
    let dir = h.agent.sandbox().task_dir(&fw, &id.value);
    let on_disk: u64 = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
    assert!(on_disk <= LIMIT + 1024, "{} holds {on_disk} bytes", dir.display());
    h.wait_until_clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_tasks_output_goes_when_the_kill_is_acknowledged() {
    let mut h = harness("killout").await;
    let base = h.serve_http().await;
    let id = launch(&h, "victim", "echo started; sleep 300").await;
    h.wait_for(&id, TaskState::Running).await;
    let fw = h.framework_id.value.clone();
    assert_eq!(follow(&base, &fw, &id.value, "stdout", "started\n").await, "started\n");
    h.agent.kill_task(&h.framework_id, &id).await;
    let killed = h.wait_for(&id, TaskState::Killed).await;
    assert_eq!(read(&base, &fw, &id.value, "stdout", 0).await.0, 200, "kept until the framework heard of the kill");
    h.acknowledge(&killed);
    until_removed(&base, &fw, &id.value).await;
    h.wait_until_clean().await;
}
