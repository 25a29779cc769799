//! Fuzz target: see `mur::hostile::peer`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mur::hostile::peer(data));
