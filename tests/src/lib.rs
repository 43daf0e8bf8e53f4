//! Shared helpers for the integration and golden tests.
