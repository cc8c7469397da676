//! Build facts the agent puts in its error reports: the Rust compiler's version and the
//! tokio version of Cargo.lock (`OUTPOST_RUSTC_VERSION`, `OUTPOST_TOKIO_VERSION`).

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=Cargo.lock");
    println!("cargo:rerun-if-env-changed=RUSTC");

    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let rustc_version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "rustc (unknown version)".to_owned());
    println!("cargo:rustc-env=OUTPOST_RUSTC_VERSION={rustc_version}");

    let lock = std::env::var("CARGO_MANIFEST_DIR")
        .ok()
        .and_then(|dir| std::fs::read_to_string(std::path::Path::new(&dir).join("Cargo.lock")).ok())
        .unwrap_or_default();
    let tokio_version = locked_version(&lock, "tokio").unwrap_or("unknown");
    println!("cargo:rustc-env=OUTPOST_TOKIO_VERSION={tokio_version}");
}

/// The version Cargo.lock pins for `package` (the first entry of that name).
fn locked_version<'a>(lock: &'a str, package: &str) -> Option<&'a str> {
    let name_line = format!("name = \"{package}\"");
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == name_line {
            let version = lines.next()?.trim();
            return version
                .strip_prefix("version = \"")
                .and_then(|v| v.strip_suffix('"'));
        }
    }
    None
}
