//! The command line explains itself: every subcommand's `--help` shows examples, and
//! `mur completions` and `mur man` print what shells and `man` read.

mod common;

use common::*;

const SUBCOMMANDS: [&str; 8] = [
    "run",
    "doctor",
    "trace",
    "build",
    "install",
    "list",
    "completions",
    "man",
];

#[test]
fn every_subcommand_help_has_an_example() {
    for sub in SUBCOMMANDS {
        let out = mur().args([sub, "--help"]).output().unwrap();
        assert!(out.status.success(), "{sub}");
        let text = stdout(&out);
        assert!(
            text.contains("Example") && text.contains(&format!("mur {sub}")),
            "mur {sub} --help shows no example:\n{text}"
        );
    }
}

#[test]
fn completions_cover_every_subcommand_in_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let out = mur().args(["completions", shell]).output().unwrap();
        assert!(out.status.success(), "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        for sub in SUBCOMMANDS {
            assert!(script.contains(sub), "{shell} completion lacks {sub}");
        }
    }
    let out = mur().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}

#[test]
fn the_man_page_is_roff_naming_the_subcommands() {
    let out = mur().arg("man").output().unwrap();
    assert!(out.status.success());
    let page = stdout(&out);
    assert!(page.contains(".TH mur 1"), "{page}");
    for sub in ["run", "doctor", "install"] {
        assert!(page.contains(sub), "{sub}");
    }
}
