//! Unit tests of the interpreter, one module per op family.
