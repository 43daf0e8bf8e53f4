//! tessel's runtime: host-side values and files, and (later) compiled executables on replicas.
