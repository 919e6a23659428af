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

use super::{documents, Problem};

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
            for item in items(doc) {
                if let Err(message) = configuration(&item, file, plugin, &mut seen) {
                    problems.push(located(message));
                }
            }
        });
    }
    problems
}

/// A document's configurations: itself, or a `List`'s items.
fn items(doc: serde_json::Value) -> Vec<serde_json::Value> {
    let kind = doc.get("kind").and_then(|k| k.as_str()).unwrap_or("");
    if kind == "List" || kind.ends_with("WebhookConfigurationList") {
        if let Some(serde_json::Value::Array(items)) = doc.get("items") {
            return items.clone();
        }
    }
    if doc.is_null() {
        Vec::new()
    } else {
        vec![doc]
    }
}

/// One configuration's static-manifest rules; the first broken one, in upstream's words.
fn configuration(
    item: &serde_json::Value,
    file: &Path,
    plugin: StaticPlugin,
    seen: &mut HashMap<String, PathBuf>,
) -> Result<(), String> {
    let text = |pointer: &str| item.pointer(pointer).and_then(|v| v.as_str()).unwrap_or("");
    let (api_version, kind) = (text("/apiVersion"), text("/kind"));
    let file_name = file.display();
    if kind == plugin.other_kind() {
        return Err(format!(
            "file {:?} contains {kind} but this directory is configured for {} plugin; use a separate directory",
            file_name.to_string(),
            plugin.plugin()
        ));
    }
    if api_version != "admissionregistration.k8s.io/v1" || kind != plugin.kind() {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        return Err(format!(
            "file {:?} contains unsupported resource type {group}/{version}, Kind={kind}; only {} and its List variants are supported",
            file_name.to_string(),
            plugin.kind()
        ));
    }
    let name = text("/metadata/name");
    if name.is_empty() {
        return Err(format!(
            "{kind} in file {:?} must have a name",
            file_name.to_string()
        ));
    }
    if !name.ends_with(STATIC_CONFIG_SUFFIX) {
        return Err(format!(
            "{kind} {name:?} in file {:?} must have a name ending with {STATIC_CONFIG_SUFFIX:?}",
            file_name.to_string()
        ));
    }
    if let Some(previous) = seen.get(name) {
        return Err(format!(
            "duplicate {kind} name {name:?} found in file {:?} (previously seen in {:?})",
            file_name.to_string(),
            previous.display().to_string()
        ));
    }
    seen.insert(name.to_string(), file.to_path_buf());
    let webhooks = item.get("webhooks").and_then(|w| w.as_array());
    for webhook in webhooks.into_iter().flatten() {
        let webhook_name = webhook.get("name").and_then(|n| n.as_str()).unwrap_or("");
        let cc = webhook.get("clientConfig");
        let at = |what: &str| {
            format!(
                "webhook {webhook_name:?} in {kind} {name:?} (file {:?}): {what}",
                file_name.to_string()
            )
        };
        let field = |f: &str| cc.and_then(|c| c.get(f)).filter(|v| !v.is_null());
        if field("service").is_some() {
            return Err(at("clientConfig.service is not supported for static manifests; use clientConfig.url instead"));
        }
        if field("url")
            .and_then(|u| u.as_str())
            .is_none_or(str::is_empty)
        {
            return Err(at("clientConfig.url is required for static manifests"));
        }
        if field("caBundle")
            .and_then(|u| u.as_str())
            .is_none_or(str::is_empty)
        {
            return Err(at("clientConfig.caBundle is required for static manifests"));
        }
    }
    Ok(())
}
