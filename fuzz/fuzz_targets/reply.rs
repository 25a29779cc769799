//! Fuzz target: see `mur::hostile::reply`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mur::hostile::reply(data));
