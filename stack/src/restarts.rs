//! When a stopped component of the stack starts again, one rule for both
//! ways the stack runs (`up`'s in-process controller, `--split`'s child
//! processes): after a pause of [`FIRST_BACKOFF`]; a component that stops
//! again within [`STEADY`] of its start is crash-looping, and its pause
//! doubles, up to [`MAX_BACKOFF`]. Pure but for reading the clock.

use std::time::Duration;

use tokio::time::Instant;

/// A component stopping within this long of its start is crash-looping.
const STEADY: Duration = Duration::from_secs(10);
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// One component's starts and the pause before its next one.
#[derive(Debug)]
pub(crate) struct Restarts {
    started: Instant,
    pause: Duration,
}

impl Restarts {
    /// A component that started now.
    pub(crate) fn new() -> Self {
        Self { started: Instant::now(), pause: FIRST_BACKOFF }
    }

    /// The component stopped now: how long it ran, and the pause before it
    /// starts again.
    pub(crate) fn stopped(&mut self) -> (Duration, Duration) {
        self.stopped_at(Instant::now())
    }

    fn stopped_at(&mut self, now: Instant) -> (Duration, Duration) {
        let ran = now.saturating_duration_since(self.started);
        self.pause = if ran < STEADY { (self.pause * 2).min(MAX_BACKOFF) } else { FIRST_BACKOFF };
        (ran, self.pause)
    }

    /// It started again now.
    pub(crate) fn started(&mut self) {
        self.started_at(Instant::now());
    }

    fn started_at(&mut self, now: Instant) {
        self.started = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_loop_pauses_longer_each_time_up_to_the_cap_and_a_steady_run_starts_over() {
        let mut r = Restarts::new();
        let mut now = r.started;
        let mut pauses = Vec::new();
        for _ in 0..7 {
            now += Duration::from_secs(1);
            pauses.push(r.stopped_at(now).1.as_secs());
            r.started_at(now);
        }
        assert_eq!(pauses, [2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(r.stopped_at(now + STEADY), (STEADY, FIRST_BACKOFF), "a run of STEADY or more is not a crash loop");
    }
}
