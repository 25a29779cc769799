//! Links `mur` with the functions a short run executes grouped at the start of its code.
//!
//! The kernel maps a binary's code 64 KiB around each page a process first touches. In the
//! compiler's order the code of a one-turn run is spread over most of `.text`, and each window
//! it touches counts in the run's memory; grouped, a one-HTTP-turn run's peak RSS falls from
//! about 14 to 7 MiB. The lists, `link/startup-symbols.PROFILE.txt` (symbol names carry a hash
//! of the profile), are written by `scripts/startup-symbols.sh`; the linker skips names that no
//! longer exist, so a stale list costs memory, never a build.
//!
//! Only lld reads `--symbol-ordering-file`, and lld is rustc's own default linker only on
//! x86_64 Linux (GNU) from Rust 1.90: elsewhere, with another linker configured, or with
//! `MUR_SYMBOL_ORDER=off`, the binary links in the compiler's order.

use std::path::Path;
use std::process::Command;

/// Where the lists are, one per cargo profile: `startup-symbols.PROFILE.txt`.
const LISTS: &str = "link";

fn main() {
    println!("cargo::rerun-if-changed=link");
    println!("cargo::rerun-if-env-changed=MUR_SYMBOL_ORDER");
    let list = profile().map(|p| Path::new(LISTS).join(format!("startup-symbols.{p}.txt")));
    let Some(list) = list.filter(|l| l.is_file()) else {
        // A profile without a list (the test and dev builds): nothing to order.
        return;
    };
    match linker_reads_the_list() {
        Ok(()) => {
            let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
            let list = Path::new(&dir).join(list);
            println!(
                "cargo::rustc-link-arg-bin=mur=-Wl,--symbol-ordering-file={}",
                list.display()
            );
            println!("cargo::rustc-link-arg-bin=mur=-Wl,--no-warn-symbol-ordering");
        }
        Err(Some(why)) => println!(
            "cargo::warning=mur links without its symbol order ({why}): a short run maps about 7 MiB more of its code"
        ),
        Err(None) => {}
    }
}

/// The cargo profile being built (`release`, `dist`, `debug`...), read from the output folder
/// cargo gives this script: `target/[TRIPLE/]PROFILE/build/mur-HASH/out`.
fn profile() -> Option<String> {
    let out = std::env::var("OUT_DIR").ok()?;
    let dir = Path::new(&out).ancestors().nth(3)?.file_name()?;
    Some(dir.to_string_lossy().into_owned())
}

/// `Ok` when this build links with rustc's own lld; else why not (`None`: nothing to say, as on
/// another target or when `MUR_SYMBOL_ORDER=off` asked for it).
fn linker_reads_the_list() -> Result<(), Option<String>> {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    if var("MUR_SYMBOL_ORDER") == "off" || var("TARGET") != "x86_64-unknown-linux-gnu" {
        return Err(None);
    }
    if !var("RUSTC_LINKER").is_empty() {
        return Err(Some(format!(
            "a linker is configured: {}",
            var("RUSTC_LINKER")
        )));
    }
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    if let Some(flag) = flags.split('\x1f').find(|f| {
        ["linker", "link-self-contained", "fuse-ld"]
            .iter()
            .any(|k| f.contains(k))
    }) {
        return Err(Some(format!("RUSTFLAGS choose the linker: {flag}")));
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = Command::new(&rustc)
        .arg("-V")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    // "rustc 1.95.0 (59807616e 2026-04-14)": lld is the default linker from 1.90.
    let minor = version
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.split('.').nth(1))
        .and_then(|m| m.parse::<u32>().ok());
    match minor {
        Some(m) if m >= 90 => Ok(()),
        _ => Err(Some(format!(
            "{} links with the system linker, not lld (Rust 1.90 or later does)",
            version.trim()
        ))),
    }
}
