//! Polling with one overall deadline: every wait of the suite goes through
//! [`until`], which fails the test with what it waited for and the last
//! thing it saw instead of hanging. Used where no event can be awaited
//! (another process's state, Swarm's, the API server's).

use std::time::{Duration, Instant};

/// How often a condition is polled: fast enough to see a task that lives a
/// few seconds, slow enough not to load two shared cores with `kubectl`.
pub const POLL: Duration = Duration::from_millis(500);

/// Calls `check` until it returns `Ok`, at most until `deadline` from now;
/// `Err` says why not yet (the last one is in the failure message).
pub fn until<T>(deadline: Duration, what: &str, mut check: impl FnMut() -> Result<T, String>) -> T {
    let start = Instant::now();
    loop {
        match check() {
            Ok(v) => return v,
            Err(why) if start.elapsed() >= deadline => {
                panic!("{what}: not within {deadline:?}; last seen: {why}")
            }
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_the_first_ok() {
        let mut n = 0;
        let got = until(Duration::from_secs(10), "n reaches 2", || {
            n += 1;
            if n >= 2 { Ok(n) } else { Err(format!("n={n}")) }
        });
        assert_eq!(got, 2);
    }

    #[test]
    #[should_panic(expected = "never: not within")]
    fn fails_at_the_deadline_with_the_last_reason() {
        until::<()>(Duration::from_millis(100), "never", || Err("still no".into()));
    }
}
