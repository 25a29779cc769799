//! Fuzz target: see `mur::hostile::script`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mur::hostile::script(data));
