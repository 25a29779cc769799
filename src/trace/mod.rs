//! Reading `trace.jsonl` and the `mur trace` views. (Being written: see issue 6.)

pub mod cli;
