//! Hostfile syntax per MPI implementation: Open MPI writes `host slots=N`,
//! MPICH (Hydra) writes `host:N`. The controller builds the file from a
//! placement; the launcher hands it to `mpirun`.

use crate::spec::Implementation;

impl Implementation {
    /// One hostfile line for `slots` ranks on `host`.
    pub fn hostfile_line(self, host: &str, slots: u32) -> String {
        match self {
            Implementation::OpenMPI => format!("{host} slots={slots}"),
            Implementation::Mpich => format!("{host}:{slots}"),
        }
    }

    /// A whole hostfile, one line per `(host, slots)`, in order.
    pub fn hostfile<'a>(self, hosts: impl IntoIterator<Item = (&'a str, u32)>) -> String {
        hosts.into_iter().map(|(h, s)| self.hostfile_line(h, s) + "\n").collect()
    }

    /// The `mpirun` flag that names the hostfile.
    pub fn hostfile_flag(self) -> &'static str {
        match self {
            Implementation::OpenMPI => "--hostfile",
            Implementation::Mpich => "-f",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_mpi_and_mpich_spell_slots_differently() {
        let hosts = [("w-0", 4), ("w-1", 2)];
        assert_eq!(Implementation::OpenMPI.hostfile(hosts), "w-0 slots=4\nw-1 slots=2\n");
        assert_eq!(Implementation::Mpich.hostfile(hosts), "w-0:4\nw-1:2\n");
    }
}
