//! Hot reload of the webhook configuration, the namespaces file, the serving certificate and
//! the client CA (`--client-ca-file`).
//! For ConfigMap/Secret volumes (the kubelet swaps a `..data` symlink, so file watches go
//! stale): watch the *directories* non-recursively, debounce, re-read and compare contents,
//! validate, then swap the snapshot; a periodic re-read is the backstop. An invalid change is
//! logged with its locations and the last good configuration keeps serving. Depends on
//! `config`, `matching`, `server`, `tls` and `metrics`.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecursiveMode};
use notify_debouncer_full::{new_debouncer, DebounceEventResult};

use crate::config::{self, ConfigError};
use crate::files::{self, MAX_CONFIG_FILE_BYTES, MAX_PEM_FILE_BYTES};
use crate::matching::Namespaces;
use crate::server::State;
use crate::tls::{load_certified_key, CertResolver, ClientAuth};

/// How long file events are collected before one reload.
pub(crate) const DEBOUNCE: Duration = Duration::from_millis(150);

/// How often the debouncer looks for collected events. Its default (a quarter of [`DEBOUNCE`])
/// woke the process 27 times a second while idle; at [`DEBOUNCE`] a change is reloaded within
/// 300 ms and an idle sidecar wakes 7 times a second.
const DEBOUNCE_TICK: Duration = DEBOUNCE;

/// What to watch and where the results go.
pub(crate) struct Sources {
    pub(crate) config: PathBuf,
    pub(crate) namespaces: Option<PathBuf>,
    /// Serving certificate and key files, reloaded as a pair.
    pub(crate) tls: Option<(PathBuf, PathBuf, Arc<CertResolver>)>,
    /// The client CA file (`--client-ca-file`) and the verifier it feeds.
    pub(crate) client_ca: Option<(PathBuf, Arc<ClientAuth>)>,
    /// Backstop re-read interval.
    pub(crate) resync: Duration,
    /// `serve --authorizer` is on: configurations that use `authorizer` may load
    /// ([`config::Snapshot::require_authorizer`]).
    pub(crate) authorizer: bool,
    /// `serve` reads namespace labels (a namespaces file or the watch): configurations whose
    /// webhooks select by them may load ([`config::Snapshot::require_namespaces`]).
    pub(crate) namespace_source: bool,
}

/// Keeps the watcher alive; dropping it stops reloading (the reload thread sees its event
/// channel close and ends).
pub(crate) struct ReloadHandle {
    _watcher: Box<dyn std::any::Any + Send>,
}

#[derive(Default)]
struct Fingerprints {
    config: Option<u64>,
    namespaces: Option<u64>,
    tls: Option<u64>,
    client_ca: Option<u64>,
}

fn fingerprint<T: Hash>(parts: &[T]) -> u64 {
    let mut h = DefaultHasher::new();
    parts.hash(&mut h);
    h.finish()
}

/// Every file of `paths`, each a regular file of at most `limit` bytes
/// ([`files::read`]: a named pipe put in place of one is refused, never waited on).
fn read_all(paths: &[PathBuf], limit: u64) -> std::io::Result<Vec<(PathBuf, Vec<u8>)>> {
    paths
        .iter()
        .map(|p| Ok((p.clone(), files::read(p, limit)?)))
        .collect()
}

/// `(file, contents)` of every config file.
type ConfigTexts = Vec<(PathBuf, String)>;

/// Reads the config files ([`config::read_files`]); `Ok(None)` when unchanged since the last
/// successful load.
fn changed_config(
    path: &Path,
    last: Option<u64>,
) -> Result<Option<(u64, ConfigTexts)>, ConfigError> {
    let texts = config::read_files(path)?;
    let fp = fingerprint(&texts);
    if Some(fp) == last {
        return Ok(None);
    }
    Ok(Some((fp, texts)))
}

/// Logs that `snapshot` was loaded (at start) or `reloaded`, with its size, and exports its
/// generation, hash and size: the one place either is logged.
pub(crate) fn loaded(snapshot: &config::Snapshot, reloaded: bool) {
    let (webhooks, custom_resources, files) = (
        snapshot.len(),
        snapshot.custom_resources.len(),
        snapshot.files.len(),
    );
    if reloaded {
        tracing::info!(
            webhooks,
            custom_resources,
            files,
            "webhook configuration reloaded"
        );
    } else {
        tracing::info!(
            webhooks,
            custom_resources,
            files,
            "webhook configuration loaded"
        );
    }
    crate::metrics::config_loaded(snapshot.hash, snapshot.len());
}

impl Sources {
    /// Reloads each source whose contents changed since `fps`, in order: the webhook
    /// configuration, the namespaces file, the serving certificate, the client CA.
    fn reload_once(&self, state: &State, fps: &mut Fingerprints) {
        self.reload_config(state, fps);
        self.reload_namespaces(state, fps);
        self.reload_serving_certificate(fps);
        self.reload_client_ca(fps);
    }

    /// The webhook configuration: served when it loads, else refused with the last good one
    /// serving.
    fn reload_config(&self, state: &State, fps: &mut Fingerprints) {
        match changed_config(&self.config, fps.config) {
            Ok(None) => {}
            Ok(Some((fp, texts))) => match config::load_contents(&texts).and_then(|snapshot| {
                snapshot.require_authorizer(self.authorizer)?;
                snapshot.require_namespaces(self.namespace_source)?;
                Ok(snapshot)
            }) {
                // An in-place write (truncate, then write) can be read between the two: an
                // empty file must not take every webhook away. Restart to serve none.
                Ok(snapshot)
                    if snapshot.is_empty() && !state.admissions.config.load().is_empty() =>
                {
                    tracing::error!(
                        config = %self.config.display(),
                        "the changed webhook configuration has no webhooks (an empty or partly written file?)"
                    );
                    self.rejected(&ConfigError::Invalid(Vec::new()), fps, fp);
                }
                Ok(snapshot) => {
                    for w in &snapshot.warnings {
                        tracing::warn!(warning = %w, "webhook configuration warning");
                    }
                    // Served and counted before `loaded` says the latest load succeeded: a
                    // scrape that sees the gauge at 1 sees this reload counted too.
                    let snapshot = Arc::new(snapshot);
                    state.admissions.config.store(snapshot.clone());
                    fps.config = Some(fp);
                    crate::metrics::reload("ok");
                    loaded(&snapshot, true);
                }
                Err(e) => self.rejected(&e, fps, fp),
            },
            Err(e) => {
                tracing::error!(error = %e, "webhook configuration not reloaded; the last good configuration keeps serving");
                // Forgotten, so that the served files put back unchanged are reloaded: else
                // they would read as unchanged and the refusal stay exported.
                fps.config = None;
                crate::metrics::reload("error");
            }
        }
    }

    /// The namespaces file, for namespaceSelector.
    fn reload_namespaces(&self, state: &State, fps: &mut Fingerprints) {
        if let Some(ns_path) = &self.namespaces {
            match read_all(std::slice::from_ref(ns_path), MAX_CONFIG_FILE_BYTES) {
                Ok(raw) if Some(fingerprint(&raw)) != fps.namespaces => {
                    let fp = fingerprint(&raw);
                    match Namespaces::parse(&String::from_utf8_lossy(&raw[0].1)) {
                        Ok(ns) => {
                            tracing::info!(namespaces = ns.len(), "namespaces reloaded");
                            state.admissions.namespaces.store(Some(Arc::new(ns)));
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
                    tracing::error!(file = %ns_path.display(), error = %e, "cannot read namespaces file");
                }
            }
        }
    }

    /// The serving certificate and key.
    fn reload_serving_certificate(&self, fps: &mut Fingerprints) {
        if let Some((cert, key, resolver)) = &self.tls {
            if let Ok(raw) = read_all(&[cert.clone(), key.clone()], MAX_PEM_FILE_BYTES) {
                let fp = fingerprint(&raw);
                if fps.tls.is_some_and(|last| last != fp) {
                    match load_certified_key(cert, key) {
                        Ok(k) => {
                            if let Some(not_after) = crate::tls::not_after(&k) {
                                crate::metrics::serving_certificate(not_after);
                            }
                            resolver.replace(k);
                            tracing::info!(cert = %cert.display(), "serving certificate reloaded");
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "serving certificate not reloaded; the last good pair keeps serving");
                        }
                    }
                }
                fps.tls = Some(fp);
            }
        }
    }

    /// The CA that verifies kube-apiserver's client certificate.
    fn reload_client_ca(&self, fps: &mut Fingerprints) {
        if let Some((file, auth)) = &self.client_ca {
            if let Ok(raw) = read_all(std::slice::from_ref(file), MAX_PEM_FILE_BYTES) {
                let fp = fingerprint(&raw);
                if fps.client_ca.is_some_and(|last| last != fp) {
                    match auth.replace(&raw[0].1) {
                        Ok(()) => tracing::info!(file = %file.display(), "client CA reloaded"),
                        Err(e) => {
                            tracing::error!(file = %file.display(), error = %e, "client CA not reloaded; the last good one keeps verifying");
                        }
                    }
                }
                fps.client_ca = Some(fp);
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

    /// The watched directories, each with the entry names that matter in it (`None`: every
    /// entry, for the config directory).
    fn interests(&self) -> Vec<Interest> {
        let mut out: Vec<Interest> = Vec::new();
        let mut add = |p: &Path| {
            // Absolute as notify reports event paths: joined to the working directory, not
            // canonicalized, so symlinked directories still compare equal.
            let p = std::env::current_dir().map_or_else(|_| p.to_path_buf(), |cwd| cwd.join(p));
            let (dir, name) = if p.is_dir() {
                (p.to_path_buf(), None)
            } else {
                let dir = p.parent().map_or_else(|| p.clone(), Path::to_path_buf);
                (dir, p.file_name().map(std::ffi::OsStr::to_os_string))
            };
            match out.iter_mut().find(|i| i.dir == dir) {
                Some(i) => match (&mut i.names, name) {
                    (Some(names), Some(n)) => names.push(n),
                    (names, _) => *names = None,
                },
                None => out.push(Interest {
                    dir,
                    names: name.map(|n| vec![n]),
                }),
            }
        };
        add(&self.config);
        if let Some(ns) = &self.namespaces {
            add(ns);
        }
        if let Some((cert, key, _)) = &self.tls {
            add(cert);
            add(key);
        }
        if let Some((ca, _)) = &self.client_ca {
            add(ca);
        }
        out
    }

    /// Watches the sources and reloads `state` on change. The current contents count as
    /// already loaded (the caller loaded them at startup).
    ///
    /// # Errors
    /// The watcher could not be created or a directory not watched.
    ///
    /// Over 80 lines: the watches and the thread they wake share their channel and the
    /// recreated-directory list; they read best in one place.
    pub(crate) fn spawn(self, state: Arc<State>) -> Result<ReloadHandle, notify::Error> {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let mut interests = self.interests();
        let dirs: Vec<PathBuf> = interests.iter().map(|i| i.dir.clone()).collect();
        let parents = watch_parents(&mut interests, &dirs);
        // Watched directories seen created again (by their parent's watch), for [`rearm`].
        let recreated: Arc<parking_lot::Mutex<Vec<PathBuf>>> = Arc::default();
        let created = recreated.clone();
        let watched = dirs.clone();
        let mut debouncer = new_debouncer(
            DEBOUNCE,
            Some(DEBOUNCE_TICK),
            move |result: DebounceEventResult| {
                let Ok(events) = result else {
                    return;
                };
                for e in events
                    .iter()
                    .filter(|e| matches!(e.kind, EventKind::Create(_)))
                {
                    let mut created = created.lock();
                    for p in e.paths.iter().filter(|p| watched.contains(p)) {
                        if !created.contains(p) {
                            created.push(p.clone());
                        }
                    }
                }
                let relevant = events.iter().any(|e| {
                    changes_content(&e.kind) && e.paths.iter().any(|p| matters(&interests, p))
                });
                if relevant {
                    let _ = tx.send(());
                }
            },
        )?;
        for dir in &dirs {
            debouncer.watch(dir, RecursiveMode::NonRecursive)?;
        }
        for parent in &parents {
            // Best effort: without it, a recreated directory is still found at the resync.
            if let Err(e) = debouncer.watch(parent, RecursiveMode::NonRecursive) {
                tracing::debug!(dir = %parent.display(), error = %e, "parent directory not watched");
            }
        }
        let debouncer = Arc::new(parking_lot::Mutex::new(debouncer));
        let rearm_with = Arc::downgrade(&debouncer);
        let mut fps = self.fingerprints();
        // Reloads run on a thread of their own: off the request threads (a 1,000-webhook
        // configuration takes a while to load, and the proxy may run one worker thread), and
        // one thread allocates and frees every snapshot, so that releasing memory there returns
        // the load's whole peak to the OS (`memory::release`).
        let sources = self;
        std::thread::Builder::new()
            .name("config-reload".into())
            // Compiling and dropping a configuration recurses over its expressions and values.
            .stack_size(crate::deep_json::THREAD_STACK_BYTES)
            .spawn(move || {
                let mut next_resync = crate::clock::now() + sources.resync;
                loop {
                    let wait = next_resync.saturating_duration_since(crate::clock::now());
                    match rx.recv_timeout(wait) {
                        Ok(()) => {}
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                            next_resync = crate::clock::now() + sources.resync;
                        }
                        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                    // Drain bursts: one reload per batch of events.
                    while rx.try_recv().is_ok() {}
                    // Before reading, so that a file written into a recreated directory after
                    // this read still raises an event.
                    rearm(&rearm_with, std::mem::take(&mut *recreated.lock()));
                    sources.reload_once(&state, &mut fps);
                    // The load's peak (YAML, JSON values, the old snapshot) back to the OS.
                    crate::memory::release();
                }
            })
            .map_err(|e| notify::Error::generic(&format!("start the reload thread: {e}")))?;
        Ok(ReloadHandle {
            _watcher: Box::new(debouncer),
        })
    }

    /// The sources' fingerprints as they are now (what the caller loaded at startup); an
    /// unreadable source has none, so that it is loaded once it can be read.
    fn fingerprints(&self) -> Fingerprints {
        let of = |paths: &[PathBuf], limit| read_all(paths, limit).ok().map(|r| fingerprint(&r));
        Fingerprints {
            config: changed_config(&self.config, None)
                .ok()
                .flatten()
                .map(|(fp, _)| fp),
            namespaces: self
                .namespaces
                .as_ref()
                .and_then(|ns| of(std::slice::from_ref(ns), MAX_CONFIG_FILE_BYTES)),
            tls: self
                .tls
                .as_ref()
                .and_then(|(cert, key, _)| of(&[cert.clone(), key.clone()], MAX_PEM_FILE_BYTES)),
            client_ca: self
                .client_ca
                .as_ref()
                .and_then(|(ca, _)| of(std::slice::from_ref(ca), MAX_PEM_FILE_BYTES)),
        }
    }
}

/// Adds each watched directory's parent to `interests`, for the directory's own name only, and
/// returns the parents not watched already: a directory that is deleted and created again
/// takes its inotify watch with it, and only its parent sees it come back (the reload thread
/// then re-arms the watch, [`rearm`]).
fn watch_parents(interests: &mut Vec<Interest>, dirs: &[PathBuf]) -> Vec<PathBuf> {
    dirs.iter()
        .filter_map(|dir| {
            let parent = dir.parent()?.to_path_buf();
            let name = dir.file_name()?.to_os_string();
            match interests.iter_mut().find(|i| i.dir == parent) {
                Some(i) => {
                    if let Some(names) = &mut i.names {
                        names.push(name);
                    }
                    None
                }
                None => {
                    interests.push(Interest {
                        dir: parent.clone(),
                        names: Some(vec![name]),
                    });
                    Some(parent)
                }
            }
        })
        .collect()
}

/// Watches again every directory in `recreated`: deleted and created again, it lost its inotify
/// watch, and its changes were otherwise seen only at the periodic resync. Its
/// parent's watch reported the creation (an inode number alone cannot tell: a new directory
/// often gets the old one's). Does nothing once the watcher is gone.
fn rearm<W: notify::Watcher, C: notify_debouncer_full::FileIdCache>(
    debouncer: &std::sync::Weak<parking_lot::Mutex<notify_debouncer_full::Debouncer<W, C>>>,
    recreated: Vec<PathBuf>,
) {
    if recreated.is_empty() {
        return;
    }
    let Some(debouncer) = debouncer.upgrade() else {
        return;
    };
    let mut debouncer = debouncer.lock();
    for dir in recreated {
        // The old watch went with the old directory (inotify dropped it); a new one is added.
        match debouncer.watch(&dir, RecursiveMode::NonRecursive) {
            Ok(()) => {
                tracing::info!(dir = %dir.display(), "watched directory was created again; watching it again");
            }
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot watch the recreated directory; its changes are seen at the periodic resync");
            }
        }
    }
}

/// A watched directory and the entry names in it that matter (`None`: all).
struct Interest {
    /// Absolute, as notify reports event paths.
    dir: PathBuf,
    names: Option<Vec<std::ffi::OsString>>,
}

/// Whether an event can change what a file holds. Opening or reading a file cannot: without
/// this filter the proxy's own re-read (open, read, close) raised new events and the watcher
/// re-read its files in an endless loop, a few times a second, even when idle.
fn changes_content(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

/// Whether `path` is one of the watched files, any entry of the config directory, or a
/// Kubernetes volume's `..data`/`..<timestamp>` entry (the atomic swap of a ConfigMap or
/// Secret volume). Other files sharing a directory (logs, say) do not trigger re-reads.
fn matters(interests: &[Interest], path: &Path) -> bool {
    let Some(name) = path.file_name() else {
        return false;
    };
    interests.iter().any(|i| {
        path.parent().is_some_and(|d| d == i.dir)
            && (name.as_encoded_bytes().starts_with(b"..")
                || i.names
                    .as_ref()
                    .is_none_or(|names| names.iter().any(|n| n == name)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{CreateKind, ModifyKind};

    fn sources(dir: &Path) -> Sources {
        Sources {
            config: dir.join("config"),
            namespaces: Some(dir.join("ns/namespaces.yaml")),
            tls: None,
            client_ca: None,
            resync: Duration::from_secs(30),
            authorizer: false,
            namespace_source: true,
        }
    }

    /// Reading our own files must not count as a change (this looped forever before).
    #[test]
    fn opening_and_reading_are_not_changes() {
        assert!(!changes_content(&EventKind::Access(AccessKind::Open(
            AccessMode::Any
        ))));
        assert!(!changes_content(&EventKind::Access(AccessKind::Close(
            AccessMode::Read
        ))));
        assert!(changes_content(&EventKind::Access(AccessKind::Close(
            AccessMode::Write
        ))));
        assert!(changes_content(&EventKind::Modify(ModifyKind::Any)));
        assert!(changes_content(&EventKind::Create(CreateKind::File)));
    }

    /// Every entry of the config directory matters; beside a single watched file only that
    /// file and the volume's `..data` swap do.
    #[test]
    fn which_paths_matter() {
        let tmp = std::env::temp_dir().join(format!("ap-reload-{}", std::process::id()));
        std::fs::create_dir_all(tmp.join("config")).unwrap();
        std::fs::create_dir_all(tmp.join("ns")).unwrap();
        let interests = sources(&tmp).interests();
        assert!(matters(&interests, &tmp.join("config/any.yaml")));
        assert!(matters(&interests, &tmp.join("config/..data")));
        assert!(matters(&interests, &tmp.join("ns/namespaces.yaml")));
        assert!(matters(&interests, &tmp.join("ns/..2026_11_20_01.123")));
        assert!(!matters(&interests, &tmp.join("ns/proxy.log")));
        assert!(!matters(&interests, &tmp.join("elsewhere/namespaces.yaml")));
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
