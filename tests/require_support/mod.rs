//! What a test does when this machine lacks a tool it needs (root, iproute2, npm,
//! Chromium, python3 with aiosmtpd): outside CI it prints a SKIP line and returns; with
//! `OUTPOST_TESTS_REQUIRE_ALL=1`, which `scripts/test` (and so CI) sets after installing
//! every tool, it fails instead, so a missing tool can never turn a run green untested.
#![allow(dead_code)]

/// The variable that turns skips into failures.
pub const REQUIRE_ALL: &str = "OUTPOST_TESTS_REQUIRE_ALL";

/// Skips (prints `SKIP <why>`) or, when every tool is required, panics with `why`.
pub fn skip(why: &str) {
    if std::env::var_os(REQUIRE_ALL).is_some_and(|v| v == "1") {
        panic!("{why} ({REQUIRE_ALL}=1: scripts/test installs what every test needs)");
    }
    println!("SKIP {why}");
}
