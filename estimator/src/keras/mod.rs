//! Keras models: the files Keras saves them in ([`file`]), read with an in-tree HDF5 reader
//! ([`hdf5`]).

pub mod file;
pub mod hdf5;
