//! CPU-heavy request work (a write's admission: schema, CEL, server-side
//! apply merges) kept from holding up the other tasks of a tokio worker. It
//! owns no work itself and never blocks on I/O or a lock.

/// Run `work` so that the worker's other tasks (reads, watches) do not queue
/// behind it: on the multi-thread runtime `block_in_place` hands them to
/// another thread while it runs. Elsewhere (a current-thread runtime, as in
/// unit tests) it simply runs.
pub fn off_the_worker<T>(work: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_runs_with_or_without_a_runtime() {
        assert_eq!(off_the_worker(|| 1 + 1), 2);
        let current = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        assert_eq!(current.block_on(async { off_the_worker(|| 3) }), 3);
        // One worker: unless the work hands the worker's tasks to another
        // thread, the task it waits for can never run.
        let multi = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().expect("runtime");
        let other_task_ran = multi.block_on(async {
            tokio::spawn(async {
                let (tx, rx) = std::sync::mpsc::channel();
                tokio::spawn(async move { tx.send(()).ok() });
                off_the_worker(|| rx.recv_timeout(std::time::Duration::from_secs(30)).is_ok())
            })
            .await
            .expect("join")
        });
        assert!(other_task_ran);
    }
}
