//! `mpiswarm version`: what this binary is and which API versions it speaks.

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub fn print() {
    println!("mpiswarm {VERSION}");
    println!("MpiJob API: {}", mpiswarm_crds::API_VERSION);
}
