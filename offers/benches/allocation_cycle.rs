//! The allocation cycle, in the spirit of Mesos' allocator benchmarks
//! (hierarchical_allocator_benchmarks.cpp): agents x frameworks, all
//! frameworks in one role, no filters; one cycle offers every agent.
//! Mesos 1.8 published about 1.1 s per cycle for 10k agents x 1k frameworks.
//! Agents come from `MPISWARM_BENCH_SIZES` (default 1000,2000,5000,10000,
//! Mesos' own steps), each with 100 and 1,000 frameworks; `bench/run` plots
//! how the cycle grows.

use criterion::{BenchmarkId, Criterion, SamplingMode, criterion_group, criterion_main};
use mpiswarm_mesos::quantities::Quantities;
use mpiswarm_offers::allocator::{Allocator, AllocatorConfig};
use std::hint::black_box;
use std::time::{Duration, Instant};

fn agent_resources() -> Quantities {
    let mut q = Quantities::scalar("cpus", 24.0);
    q.add(&Quantities::scalar("mem", 65536.0));
    q.add(&Quantities::scalar("disk", 1_000_000.0));
    q
}

fn cluster(agents: usize, frameworks: usize) -> Allocator {
    let mut alloc = Allocator::new(AllocatorConfig::default());
    for i in 0..agents {
        alloc.add_agent(&format!("agent-{i:05}"), agent_resources(), &[]);
    }
    for i in 0..frameworks {
        alloc.add_framework(&format!("framework-{i:04}"), &["r".to_owned()], &[]);
    }
    alloc
}

/// The agent counts: `MPISWARM_BENCH_SIZES`, comma-separated, or Mesos' steps.
fn sizes() -> Vec<usize> {
    match std::env::var("MPISWARM_BENCH_SIZES") {
        Ok(list) => {
            let parsed: Result<Vec<usize>, _> = list.split(',').map(|s| s.trim().parse()).collect();
            parsed.unwrap_or_else(|e| panic!("MPISWARM_BENCH_SIZES={list:?}: {e}; give sizes like 1000,2000"))
        }
        Err(_) => vec![1_000, 2_000, 5_000, 10_000],
    }
}

fn allocation_cycle(c: &mut Criterion) {
    let mut group = c.benchmark_group("allocation_cycle");
    // A cycle at 10k agents takes a large part of a second: equal-sized
    // samples need 10 cycles, criterion's growing ones 55.
    group.sampling_mode(SamplingMode::Flat);
    for agents in sizes() {
        for frameworks in [100usize, 1_000] {
            let mut alloc = cluster(agents, frameworks);
            let id = BenchmarkId::from_parameter(format!("{agents}_agents_x_{frameworks}_frameworks"));
            group.bench_function(id, |b| {
                b.iter_custom(|iters| {
                    let mut timed = Duration::ZERO;
                    for _ in 0..iters {
                        let start = Instant::now();
                        let allocations = alloc.allocate(Duration::ZERO, None);
                        timed += start.elapsed();
                        assert_eq!(allocations.len(), agents, "every agent is offered each cycle");
                        // Give everything back (untimed) so each cycle starts alike.
                        for a in black_box(allocations) {
                            alloc.recover(&a.framework, &a.role, &a.agent, &a.resources, None, Duration::ZERO);
                        }
                    }
                    timed
                });
            });
        }
    }
    group.finish();
}

// Set here rather than on the group, so `-- --measurement-time` and the
// other command-line flags can still shorten a smoke run.
criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    targets = allocation_cycle
}
criterion_main!(benches);
