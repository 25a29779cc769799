//! Fuzz target: see `mur::hostile::lock`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mur::hostile::lock(data));
