//! Placement cost at cluster scale: one 1,024-rank job over N agents (every
//! policy), and a queue round of N waiting jobs over 1,000 agents, for N in
//! `MPISWARM_BENCH_SIZES` (default 1000,2000,5000,10000; `bench/run` plots
//! how each grows). The engine runs inside the controller's offer cycle, so
//! these must stay far below the cycle's period. With 1,000 jobs the queue
//! asks for about twice the cluster (1 to 128 one-cpu ranks per job, ~36,000
//! free cpus), so backfill and unfit explanations are part of what is
//! measured.
//!
//! Every case runs twice: against wall time, and against the benchmark
//! thread's CPU time, which stays meaningful on a machine shared with other
//! work (wall time then includes waiting for a core).

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use mpiswarm_policy::{
    AgentCapacity, Backfill, Cluster, FreeResources, JobDemand, Policy, Profile, QueuedJob, Resources, RoundOptions,
    TopologyScorer, place, queue_round,
};

/// CPU time of the benchmark thread, formatted like wall time.
struct ThreadCpuTime(WallTime);

impl Measurement for ThreadCpuTime {
    type Intermediate = cpu_time::ThreadTime;
    type Value = Duration;

    fn start(&self) -> Self::Intermediate {
        cpu_time::ThreadTime::now()
    }

    fn end(&self, start: Self::Intermediate) -> Self::Value {
        start.elapsed()
    }

    fn add(&self, a: &Self::Value, b: &Self::Value) -> Self::Value {
        *a + *b
    }

    fn zero(&self) -> Self::Value {
        Duration::ZERO
    }

    fn to_f64(&self, value: &Self::Value) -> f64 {
        value.as_nanos() as f64
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        self.0.formatter()
    }
}

/// A small deterministic generator, so every run measures the same cluster.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

/// Agents of 8 to 64 free cpus and 2 GiB per cpu, 40 to a rack, 10 racks to a zone.
fn cluster(agents: usize, seed: u64) -> Vec<AgentCapacity> {
    let mut rng = XorShift(seed);
    (0..agents)
        .map(|i| {
            let cpus = 8.0 + rng.next(57) as f64;
            AgentCapacity::new(
                &format!("agent-{i:05}"),
                &format!("host-{i:05}"),
                FreeResources::new(cpus, cpus * 2048.0),
            )
            .with_attribute("rack", &format!("r{}", i / 40))
            .with_attribute("zone", &format!("z{}", i / 400))
            .with_bandwidth(if i % 3 == 0 { 25_000.0 } else { 10_000.0 })
        })
        .collect()
}

/// The grid: `MPISWARM_BENCH_SIZES`, comma-separated, or Mesos' scale steps.
fn sizes() -> Vec<usize> {
    let default = vec![1_000, 2_000, 5_000, 10_000];
    match std::env::var("MPISWARM_BENCH_SIZES") {
        Ok(list) => {
            let parsed: Result<Vec<usize>, _> = list.split(',').map(|s| s.trim().parse()).collect();
            parsed.unwrap_or_else(|e| panic!("MPISWARM_BENCH_SIZES={list:?}: {e}; give sizes like 1000,2000"))
        }
        Err(_) => default,
    }
}

fn single_job<M: Measurement>(c: &mut Criterion<M>, clock: &str) {
    let scorer = TopologyScorer::default();
    let mut group = c.benchmark_group(format!("{clock}: place 1024 ranks over N agents"));
    for agents in sizes() {
        let offers = cluster(agents, 0x9e37_79b9_7f4a_7c15);
        let prepared = Cluster::new(&offers, &scorer);
        for (name, profile, policy) in [
            ("pack", Profile::Network, Policy::Pack),
            ("spread", Profile::Cpu, Policy::Spread),
            ("auto-balanced", Profile::Balanced, Policy::Auto),
        ] {
            let job = JobDemand::new(1024, Resources::new(1.0, 1024.0, 0.0)).with_profile(profile).with_policy(policy);
            assert!(place(&job, &offers).is_ok(), "the benchmark job must fit on {agents} agents");
            group.bench_with_input(BenchmarkId::new(format!("from offers/{name}"), agents), &job, |b, job| {
                b.iter(|| place(black_box(job), black_box(&offers)))
            });
            group.bench_with_input(
                BenchmarkId::new(format!("on a prepared cluster/{name}"), agents),
                &job,
                |b, job| b.iter(|| prepared.place(black_box(job))),
            );
        }
    }
    group.finish();
}

fn queue<M: Measurement + 'static>(c: &mut Criterion<M>, clock: &str) {
    let offers = cluster(1_000, 0x2545_f491_4f6c_dd1d);
    let profiles = [Profile::Cpu, Profile::Memory, Profile::Network, Profile::Balanced];
    // Arrivals spread over the same 1,000 s at every size, so the head has
    // waited less than the backfill limit and backfill is on, as at 1,000.
    let options = RoundOptions {
        now: 2_000,
        backfill: Backfill::WhileHeadWaitsLessThan { max_head_wait_secs: 3_600 },
        depth: None,
    };
    let scorer = TopologyScorer::default();
    let mut group = c.benchmark_group(format!("{clock}: queue round of N jobs over 1000 agents"));
    for n in sizes() {
        let mut rng = XorShift(0xdead_beef_cafe_f00d);
        let jobs: Vec<QueuedJob> = (0..n)
            .map(|i| QueuedJob {
                id: format!("job-{i:05}"),
                role: format!("role-{}", i % 4),
                created_at: (i * 1_000 / n) as i64,
                demand: JobDemand::new(1 + rng.next(128) as u32, Resources::new(1.0, 1024.0, 0.0))
                    .with_profile(profiles[rng.next(4) as usize]),
            })
            .collect();
        let round = queue_round(&jobs, &offers, &options, &scorer);
        println!("queue round of {n}: {} started, {} waiting", round.started.len(), round.waiting.len());
        group.bench_with_input(BenchmarkId::from_parameter(n), &jobs, |b, jobs| {
            b.iter(|| queue_round(black_box(jobs), black_box(&offers), &options, &scorer))
        });
    }
    group.finish();
}

fn wall(c: &mut Criterion) {
    single_job(c, "wall");
    queue(c, "wall");
}

fn cpu(c: &mut Criterion<ThreadCpuTime>) {
    single_job(c, "cpu");
    queue(c, "cpu");
}

fn config() -> Criterion {
    // Short: the grid has 28 cases per clock and `make bench` has 30 minutes.
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(10)
}

criterion_group! {
    name = wall_time;
    config = config();
    targets = wall
}
criterion_group! {
    name = cpu_time;
    config = config().with_measurement(ThreadCpuTime(WallTime));
    targets = cpu
}
criterion_main!(wall_time, cpu_time);
