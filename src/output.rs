//! Printing that never panics: `outln!` and `errln!` in place of `println!` and `eprintln!`.
//!
//! `println!` panics when stdout is a closed pipe (`mur list | head -0`), which would stop a
//! command halfway: an install with some artifacts filed and the rest not. Output is a
//! courtesy to whoever reads it; the work is the command's. So a write that fails (a closed
//! pipe, a full disk behind a redirect) is dropped, and the command carries on and exits as
//! its work decides. Each macro writes one whole formatted piece through a locked handle, so
//! lines from different threads never interleave within a line.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU8, Ordering};

/// `--color`: whether output may carry ANSI colour codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// Colour a stream that is a terminal, unless `NO_COLOR` is set; `CLICOLOR_FORCE` forces it.
    Auto,
    /// Always colour.
    Always,
    /// Never colour.
    Never,
}

static CHOICE: AtomicU8 = AtomicU8::new(0);

/// Sets the process's colour choice (from `--color`), once at start.
pub fn set_color(choice: ColorChoice) {
    CHOICE.store(choice as u8, Ordering::Relaxed);
}

/// Whether a stream may be coloured: `--color`, then `NO_COLOR`, then `CLICOLOR_FORCE`, then
/// whether the stream is a terminal.
fn colour(is_terminal: bool) -> bool {
    let set = |v: &str| std::env::var_os(v).is_some_and(|x| !x.is_empty() && x != "0");
    match CHOICE.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ if set("NO_COLOR") => false,
        _ if set("CLICOLOR_FORCE") => true,
        _ => is_terminal,
    }
}

/// Whether stdout may carry colour.
pub fn color_stdout() -> bool {
    colour(std::io::stdout().is_terminal())
}

/// Whether stderr (diagnostics, logs) may carry colour.
pub fn color_stderr() -> bool {
    colour(std::io::stderr().is_terminal())
}

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
