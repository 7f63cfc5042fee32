//! The master's time. Every method of the master takes `now`, the time since
//! the master started (monotonic, from the server's clock task); wall-clock
//! timestamps (`TaskStatus.timestamp`) are derived from `now` and the wall
//! time at start, which the server reads once and passes in. So the master
//! reads no clock for its decisions, and tests drive it with any `now`.

use std::time::Duration;

/// Turns the master's `now` into Unix seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WallClock {
    unix_at_start: f64,
}

impl WallClock {
    /// A clock whose `now = 0` is `unix_at_start` seconds after the epoch.
    pub fn starting_at(unix_at_start: f64) -> Self {
        Self { unix_at_start }
    }

    /// The wall time of the system clock at this moment (read once, by the server).
    pub fn system() -> Self {
        let unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        Self::starting_at(unix)
    }

    /// Unix seconds at `now`.
    pub fn timestamp(&self, now: Duration) -> f64 {
        self.unix_at_start + now.as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_the_start_plus_now() {
        let clock = WallClock::starting_at(1_000.0);
        assert_eq!(clock.timestamp(Duration::ZERO), 1_000.0);
        assert_eq!(clock.timestamp(Duration::from_millis(2_500)), 1_002.5);
    }
}
