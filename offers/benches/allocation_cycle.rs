//! The allocation cycle, in the spirit of Mesos' allocator benchmarks
//! (hierarchical_allocator_benchmarks.cpp): agents x frameworks, all
//! frameworks in one role, no filters; one cycle offers every agent.
//! Mesos 1.8 published about 1.1 s per cycle for 10k agents x 1k frameworks.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
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

fn allocation_cycle(c: &mut Criterion) {
    let mut group = c.benchmark_group("allocation_cycle");
    group.sample_size(10).measurement_time(Duration::from_secs(5)).warm_up_time(Duration::from_secs(1));
    for agents in [1_000usize, 10_000] {
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

criterion_group!(benches, allocation_cycle);
criterion_main!(benches);
