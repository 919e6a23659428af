#!/usr/bin/env bash
# Cross-compiles the linux/arm64 image's binary on an x86_64 host: statically linked (as the
# amd64 one), with Debian's aarch64 cross toolchain (gcc-aarch64-linux-gnu,
# libc6-dev-arm64-cross) for the linker and the C the dependencies build (ring, mimalloc).
# Not profile-guided: see docs/operating.md, "Container image".
# Output: target/aarch64-unknown-linux-gnu/release/admission-proxy.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
export CXX_aarch64_unknown_linux_gnu=aarch64-linux-gnu-g++
export AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar
# With --target, RUSTFLAGS reach the target's crates only, not build scripts run on the host.
RUSTFLAGS="-C target-feature=+crt-static ${RUSTFLAGS:-}" \
  cargo build --release --locked --target aarch64-unknown-linux-gnu
