//! The main of a suite test binary (`harness = false`): one [`Cluster`] for
//! all its cases, which run one at a time in order. After each case the
//! runner checks that nothing of mpiswarm's is left on any node (a failure
//! of the case); after a failed case it deletes every MpiJob so the next
//! starts clean. At the end it takes the cluster down: `mpiswarm down` must
//! leave no node container, volume or network behind (a failure too). It
//! prints each case's time and the suite's wall time, and exits 1 if any
//! case failed.
//!
//! Arguments (after `cargo test -p mpiswarm-e2e --features
//! mpiswarm-testkit/engine --test NAME --`): words select the cases whose
//! names contain one of them; `--list` lists them; `--repeat N` runs the
//! selected cases N times over on the one cluster (to measure how a case's
//! figures spread from run to run), each run counted on its own.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use crate::cluster::Cluster;
use crate::leftovers::assert_nothing_left;

/// A case: a name and a function that panics on failure.
pub type Case = (&'static str, fn(&Cluster));

/// Runs the selected `cases` on the cluster `start` makes; never returns.
pub fn run(suite: &str, start: impl FnOnce() -> Cluster, cases: &[Case]) -> ! {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let repeat = match args.iter().position(|a| a == "--repeat") {
        Some(i) => match args.get(i + 1).and_then(|n| n.parse::<usize>().ok()) {
            Some(n) if n > 0 => n,
            _ => {
                eprintln!("{suite}: --repeat takes a number of runs, at least 1");
                std::process::exit(2);
            }
        },
        None => 1,
    };
    let words: Vec<&String> = args
        .iter()
        .enumerate()
        .filter(|(i, a)| !a.starts_with('-') && (*i == 0 || args[i - 1] != "--repeat"))
        .map(|(_, a)| a)
        .collect();
    let selected: Vec<&Case> =
        cases.iter().filter(|(name, _)| words.is_empty() || words.iter().any(|w| name.contains(w.as_str()))).collect();
    if args.iter().any(|a| a == "--list") {
        for (name, _) in &selected {
            println!("{suite}::{name}: test");
        }
        std::process::exit(0);
    }
    if selected.is_empty() {
        println!("{suite}: no case selected by {words:?}");
        std::process::exit(0);
    }
    let wall = Instant::now();
    let bin = crate::binary::mpiswarm();
    println!("{suite}: {} ready in {:.1} s", bin.display(), wall.elapsed().as_secs_f64());
    let up = Instant::now();
    let cluster = start();
    println!("{suite}: cluster up in {:.1} s", up.elapsed().as_secs_f64());
    let mut failed = Vec::new();
    let runs = (1..=repeat).flat_map(|run| selected.iter().map(move |case| (run, case)));
    for (run, (name, case)) in runs {
        let started = Instant::now();
        if repeat > 1 {
            println!("{suite}: run {run} of {repeat}");
        }
        println!("{suite}::{name} ...");
        let mut ran = 0.0;
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            case(&cluster);
            ran = started.elapsed().as_secs_f64();
            assert_nothing_left(&cluster);
        }));
        let took = started.elapsed().as_secs_f64();
        if outcome.is_ok() {
            println!("{suite}::{name} ok ({took:.1} s, of which {:.1} s waiting for nothing left)", took - ran);
        } else {
            println!("{suite}::{name} FAILED ({took:.1} s)");
            failed.push(*name);
            let _clean = catch_unwind(AssertUnwindSafe(|| {
                cluster.kubectl(&["delete", "mpijob", "--all", "--wait=true"]);
                assert_nothing_left(&cluster);
            }));
        }
    }
    let down = Instant::now();
    match cluster.down() {
        Ok(()) => println!("{suite}: mpiswarm down left nothing ({:.1} s)", down.elapsed().as_secs_f64()),
        Err(e) => {
            println!("{suite}: {e}");
            failed.push("mpiswarm down leaves nothing");
        }
    }
    let wall = wall.elapsed().as_secs_f64();
    if failed.is_empty() {
        println!("{suite}: all cases passed; wall time {wall:.1} s");
        std::process::exit(0);
    }
    println!("{suite}: FAILED {failed:?}; wall time {wall:.1} s");
    std::process::exit(1);
}
