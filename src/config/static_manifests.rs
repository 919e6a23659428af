//! KEP-5793's layout: kube-apiserver 1.36 (`ManifestBasedAdmissionControlConfig`) loads
//! webhook configurations from a directory of its own, `staticManifestsDir` in each webhook
//! admission plugin's configuration. The proxy reads that layout as it reads any
//! configuration directory (`*.yaml`, `*.yml`, `*.json`, multi-document YAML, `List`s and the
//! typed `…List` kinds, strict decoding of unknown and duplicate fields), and
//! `check --static-manifests` adds the rules kube-apiserver applies to such a directory on top
//! of the usual validation, in its words (`pkg/admission/plugin/webhook/manifest/loader/loader.go`
//! `LoadValidatingManifests` / `LoadMutatingManifests`, `validateManifestName`,
//! `validateWebhookClientConfig`):
//!
//! - one plugin per directory: only `admissionregistration.k8s.io/v1` configurations of the
//!   plugin's kind (a validating directory holding a MutatingWebhookConfiguration is an error:
//!   "use a separate directory");
//! - every configuration's `metadata.name` ends with `.static.k8s.io` (reserved: the REST API
//!   refuses it), and is unique in the directory;
//! - every webhook's `clientConfig` has a `url` and a `caBundle` (no `service`: the static
//!   configuration must work before any Service or Endpoints are served).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::{configuration_items, documents, Problem};

/// The reserved suffix of static configurations' names (`manifest.StaticConfigSuffix`).
pub const STATIC_CONFIG_SUFFIX: &str = ".static.k8s.io";

/// The admission plugin a `staticManifestsDir` is configured for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StaticPlugin {
    /// `ValidatingAdmissionWebhook`: ValidatingWebhookConfigurations.
    Validating,
    /// `MutatingAdmissionWebhook`: MutatingWebhookConfigurations.
    Mutating,
}

/// A plugin name that is neither `validating` nor `mutating`.
#[derive(Debug, thiserror::Error)]
#[error("{0:?}: expected validating or mutating")]
pub struct BadPlugin(String);

impl std::str::FromStr for StaticPlugin {
    type Err = BadPlugin;

    /// `validating` or `mutating`.
    fn from_str(s: &str) -> Result<Self, BadPlugin> {
        match s {
            "validating" => Ok(StaticPlugin::Validating),
            "mutating" => Ok(StaticPlugin::Mutating),
            other => Err(BadPlugin(other.to_string())),
        }
    }
}

impl StaticPlugin {
    fn kind(self) -> &'static str {
        match self {
            StaticPlugin::Validating => "ValidatingWebhookConfiguration",
            StaticPlugin::Mutating => "MutatingWebhookConfiguration",
        }
    }

    fn other_kind(self) -> &'static str {
        match self {
            StaticPlugin::Validating => "MutatingWebhookConfiguration",
            StaticPlugin::Mutating => "ValidatingWebhookConfiguration",
        }
    }

    fn plugin(self) -> &'static str {
        match self {
            StaticPlugin::Validating => "ValidatingAdmissionWebhook",
            StaticPlugin::Mutating => "MutatingAdmissionWebhook",
        }
    }
}

/// What kube-apiserver's static manifests loader refuses in `files` (read as
/// [`super::read_files`] reads a directory) for `plugin`, beyond the configuration's own
/// validation ([`super::load_contents`]). Syntax errors are left to that validation.
///
/// ```
/// use admission_proxy::config::static_manifests::{check, StaticPlugin};
/// let yaml = "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {name: m}\n";
/// let problems = check(&[("m.yaml".into(), yaml.into())], StaticPlugin::Validating);
/// assert!(problems[0].message.ends_with("configured for ValidatingAdmissionWebhook plugin; use a separate directory"));
/// ```
pub fn check(files: &[(PathBuf, String)], plugin: StaticPlugin) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut seen: HashMap<String, PathBuf> = HashMap::new();
    for (file, text) in files {
        let is_json = file.extension().is_some_and(|e| e == "json");
        documents(text, is_json, |index, doc| {
            let Ok(doc) = doc else { return };
            let located = |message: String| Problem {
                document: (!is_json).then_some(index),
                ..Problem::of_file(file, message)
            };
            // A List whose `items` is no list is the configuration validation's to report.
            let base = Problem::of_file(file, String::new());
            for (_, item) in configuration_items(doc, &base, &mut Vec::new()) {
                if item.is_null() {
                    continue;
                }
                if let Err(refused) = configuration(&item, file, plugin, &mut seen) {
                    problems.push(located(refused.to_string()));
                }
            }
        });
    }
    problems
}

/// What kube-apiserver's static manifests loader refuses in one configuration, in its words.
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error("file {file:?} contains {kind} but this directory is configured for {plugin} plugin; use a separate directory")]
    OtherPlugin {
        file: String,
        kind: String,
        plugin: &'static str,
    },
    #[error("file {file:?} contains unsupported resource type {group}/{version}, Kind={kind}; only {supported} and its List variants are supported")]
    Unsupported {
        file: String,
        group: String,
        version: String,
        kind: String,
        supported: &'static str,
    },
    #[error("{kind} in file {file:?} must have a name")]
    Unnamed { kind: String, file: String },
    #[error(
        "{kind} {name:?} in file {file:?} must have a name ending with {STATIC_CONFIG_SUFFIX:?}"
    )]
    Suffix {
        kind: String,
        name: String,
        file: String,
    },
    #[error(
        "duplicate {kind} name {name:?} found in file {file:?} (previously seen in {previous:?})"
    )]
    Duplicate {
        kind: String,
        name: String,
        file: String,
        previous: String,
    },
    #[error("webhook {webhook:?} in {kind} {name:?} (file {file:?}): {rule}")]
    ClientConfig {
        webhook: String,
        kind: String,
        name: String,
        file: String,
        rule: &'static str,
    },
}

/// One configuration's static-manifest rules; the first broken one.
fn configuration(
    item: &serde_json::Value,
    file: &Path,
    plugin: StaticPlugin,
    seen: &mut HashMap<String, PathBuf>,
) -> Result<(), Refused> {
    let text = |pointer: &str| item.pointer(pointer).and_then(|v| v.as_str()).unwrap_or("");
    let (api_version, kind) = (text("/apiVersion"), text("/kind").to_string());
    let file_name = file.display().to_string();
    if kind == plugin.other_kind() {
        return Err(Refused::OtherPlugin {
            file: file_name,
            kind,
            plugin: plugin.plugin(),
        });
    }
    if api_version != "admissionregistration.k8s.io/v1" || kind != plugin.kind() {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        return Err(Refused::Unsupported {
            file: file_name,
            group: group.to_string(),
            version: version.to_string(),
            kind,
            supported: plugin.kind(),
        });
    }
    let name = text("/metadata/name").to_string();
    if name.is_empty() {
        return Err(Refused::Unnamed {
            kind,
            file: file_name,
        });
    }
    if !name.ends_with(STATIC_CONFIG_SUFFIX) {
        return Err(Refused::Suffix {
            kind,
            name,
            file: file_name,
        });
    }
    if let Some(previous) = seen.get(&name) {
        return Err(Refused::Duplicate {
            kind,
            previous: previous.display().to_string(),
            name,
            file: file_name,
        });
    }
    seen.insert(name.clone(), file.to_path_buf());
    let webhooks = item.get("webhooks").and_then(|w| w.as_array());
    for webhook in webhooks.into_iter().flatten() {
        let cc = webhook.get("clientConfig");
        let field = |f: &str| cc.and_then(|c| c.get(f)).filter(|v| !v.is_null());
        let text_field = |f: &str| field(f).and_then(|v| v.as_str()).filter(|v| !v.is_empty());
        let rule = if field("service").is_some() {
            "clientConfig.service is not supported for static manifests; use clientConfig.url instead"
        } else if text_field("url").is_none() {
            "clientConfig.url is required for static manifests"
        } else if text_field("caBundle").is_none() {
            "clientConfig.caBundle is required for static manifests"
        } else {
            continue;
        };
        return Err(Refused::ClientConfig {
            webhook: webhook
                .get("name")
                .and_then(|n| n.as_str())
                .unwrap_or("")
                .to_string(),
            kind,
            name,
            file: file_name,
            rule,
        });
    }
    Ok(())
}
