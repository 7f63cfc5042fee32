//! The end-to-end suite on one `mpiswarm up --nodes 3 --node-cpus 2
//! --racks 2 --weights mpi=2,batch=1`: every agent advertises 2 cpus, node1
//! and node3 are in rack-1, node2 in rack-2. The cases run one at a time on
//! that cluster (see mpiswarm_e2e::runner); after each, nothing of
//! mpiswarm's may be left on any node, and after the last `mpiswarm down`
//! may leave no node container, volume or network. Needs the images of
//! `make images`.
//!
//!   cargo test -p mpiswarm-e2e --features mpiswarm-testkit/engine --test suite [-- WORD...]

mod bad_input;
mod burst;
mod controller_restart;
mod examples;
mod load;
mod placement;
mod teardown;

use mpiswarm_e2e::{Cluster, runner};

fn main() {
    runner::run(
        "suite",
        || Cluster::up(3, 2.0, &["--racks", "2", "--weights", "mpi=2,batch=1"]),
        &[
            ("placement::network_job_packs_8_ranks_4_4_on_2_nodes", placement::network_packs),
            ("placement::cpu_job_spreads_8_ranks_3_3_2_on_3_nodes", placement::cpu_spreads),
            ("placement::spread_with_max_2_per_node_runs_6_ranks_2_2_2", placement::spread_capped_fits),
            ("placement::spread_with_max_2_per_node_refuses_7_ranks_naming_the_cap", placement::spread_capped_refused),
            ("placement::node_selector_on_rack_is_honoured", placement::node_selector),
            ("placement::overfilling_job_waits_whole_and_starts_when_the_first_ends", placement::overfill_waits),
            (
                "bad_input::missing_image_exit_3_malformed_yaml_and_schema_violation_leave_a_job_beside_alone",
                bad_input::none_disturbs_a_job_beside,
            ),
            (
                "teardown::delete_of_a_running_3_node_job_returns_when_nothing_is_left",
                teardown::delete_returns_when_nothing_is_left,
            ),
            ("examples::network_yaml_runs_hpcc_across_the_nodes", examples::network_yaml_runs_hpcc_across_the_nodes),
            ("examples::mpich_yaml_runs_pi_on_2_nodes", examples::mpich_yaml_runs_pi_on_2_nodes),
            (
                "controller_restart::a_controller_that_loses_its_lease_is_started_again_and_takes_it_back",
                controller_restart::a_controller_that_loses_its_lease_is_started_again_and_takes_it_back,
            ),
            ("load::hundred_jobs_under_weights_2_to_1", load::hundred_jobs_under_weights_2_to_1),
            ("burst::hundred_twenty_jobs_in_one_apply", burst::hundred_twenty_jobs_in_one_apply),
        ],
    )
}
