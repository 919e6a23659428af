//! Records the git commit for `admission-proxy --version`: `ADMISSION_PROXY_GIT_COMMIT` from
//! the environment (container builds without `.git`), else `git rev-parse`, else `unknown`.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=ADMISSION_PROXY_GIT_COMMIT");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
    let commit = std::env::var("ADMISSION_PROXY_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| {
            Command::new("git")
                .args(["rev-parse", "--short=12", "HEAD"])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .and_then(|o| String::from_utf8(o.stdout).ok())
                .map(|c| c.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=ADMISSION_PROXY_GIT_COMMIT={commit}");
}
