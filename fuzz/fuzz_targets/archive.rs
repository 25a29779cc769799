//! Fuzz target: see `mur::hostile::archive`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mur::hostile::archive(data));
