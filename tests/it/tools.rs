//! The binary's tools (demo, bench, the example backend, the PKI), compiled in from
//! src/bin/admission-proxy: they are not library API. Siblings here as in the binary, whose
//! `demo` names the others as `super::`.

#![allow(dead_code)] // the tests use part of them

#[path = "../../src/bin/admission-proxy/bench.rs"]
pub(crate) mod bench;
#[path = "../../src/bin/admission-proxy/demo.rs"]
pub(crate) mod demo;
#[path = "../../src/bin/admission-proxy/example_backend.rs"]
pub(crate) mod example_backend;
#[path = "../../src/bin/admission-proxy/pki.rs"]
pub(crate) mod pki;
