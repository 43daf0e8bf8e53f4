//! Reading Keras model files: the `.keras` zip, legacy `.h5` and SavedModel formats of the
//! fixtures made by `tests/keras/make_fixtures.py`, the HDF5 reader on h5py-written files, and
//! the errors for corrupt, truncated and foreign files.

mod errors;
mod fixtures;
mod formats;
mod fuzz;
mod h5py_files;
mod same_model;
