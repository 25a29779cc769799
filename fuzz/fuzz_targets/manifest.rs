//! Fuzz target: see `mur::hostile::manifest`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mur::hostile::manifest(data));
