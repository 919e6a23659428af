//! Hot reload of the webhook configuration, the namespaces file and the serving certificate.
//! As library-notes advise for ConfigMap/Secret volumes (which swap a `..data` symlink): watch
//! the *directories* non-recursively, debounce, re-read and compare contents, validate, then
//! swap the snapshot; a periodic re-read is the backstop. An invalid change is logged with its
//! locations and the last good configuration keeps serving. Depends on `config`, `matching`,
//! `server`, `tls` and `metrics`.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::RecursiveMode;
use notify_debouncer_full::{new_debouncer, DebounceEventResult};

use crate::config::{self, ConfigError};
use crate::matching::Namespaces;
use crate::server::State;
use crate::tls::{load_certified_key, CertResolver};

/// How long file events are collected before one reload.
pub const DEBOUNCE: Duration = Duration::from_millis(150);

/// What to watch and where the results go.
pub struct Sources {
    pub config: PathBuf,
    pub namespaces: Option<PathBuf>,
    /// Serving certificate and key files, reloaded as a pair.
    pub tls: Option<(PathBuf, PathBuf, Arc<CertResolver>)>,
    /// Backstop re-read interval.
    pub resync: Duration,
}

/// Keeps the watcher alive; dropping it stops reloading.
pub struct ReloadHandle {
    _watcher: Box<dyn std::any::Any + Send>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ReloadHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Default)]
struct Fingerprints {
    config: Option<u64>,
    namespaces: Option<u64>,
    tls: Option<u64>,
}

fn fingerprint(parts: &[(PathBuf, Vec<u8>)]) -> u64 {
    let mut h = DefaultHasher::new();
    parts.hash(&mut h);
    h.finish()
}

fn read_all(paths: &[PathBuf]) -> std::io::Result<Vec<(PathBuf, Vec<u8>)>> {
    paths
        .iter()
        .map(|p| Ok((p.clone(), std::fs::read(p)?)))
        .collect()
}

/// `(file, contents)` of every config file.
type ConfigTexts = Vec<(PathBuf, String)>;

/// Reads the config files; `Ok(None)` when unchanged since the last successful load.
fn changed_config(
    path: &Path,
    last: Option<u64>,
) -> Result<Option<(u64, ConfigTexts)>, ConfigError> {
    let files = config::config_files(path)?;
    let raw = read_all(&files).map_err(|source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let fp = fingerprint(&raw);
    if Some(fp) == last {
        return Ok(None);
    }
    let mut texts = Vec::with_capacity(raw.len());
    for (p, bytes) in raw {
        match String::from_utf8(bytes) {
            Ok(t) => texts.push((p, t)),
            Err(_) => {
                return Err(ConfigError::Io {
                    path: p,
                    source: std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"),
                });
            }
        }
    }
    Ok(Some((fp, texts)))
}

impl Sources {
    fn reload_once(&self, state: &State, fps: &mut Fingerprints) {
        match changed_config(&self.config, fps.config) {
            Ok(None) => {}
            Ok(Some((fp, texts))) => match config::load_contents(&texts) {
                Ok(snapshot) => {
                    for w in &snapshot.warnings {
                        tracing::warn!(warning = %w, "webhook configuration warning");
                    }
                    tracing::info!(
                        webhooks = snapshot.webhooks.len(),
                        files = snapshot.files.len(),
                        "webhook configuration reloaded"
                    );
                    state.config.store(Arc::new(snapshot));
                    fps.config = Some(fp);
                    crate::metrics::reload("ok");
                }
                Err(e) => self.rejected(&e, fps, fp),
            },
            Err(e) => {
                tracing::error!(error = %e, "webhook configuration not reloaded; the last good configuration keeps serving");
                crate::metrics::reload("error");
            }
        }
        if let Some(ns_path) = &self.namespaces {
            match read_all(std::slice::from_ref(ns_path)) {
                Ok(raw) if Some(fingerprint(&raw)) != fps.namespaces => {
                    let fp = fingerprint(&raw);
                    match Namespaces::parse(&String::from_utf8_lossy(&raw[0].1)) {
                        Ok(ns) => {
                            tracing::info!(namespaces = ns.len(), "namespaces reloaded");
                            state.namespaces.store(Some(Arc::new(ns)));
                            fps.namespaces = Some(fp);
                        }
                        Err(e) => {
                            tracing::error!(file = %ns_path.display(), error = %e, "namespaces file not reloaded; the last good one keeps serving");
                            fps.namespaces = Some(fp);
                        }
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::error!(file = %ns_path.display(), error = %e, "cannot read namespaces file")
                }
            }
        }
        if let Some((cert, key, resolver)) = &self.tls {
            if let Ok(raw) = read_all(&[cert.clone(), key.clone()]) {
                let fp = fingerprint(&raw);
                if fps.tls.is_some_and(|last| last != fp) {
                    match load_certified_key(cert, key) {
                        Ok(k) => {
                            resolver.replace(k);
                            tracing::info!(cert = %cert.display(), "serving certificate reloaded");
                        }
                        Err(e) => tracing::error!(error = %e, "serving certificate not reloaded"),
                    }
                }
                fps.tls = Some(fp);
            }
        }
    }

    fn rejected(&self, e: &ConfigError, fps: &mut Fingerprints, fp: u64) {
        if let ConfigError::Invalid(problems) = e {
            for p in problems {
                tracing::error!(problem = %p, "invalid webhook configuration");
            }
        }
        tracing::error!(
            "webhook configuration change rejected; the last good configuration keeps serving"
        );
        // Remember the bad contents so that the periodic re-read does not log them again.
        fps.config = Some(fp);
        crate::metrics::reload("error");
    }

    /// Watches the sources and reloads `state` on change. The current contents count as
    /// already loaded (the caller loaded them at startup).
    ///
    /// # Errors
    /// The watcher could not be created or a directory not watched.
    pub fn spawn(self, state: Arc<State>) -> Result<ReloadHandle, notify::Error> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let mut debouncer = new_debouncer(DEBOUNCE, None, move |result: DebounceEventResult| {
            if result.is_ok() {
                let _ = tx.send(());
            }
        })?;
        let mut dirs: Vec<PathBuf> = Vec::new();
        let mut add_dir = |p: &Path| {
            let dir = if p.is_dir() {
                p.to_path_buf()
            } else {
                p.parent()
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|| PathBuf::from("."))
            };
            let dir = if dir.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                dir
            };
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        };
        add_dir(&self.config);
        if let Some(ns) = &self.namespaces {
            add_dir(ns);
        }
        if let Some((cert, key, _)) = &self.tls {
            add_dir(cert);
            add_dir(key);
        }
        for dir in &dirs {
            debouncer.watch(dir, RecursiveMode::NonRecursive)?;
        }
        let mut fps = Fingerprints::default();
        if let Ok(Some((fp, _))) = changed_config(&self.config, None) {
            fps.config = Some(fp);
        }
        if let Some(ns) = &self.namespaces {
            fps.namespaces = read_all(std::slice::from_ref(ns))
                .ok()
                .map(|r| fingerprint(&r));
        }
        if let Some((cert, key, _)) = &self.tls {
            fps.tls = read_all(&[cert.clone(), key.clone()])
                .ok()
                .map(|r| fingerprint(&r));
        }
        let resync = self.resync;
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(resync);
            tick.tick().await;
            loop {
                tokio::select! {
                    event = rx.recv() => if event.is_none() { break },
                    _ = tick.tick() => {}
                }
                // Drain bursts: one reload per batch of events.
                while rx.try_recv().is_ok() {}
                self.reload_once(&state, &mut fps);
            }
        });
        Ok(ReloadHandle {
            _watcher: Box::new(debouncer),
            task,
        })
    }
}
