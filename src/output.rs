//! Printing that never panics: `outln!` and `errln!` in place of `println!` and `eprintln!`.
//!
//! `println!` panics when stdout is a closed pipe (`mur list | head -0`), which would stop a
//! command halfway: an install with some artifacts filed and the rest not. Output is a
//! courtesy to whoever reads it; the work is the command's. So a write that fails (a closed
//! pipe, a full disk behind a redirect) is dropped, and the command carries on and exits as
//! its work decides. Each macro writes one whole formatted piece through a locked handle, so
//! lines from different threads never interleave within a line.

use std::io::Write;

/// Writes formatted text to stdout, dropping it if stdout is gone.
pub fn out(args: std::fmt::Arguments<'_>) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_fmt(args);
    let _ = o.flush();
}

/// Writes formatted text to stderr, dropping it if stderr is gone.
pub fn err(args: std::fmt::Arguments<'_>) {
    let _ = std::io::stderr().lock().write_fmt(args);
}

/// `print!` that never panics (see [`crate::output`]).
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::output::out(format_args!($($arg)*)) };
}

/// `println!` that never panics (see [`crate::output`]).
#[macro_export]
macro_rules! outln {
    () => { $crate::output::out(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::output::out(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `eprintln!` that never panics (see [`crate::output`]).
#[macro_export]
macro_rules! errln {
    () => { $crate::output::err(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::output::err(format_args!("{}\n", format_args!($($arg)*))) };
}
