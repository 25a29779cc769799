//! Fuzz target: see `mur::hostile::trace_lines`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mur::hostile::trace_lines(data));
