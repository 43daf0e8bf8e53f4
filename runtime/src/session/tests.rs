//! Tests of the session API.
