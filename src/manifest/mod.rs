//! `murmur.yaml`: loading, validation and diagnostics. (Being written: see issue 2.)

pub mod doctor;
