//! Two roles' shares of the cluster over a run, and whether they follow
//! the roles' weights: the load case's verdict, kept free of I/O so that it
//! is tested here on series made to pass and made to fail.
//!
//! The bound is derived from the run, not chosen. Each sample is a split
//! `(a, b)` of the cpus two roles hold while both have work waiting. With
//! weights `wa:wb`, weighted DRF aims at `a = (a + b) * wa / (wa + wb)`; the
//! sample's deviation is `a` minus that. A working allocator leaves the
//! time-averaged deviation within
//!
//! - **half a granule**: offers are whole, so a role's holding moves in
//!   steps of what one offer holds (in the load case, one job's cpus, freed
//!   when a job ends and offered whole to one role); the split nearest the
//!   target can be half a step from it, and
//! - **the mean's sampling noise**: samples taken a second apart are not
//!   independent (a job holds its cpus for many samples), so the standard
//!   error of the mean is estimated by batch means (the samples cut into
//!   [`BATCHES`] consecutive batches, whose means are close to independent
//!   when a batch outlasts a job), times Student's t for `BATCHES - 1`
//!   degrees of freedom at 0.1% two-sided: a working allocator fails the
//!   check about once in a thousand runs.
//!
//! A run also has to be able to tell: an allocator that ignored the weights
//! would aim at `a = b`, `(a + b) * (wa / (wa + wb) - 1/2)` away (1 cpu of
//! 6 at 2:1). When the allowed deviation reaches that gap, the bound would
//! admit an unweighted allocator: the run says nothing either way, and the
//! verdict says so instead of passing.

use std::collections::BTreeMap;
use std::fmt;

/// Consecutive batches the samples are cut into for the standard error.
pub const BATCHES: usize = 10;
/// Student's t, 9 degrees of freedom, 0.9995 quantile (0.1% two-sided).
const T_9_0001: f64 = 4.781;

/// The allocator's aim and the step it moves in.
#[derive(Debug, Clone, Copy)]
pub struct Weights {
    pub a: f64,
    pub b: f64,
    /// Cpus one allocation decision moves (what one offer holds).
    pub granule: f64,
}

/// What a run's samples show against its weights.
#[derive(Debug, Clone)]
pub struct Judged {
    pub samples: usize,
    /// Time average: sum(a) / sum(b).
    pub ratio: f64,
    /// Mean cpus of each role.
    pub mean: (f64, f64),
    /// Mean deviation of `a` from the weighted target, in cpus (the batched samples).
    pub deviation: f64,
    /// The standard error of that mean (batch means).
    pub standard_error: f64,
    /// The deviation allowed: half a granule plus t times the standard error.
    pub allowed: f64,
    /// The distance, in cpus, between the weighted and the unweighted aim.
    pub gap: f64,
    /// `allowed` as a band of `ratio` at the run's mean total.
    pub ratio_bound: (f64, f64),
    /// The most seen splits, "a:b xN".
    pub splits: Vec<String>,
}

/// The verdict on a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Follows,
    /// The mean deviation is past what the allocator's steps and the noise allow.
    Off(String),
    /// Too few samples, or too noisy to tell weighted from unweighted.
    Undecided(String),
}

impl Judged {
    /// `samples`: `(a, b)` cpus per sample, in time order, equally spaced.
    pub fn of(samples: &[(f64, f64)], w: Weights) -> Judged {
        let share = w.a / (w.a + w.b);
        let (sa, sb) = samples.iter().fold((0.0, 0.0), |(x, y), (a, b)| (x + a, y + b));
        let n = samples.len();
        let nf = n.max(1) as f64;
        // The first samples (the ramp-up) are the ones left out when n is
        // not a multiple of BATCHES.
        let size = n / BATCHES;
        let batched = &samples[n - size * BATCHES..];
        let deviation_of = |(a, b): &(f64, f64)| a - (a + b) * share;
        let means: Vec<f64> = batched
            .chunks(size.max(1))
            .map(|c| c.iter().map(deviation_of).sum::<f64>() / c.len().max(1) as f64)
            .collect();
        let k = means.len().max(1) as f64;
        let deviation = means.iter().sum::<f64>() / k;
        let variance = means.iter().map(|m| (m - deviation).powi(2)).sum::<f64>() / (k - 1.0).max(1.0);
        let standard_error = (variance / k).sqrt();
        let allowed = w.granule / 2.0 + T_9_0001 * standard_error;
        let total = (sa + sb) / nf;
        let (ta, tb) = (total * share, total * (1.0 - share));
        let ratio_bound = (
            (ta - allowed) / (tb + allowed),
            if tb > allowed { (ta + allowed) / (tb - allowed) } else { f64::INFINITY },
        );
        let mut splits = BTreeMap::<(String, String), usize>::new();
        for (a, b) in samples {
            *splits.entry((format!("{a:.2}"), format!("{b:.2}"))).or_default() += 1;
        }
        let mut splits: Vec<_> = splits.into_iter().collect();
        splits.sort_by_key(|s| std::cmp::Reverse(s.1));
        Judged {
            samples: n,
            ratio: if sb > 0.0 { sa / sb } else { f64::INFINITY },
            mean: (sa / nf, sb / nf),
            deviation,
            standard_error,
            allowed,
            gap: total * (share - 0.5).abs(),
            ratio_bound,
            splits: splits.iter().take(8).map(|((a, b), c)| format!("{a}:{b} x{c}")).collect(),
        }
    }

    pub fn verdict(&self) -> Verdict {
        if self.samples < 2 * BATCHES {
            return Verdict::Undecided(format!(
                "{} samples; at least {} are needed to estimate the noise",
                self.samples,
                2 * BATCHES
            ));
        }
        if self.allowed >= self.gap {
            return Verdict::Undecided(format!(
                "too noisy to tell the weights from none: {:.3} cpus allowed, the gap to an unweighted split is \
                 {:.3}; the run needs more turnovers",
                self.allowed, self.gap
            ));
        }
        if self.deviation.abs() > self.allowed {
            return Verdict::Off(format!(
                "mean deviation {:+.3} cpus from the weighted split, {:.3} allowed (ratio {:.2}, bound {:.2}..{:.2})",
                self.deviation, self.allowed, self.ratio, self.ratio_bound.0, self.ratio_bound.1
            ));
        }
        Verdict::Follows
    }
}

impl fmt::Display for Judged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ratio {:.2} (bound {:.2}..{:.2}; mean {:.2}:{:.2}; deviation {:+.3} cpus, standard error {:.3}, \
             allowed {:.3}, gap {:.3}; {} samples; most seen {})",
            self.ratio,
            self.ratio_bound.0,
            self.ratio_bound.1,
            self.mean.0,
            self.mean.1,
            self.deviation,
            self.standard_error,
            self.allowed,
            self.gap,
            self.samples,
            self.splits.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Weights = Weights { a: 2.0, b: 1.0, granule: 0.25 };

    /// A split of 6 cpus that moves by one granule at a time around `aim`
    /// (a's cpus), as jobs end and offers go to the role behind: a small
    /// deterministic generator (xorshift) so that the series is reproducible
    /// from its seed, which a failing assertion prints.
    fn series(aim: f64, n: usize, seed: u64) -> Vec<(f64, f64)> {
        let mut x = seed.max(1);
        let mut a = aim;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // A job of either role ends: a loses or gains a granule...
                a += if x.is_multiple_of(2) { 0.25 } else { -0.25 };
                // ...and the next offer goes to the role behind its aim.
                if a > aim + 0.5 {
                    a -= 0.25;
                } else if a < aim - 0.5 {
                    a += 0.25;
                }
                (a, 6.0 - a)
            })
            .collect()
    }

    #[test]
    fn a_split_that_wanders_around_the_weighted_aim_follows() {
        for seed in 1..50 {
            let judged = Judged::of(&series(4.0, 130, seed), W);
            assert_eq!(judged.verdict(), Verdict::Follows, "seed {seed}: {judged}");
        }
    }

    #[test]
    fn a_split_around_one_to_one_is_off_and_says_by_how_much() {
        for seed in 1..50 {
            let judged = Judged::of(&series(3.0, 130, seed), W);
            match judged.verdict() {
                Verdict::Off(why) => assert!(why.contains("mean deviation -"), "seed {seed}: {why}"),
                other => panic!("seed {seed}: {other:?} for {judged}"),
            }
        }
    }

    #[test]
    fn a_split_held_one_granule_past_the_aim_is_off() {
        let judged = Judged::of(&vec![(4.25, 1.75); 40], W);
        assert!(matches!(judged.verdict(), Verdict::Off(_)), "{judged}");
        let judged = Judged::of(&vec![(4.1, 1.9); 40], W);
        assert_eq!(judged.verdict(), Verdict::Follows, "within half a granule: {judged}");
    }

    #[test]
    fn too_few_samples_or_too_much_noise_decides_nothing() {
        assert!(matches!(Judged::of(&series(4.0, 19, 7), W).verdict(), Verdict::Undecided(_)));
        // Whole-node swings: 6:0 and 0:6 in long stretches.
        let swings: Vec<(f64, f64)> =
            (0..100).map(|i| if (i / 10) % 2 == 0 { (6.0, 0.0) } else { (0.0, 6.0) }).collect();
        match Judged::of(&swings, W).verdict() {
            Verdict::Undecided(why) => assert!(why.contains("too noisy"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_ratio_band_is_the_allowed_deviation_at_the_mean_total() {
        let judged = Judged::of(&vec![(4.0, 2.0); 40], W);
        assert_eq!(judged.standard_error, 0.0);
        assert_eq!(judged.allowed, 0.125);
        let (lo, hi) = judged.ratio_bound;
        assert!((lo - 3.875 / 2.125).abs() < 1e-9 && (hi - 4.125 / 1.875).abs() < 1e-9, "{lo} {hi}");
        assert_eq!(judged.ratio, 2.0);
        assert!((judged.gap - 1.0).abs() < 1e-9, "{}", judged.gap);
    }
}
