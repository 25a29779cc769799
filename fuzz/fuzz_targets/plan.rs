//! Fuzz target: see `mur::hostile::plan`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mur::hostile::plan(data));
