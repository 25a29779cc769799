//! The mur kernel: the actors a capsule runs on and the traits they call through.
//!
//! No HTTP, no CLI, no YAML here: the edges (drivers, executors, stores) live in the `mur`
//! crate and reach the kernel only through the traits in [`model`] and [`tool`].

pub mod model;
