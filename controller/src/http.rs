//! `/healthz` (the process serves), `/readyz` (this replica leads and is
//! subscribed to the master) and `/metrics` (OpenMetrics text), served by
//! [`mpiswarm_health`]. What they read is the [`Context`]'s; this file only
//! says how.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use mpiswarm_health::{Component, Probe};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::context::Context;
use crate::metrics::PhaseLabel;

pub async fn serve(
    listener: TcpListener,
    ctx: Arc<Context>,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let app: axum::Router = mpiswarm_health::router(ctx);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _closed = shutdown.wait_for(|stop| *stop).await;
        })
        .await
}

impl Component for Context {
    fn ready(&self) -> Probe {
        if self.subscribed.load(Ordering::SeqCst) {
            Probe::pass("ready: leading and subscribed to the master\n")
        } else {
            Probe::fail("not ready: not leading, or not subscribed to the master\n")
        }
    }

    fn registry(&self) -> &Registry {
        self.metrics.registry()
    }

    /// Jobs by phase, as the reflector's store has them now.
    fn refresh(&self) {
        if let Some(store) = self.store.get() {
            self.metrics.jobs.clear();
            for job in store.state() {
                let phase = job.status.as_ref().and_then(|s| s.phase).unwrap_or_default();
                self.metrics.jobs.get_or_create(&PhaseLabel { phase: format!("{phase:?}") }).inc();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Settings;
    use crate::fixtures::{Harness, JobFixture, OnKill};
    use kube::runtime::watcher;
    use mpiswarm_crds::{MpiJob, MpiJobStatus, Phase};

    fn scrape(ctx: &Context) -> String {
        ctx.refresh();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, ctx.registry()).unwrap();
        text
    }

    #[tokio::test]
    async fn ready_only_while_subscribed_and_each_scrape_counts_the_cached_jobs_by_phase() {
        let running = MpiJob::test().with_status(MpiJobStatus { phase: Some(Phase::Running), ..Default::default() });
        let h = Harness::with_settings(&running, vec![], OnKill::Ignore, Settings::default());
        assert!(matches!(h.ctx.ready(), Probe::Fail(_)));
        h.ctx.subscribed.store(true, Ordering::SeqCst);
        assert!(matches!(h.ctx.ready(), Probe::Pass(_)));

        let (reader, mut writer) = kube::runtime::reflector::store::<MpiJob>();
        writer.apply_watcher_event(&watcher::Event::Apply(running.clone()));
        let _set = h.ctx.store.set(reader);
        let first = scrape(&h.ctx);
        assert!(first.contains("mpiswarm_controller_jobs{phase=\"Running\"} 1\n"), "{first}");

        let mut pending = MpiJob::test();
        pending.metadata.name = Some("other".into());
        writer.apply_watcher_event(&watcher::Event::Apply(pending));
        writer.apply_watcher_event(&watcher::Event::Delete(running));
        let second = scrape(&h.ctx);
        assert!(second.contains("mpiswarm_controller_jobs{phase=\"Pending\"} 1\n"), "{second}");
        assert!(!second.contains("phase=\"Running\""), "a job gone is not counted: {second}");
        h.finish().await;
    }
}
