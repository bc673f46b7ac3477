//! One integration-test binary; each concern is a module.

mod header;
