//! The mpiswarm offer layer (work in progress).
