//! The `admission-proxy` binary: parses the command line (`cli`), sets up logging and the
//! allocator, and runs the subcommand: `serve` through the library's `serve::run`, the others in
//! `commands`. The tools that are not library API live beside it: `demo`, `bench`,
//! `example_backend`, `pki` (rcgen). Errors surface here as `anyhow`. The allocator is `alloc`,
//! the one place of the binary allowed `unsafe`.

#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

use admission_proxy::deep_json;
use anyhow::{bail, Context};
use clap::Parser;

use cli::{Cli, Command};

mod alloc;
mod bench;
mod cli;
mod commands;
mod demo;
mod example_backend;
mod pki;

/// A log filter: comma-separated levels (`info`) or `target=level` directives. EnvFilter alone
/// also takes a bare word as a target name, so `--log-level verbose` would quietly log nothing:
/// that is refused here.
fn log_filter(spec: &str, what: &str) -> anyhow::Result<tracing_subscriber::EnvFilter> {
    const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];
    let invalid = || {
        format!("{what} {spec:?} is not a valid log filter (a level: trace, debug, info, warn, error, off; or TARGET=LEVEL, e.g. admission_proxy=debug, comma-separated)")
    };
    for directive in spec.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        if !directive.contains('=') && !LEVELS.contains(&directive.to_ascii_lowercase().as_str()) {
            bail!(invalid());
        }
    }
    let filter =
        tracing_subscriber::EnvFilter::try_new(cap_dependencies(spec)).with_context(invalid)?;
    // kube-rs' HTTP layer logs every failed request to the Kubernetes API as ERROR (`failed
    // with error client error (Connect)`), each retry of the namespace watch included; the
    // proxy logs the same failure once as a WARN with its consequence. Silenced unless the
    // filter names kube_client itself.
    if spec.contains("kube_client") {
        return Ok(filter);
    }
    Ok(filter.add_directive(
        "kube_client::client::builder=off"
            .parse()
            .context("the kube_client directive")?,
    ))
}

/// Levels above which a dependency never logs, whatever the filter asks for: some of their
/// lines quote the bytes of requests and answers, which carry Secrets. pingora's HTTP/1 code
/// logs every chunk of a chunked body it reads at TRACE (`pingora-core`
/// `protocols/http/v1/body.rs`, "Got size N ... chunk: ...", on the listener's requests and
/// the backends' answers alike) and an invalid chunked body's bytes at DEBUG; rustls and hyper
/// log frames at TRACE. So no dependency logs at TRACE, and pingora (every `pingora*` crate:
/// targets match by prefix) not at DEBUG; the proxy's own lines, which redact (`redact`),
/// follow the filter alone.
///
/// Done by rewriting the filter's directives, not with a second, per-event filter: EnvFilter
/// alone keeps its static maximum level, so that at `info` the `log` records of pingora's
/// `trace!` and `debug!` calls are dropped by `log`'s own level check, not evaluated per call
/// (a per-event filter cost 23 µs of CPU per admission, benches/README.md).
fn cap_dependencies(spec: &str) -> String {
    const OURS: &str = "admission_proxy";
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    let rank = |level: &str| LEVELS.iter().position(|l| l.eq_ignore_ascii_case(level));
    // `level` at most `cap` (an unknown word is left for EnvFilter to refuse).
    let capped = |level: &str, cap: &'static str| -> String {
        match (rank(level), rank(cap)) {
            (Some(l), Some(c)) if l > c => cap.to_string(),
            _ => level.to_string(),
        }
    };
    let mut out: Vec<String> = Vec::new();
    let mut cap_pingora = false;
    for directive in spec.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        match directive.rsplit_once('=') {
            // A default level: the proxy's own targets keep it, dependencies at most DEBUG
            // (pingora at most INFO, below).
            None => {
                if capped(directive, "debug") != directive {
                    out.push(format!("{OURS}={directive}"));
                }
                out.push(capped(directive, "debug"));
                cap_pingora |= capped(directive, "info") != directive;
            }
            Some((target, _)) if target.starts_with(OURS) => out.push(directive.into()),
            Some((target, level)) if target.starts_with("pingora") => {
                out.push(format!("{target}={}", capped(level, "info")));
            }
            Some((target, level)) => out.push(format!("{target}={}", capped(level, "debug"))),
        }
    }
    if cap_pingora {
        // More specific than any default; a `pingora…=` directive the filter names was capped
        // above.
        out.push("pingora=info".into());
    }
    out.join(",")
}

/// Logging to stderr. `RUST_LOG` wins over `level`; either, when set and invalid, is an error
/// (a typo must not silently turn logging off). Dependencies are held to
/// [`cap_dependencies`] whatever either says.
fn init_logging(level: &str, json: bool) -> anyhow::Result<()> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(env) if !env.is_empty() => log_filter(&env, "RUST_LOG")?,
        _ => log_filter(level, "--log-level")?,
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
    Ok(())
}

/// Runs the command; an error is printed once, its causes joined, and the exit code is 1.
///
/// The command runs on a thread of [`deep_json::THREAD_STACK_BYTES`], as do the runtime's
/// threads: an object as deep as kube-apiserver sends (10,000 levels) is recursed into by
/// conversion, JSON Patch and drop wherever it is held.
fn main() -> std::process::ExitCode {
    let command = std::thread::Builder::new()
        .name("main-command".into())
        .stack_size(deep_json::THREAD_STACK_BYTES)
        .spawn(run)
        .map_err(anyhow::Error::from)
        .and_then(|thread| {
            thread
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        });
    match command {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}`: each layer's message, then its source's, joined by ": ". The library's
            // errors say only their own layer, or quote a dependency's message whole and end
            // the chain there, so nothing is printed twice.
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Parses the command line and runs the subcommand: `check`, `explain` and `registration`
/// without a runtime, the others on tokio (`serve` with `--worker-threads` threads).
fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let default_level = if matches!(cli.command, Command::Demo(_)) {
        "warn"
    } else {
        "info"
    };
    init_logging(
        cli.log_level.as_deref().unwrap_or(default_level),
        cli.log_json,
    )?;
    if let Command::Check(args) = &cli.command {
        let valid = commands::check(args);
        std::process::exit(if valid { 0 } else { 1 });
    }
    if let Command::Explain(args) = &cli.command {
        return commands::explain(args);
    }
    if let Command::Registration(args) = &cli.command {
        return commands::registration(args);
    }
    if let Command::Candidates(args) = &cli.command {
        return commands::candidates(args);
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.thread_stack_size(deep_json::THREAD_STACK_BYTES);
    if let Command::Serve(args) = &cli.command {
        builder.worker_threads(usize::from(args.worker_threads));
    }
    let runtime = builder
        .enable_all()
        .build()
        .context("start the tokio runtime")?;
    match cli.command {
        Command::Serve(args) => {
            admission_proxy::memory::set_release(alloc::release_freed_memory);
            Ok(runtime.block_on(admission_proxy::serve::run(args.config()))?)
        }
        Command::Bench(args) => runtime.block_on(commands::bench(args)),
        Command::Demo(args) => runtime.block_on(commands::demo(args)),
        Command::Check(_)
        | Command::Explain(_)
        | Command::Registration(_)
        | Command::Candidates(_) => {
            unreachable!("handled before the runtime starts")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::cap_dependencies;

    /// The proxy's targets follow the filter; dependencies at most DEBUG, pingora at most INFO.
    #[test]
    fn dependencies_are_capped_whatever_the_filter_says() {
        for (spec, capped) in [
            ("info", "info"),
            ("warn,admission_proxy=debug", "warn,admission_proxy=debug"),
            ("debug", "debug,pingora=info"),
            ("trace", "admission_proxy=trace,debug,pingora=info"),
            (
                "pingora_core=trace,rustls=trace,admission_proxy::server=trace",
                "pingora_core=info,rustls=debug,admission_proxy::server=trace",
            ),
            ("kube_client=warn", "kube_client=warn"),
        ] {
            assert_eq!(cap_dependencies(spec), capped, "{spec}");
        }
    }
}
