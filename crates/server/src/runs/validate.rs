//! Request bodies: `POST /v1/runs` and the control calls' optional bodies,
//! validated into typed values or refused with a 4xx naming the field.

use std::path::Path;

use lumen::safety::{PolicyConfig, PolicyErrorKind, SessionPolicy};
use lumen::{LumenError, OptionError, PathSetting, RunMode, RunOptions};
use serde_json::{Map, Value};

use super::{RunManager, policy_denied};
use crate::error::ApiError;
use crate::store::Mode;

/// A validated `POST /v1/runs` body.
#[derive(Debug, Clone)]
pub(super) struct NewRun {
    pub(super) instruction: String,
    pub(super) start_url: Option<String>,
    pub(super) model: String,
    pub(super) max_steps: u32,
    pub(super) mode: Mode,
    pub(super) attempts: u32,
    pub(super) policy: PolicyConfig,
    pub(super) system_prompt: Option<String>,
    /// Every option as the request gave it (secret values included: the
    /// caller keeps them in memory only).
    pub(super) options: RunOptions,
}

/// The object fields of `body`, refusing anything else and unknown fields.
fn object<'a>(body: &'a Value, known: &[&str]) -> Result<&'a Map<String, Value>, ApiError> {
    let obj = body
        .as_object()
        .ok_or_else(|| ApiError::invalid_json("the body must be a JSON object"))?;
    if let Some(k) = obj.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(ApiError::unknown_field(k));
    }
    Ok(obj)
}

pub(super) fn opt_string(
    obj: &Map<String, Value>,
    field: &str,
) -> Result<Option<String>, ApiError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::invalid_field(
            field,
            format!("`{field}` must be a string"),
        )),
    }
}

/// Parses an optional body of a control request (`{"reason"}`, `{"text"}`).
pub(super) fn control_body(body: &[u8], known: &[&str]) -> Result<Map<String, Value>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid_json(format!("the body is not valid JSON: {e}")))?;
    object(&value, known).cloned()
}

/// A [`LumenError::Config`] from checking or applying options as a 400
/// naming the option.
pub(super) fn option_error(e: &LumenError) -> ApiError {
    match e {
        LumenError::Config { setting, message } => {
            ApiError::invalid_field(setting, message.clone())
        }
        other => ApiError::invalid_field("options", other.to_string()),
    }
}

/// The operator's place for a folder option: `true` is `root`, a plain
/// relative path a subfolder of it (which must resolve inside it, symlinks
/// followed; `create`d when missing), `false` off. Without a root the
/// option cannot be turned on.
///
/// Containment is checked before anything is created: the request's path
/// must be plain (no absolute path, no `..`: 403), and every part of it
/// that exists already is resolved (symlinks followed) and must stay
/// inside the operator's resolved folder (403), so a symlink out never
/// gets a folder created behind it. Only then are the missing parts
/// created, one level at a time. A folder the request names that cannot
/// be created (a file in the way, no permission) is a 400 naming the
/// field; only the operator's own folder failing is a 500.
pub(super) fn confine(
    field: &str,
    setting: &PathSetting,
    root: Option<&Path>,
    create: bool,
) -> Result<PathSetting, ApiError> {
    let root = match (setting, root) {
        (PathSetting::Off, _) => return Ok(PathSetting::Off),
        (_, None) => {
            return Err(policy_denied(
                field,
                format!(
                    "`{field}` is not available: the operator has not set up a folder for it \
                     (see `lumen serve --help`)"
                ),
            ));
        }
        (_, Some(root)) => root,
    };
    let relative = match setting {
        PathSetting::Path(p) if !lumen::is_plain_subpath(p) => {
            return Err(policy_denied(
                field,
                format!(
                    "`{field}` may only be true or a relative subfolder of the operator's \
                     folder (no absolute path, no `..`)"
                ),
            ));
        }
        PathSetting::Path(p) => Some(p.as_path()),
        _ => None,
    };
    // The operator's folder: created when the option creates folders
    // (downloads, the cache), then resolved. Its failures are the
    // operator's, not the request's.
    if create
        && !root.exists()
        && let Err(e) = std::fs::create_dir_all(root)
    {
        return Err(ApiError::internal(format!(
            "`{field}`: the operator's folder cannot be created: {e}"
        )));
    }
    let real_root = root.canonicalize().map_err(|e| {
        ApiError::internal(format!(
            "`{field}`: the operator's folder cannot be opened: {e}"
        ))
    })?;
    let outside = || {
        policy_denied(
            field,
            format!("`{field}` must stay inside the operator's folder"),
        )
    };
    let mut real = real_root.clone();
    for part in relative.into_iter().flat_map(Path::components) {
        let std::path::Component::Normal(name) = part else {
            continue; // `.`: plain paths hold nothing else
        };
        let next = real.join(name);
        match next.canonicalize() {
            Ok(resolved) if resolved.starts_with(&real_root) => {
                if !resolved.is_dir() {
                    return Err(ApiError::invalid_field(
                        field,
                        format!("`{field}`: {} is not a folder", shown(&real_root, &next)),
                    ));
                }
                real = resolved;
            }
            Ok(_) => return Err(outside()),
            // A symlink whose target is missing leads somewhere that cannot
            // be checked: nothing is created through it.
            Err(_) if next.is_symlink() => return Err(outside()),
            Err(e) if next.symlink_metadata().is_ok() => {
                return Err(ApiError::invalid_field(
                    field,
                    format!(
                        "`{field}`: {} cannot be opened: {e}",
                        shown(&real_root, &next)
                    ),
                ));
            }
            Err(_) if !create => {
                return Err(ApiError::invalid_field(
                    field,
                    format!("`{field}`: no such folder under the operator's folder"),
                ));
            }
            Err(_) => {
                if let Err(e) = std::fs::create_dir(&next)
                    && e.kind() != std::io::ErrorKind::AlreadyExists
                {
                    return Err(ApiError::invalid_field(
                        field,
                        format!(
                            "`{field}`: the folder {} cannot be created: {e}",
                            shown(&real_root, &next)
                        ),
                    ));
                }
                // Resolved again: what was created (or raced into place)
                // must still be inside.
                match next.canonicalize() {
                    Ok(resolved) if resolved.starts_with(&real_root) && resolved.is_dir() => {
                        real = resolved;
                    }
                    _ => return Err(outside()),
                }
            }
        }
    }
    Ok(PathSetting::Path(real))
}

/// The operator's step limit holds for a run's steps in all: each attempt
/// of an exec run has `max_steps` of its own.
pub(super) fn check_step_budget(max_steps: u32, attempts: u32, limit: u32) -> Result<(), ApiError> {
    if max_steps > limit {
        return Err(ApiError::invalid_field(
            "maxSteps",
            format!("`maxSteps` must be an integer from 1 to {limit}"),
        ));
    }
    if max_steps.saturating_mul(attempts) > limit {
        return Err(ApiError::invalid_field(
            "attempts",
            format!(
                "{attempts} attempts of {max_steps} steps each are more than this server's \
                 {limit} steps a run: lower `attempts` or `maxSteps`"
            ),
        ));
    }
    Ok(())
}

/// Whether `model` is one an operator's `entry` names: the same provider
/// and the same id, or for an entry ending in `*`, an id it begins
/// (`anthropic/claude-haiku-*`).
pub(crate) fn model_allowed(entry: &str, model: &str) -> bool {
    use lumen::models::registry::split_model;
    let ((want, pattern), (provider, id)) = (split_model(entry.trim()), split_model(model));
    want == provider
        && match pattern.strip_suffix('*') {
            Some(prefix) => id.starts_with(prefix),
            None => id == pattern,
        }
}

/// `path` relative to the operator's `root`, for messages (the operator's
/// own paths are not shown to clients).
fn shown(root: &Path, path: &Path) -> String {
    format!("`{}`", path.strip_prefix(root).unwrap_or(path).display())
}

impl RunManager {
    /// With a base URL of the operator's (`--base-url`), every model request
    /// goes there, with the key of the model's provider: a client's model
    /// must be of the provider the default model is, or the operator's key
    /// for another provider (taken from the environment) would be sent to
    /// a host that is not that provider's.
    fn check_provider(&self, field: &str, model: &str) -> Result<(), ApiError> {
        if self.options.adapter.base_url.is_none() {
            return Ok(());
        }
        let default = &self.options.default_model;
        let provider = |m: &str| lumen::models::registry::split_model(m).0;
        if provider(model) == provider(default) {
            return Ok(());
        }
        Err(ApiError::invalid_field(
            field,
            format!(
                "`{field}`: this server sends model requests to its operator's base URL, for \
                 {:?} models like its default `{default}`; `{model}` is a {:?} model",
                provider(default),
                provider(model)
            ),
        ))
    }

    /// The models a run names (its own, its planner's and its verifier's):
    /// each one the operator allows (403 otherwise), of the provider the
    /// operator's base URL serves, and one the engine can build an adapter
    /// for (400 otherwise).
    fn check_models(&self, o: &RunOptions) -> Result<(), ApiError> {
        let default = &self.options.default_model;
        let named = [
            ("model", Some(o.model.as_ref().unwrap_or(default))),
            ("plannerModel", o.planner_model.as_ref()),
            ("verifierModel", o.verifier_model.as_ref()),
        ];
        let fallbacks = o
            .fallback_models
            .iter()
            .flatten()
            .map(|m| ("fallbackModels", Some(m)));
        for (field, m) in named.into_iter().chain(fallbacks) {
            let Some(m) = m else { continue };
            let allowed = &self.options.allowed_models;
            if !allowed.is_empty()
                && !model_allowed(default, m)
                && !allowed.iter().any(|entry| model_allowed(entry, m))
            {
                return Err(policy_denied(
                    field,
                    format!(
                        "`{field}`: `{m}` is not a model this server's operator allows; it allows \
                         `{default}` and {}",
                        allowed
                            .iter()
                            .map(|a| format!("`{a}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
            self.check_provider(field, m)?;
            // A retired model with fallbacks is skipped when the run starts.
            let skipped = field == "model"
                && o.fallback_models.as_ref().is_some_and(|f| !f.is_empty())
                && lumen::models::registry::retirement(m).is_some();
            if skipped {
                continue;
            }
            if let Err(e) = lumen::models::create_adapter(m, self.options.adapter.clone()) {
                return Err(ApiError::invalid_field(field, e.to_string()));
            }
        }
        Ok(())
    }

    /// The options of a run as the engine takes them: the folder switches
    /// resolved to the operator's folders (and refused where the operator
    /// allows none), endpoints refused unless the operator allowed them.
    pub(super) fn operator_options(&self, mut o: RunOptions) -> Result<RunOptions, ApiError> {
        self.check_models(&o)?;
        let ops = &self.options;
        if let Some(url) = &o.cdp_url {
            let same = |a: &str| a.trim_end_matches('/') == url.trim_end_matches('/');
            if ops.allowed_cdp_urls.is_empty() {
                return Err(policy_denied(
                    "cdpUrl",
                    "this server does not attach runs to other browsers (`lumen serve \
                     --allow-cdp-url URL` names the ones it may)",
                ));
            }
            if !ops.allowed_cdp_urls.iter().any(|a| same(a)) {
                return Err(policy_denied(
                    "cdpUrl",
                    "not one of the browsers this server may attach runs to",
                ));
            }
        }
        if o.browserbase == Some(true) && !ops.allow_browserbase {
            return Err(policy_denied(
                "browserbase",
                "this server does not run tasks in Browserbase (`lumen serve --allow-browserbase`)",
            ));
        }
        if let Some(w) = &o.workflows {
            o.workflows = Some(match (w, &ops.workflows_file) {
                (PathSetting::Off, _) => PathSetting::Off,
                (PathSetting::On, Some(file)) => PathSetting::Path(file.clone()),
                (PathSetting::On, None) => {
                    return Err(policy_denied(
                        "workflows",
                        "`workflows` is not available: the operator has set no workflow file \
                         (`lumen serve --workflows FILE`)",
                    ));
                }
                (PathSetting::Path(_), _) => {
                    return Err(policy_denied(
                        "workflows",
                        "a request may only switch `workflows` on or off (the file is the operator's)",
                    ));
                }
            });
        }
        if let Some(d) = &o.upload_dir {
            o.upload_dir = Some(confine("uploadDir", d, ops.upload_root.as_deref(), false)?);
        }
        if let Some(d) = &o.download_dir {
            o.download_dir = Some(confine(
                "downloadDir",
                d,
                ops.download_root.as_deref(),
                true,
            )?);
        }
        if let Some(d) = &o.cache {
            o.cache = Some(confine("cache", d, ops.cache_root.as_deref(), true)?);
        }
        Ok(o)
    }

    /// The agent options of a run: the operator's adapter settings, then
    /// the run's options (folders and endpoints resolved by
    /// [`operator_options`](Self::operator_options)). The policy is set by
    /// the caller (the operator's, narrowed).
    pub(super) fn agent_options(
        &self,
        options: &RunOptions,
    ) -> Result<lumen::AgentOptions, ApiError> {
        let mut resolved = self.operator_options(options.clone())?;
        resolved.policy = None;
        let model = resolved
            .model
            .clone()
            .unwrap_or_else(|| self.options.default_model.clone());
        let mut agent = lumen::AgentOptions::new(model);
        agent.adapter = self.options.adapter.clone();
        agent.browser = lumen::BrowserSource::Local(self.options.launch.clone());
        resolved.apply(&mut agent).map_err(|e| option_error(&e))?;
        Ok(agent)
    }

    pub(super) async fn validate(&self, body: &Value) -> Result<NewRun, ApiError> {
        let mut obj = body
            .as_object()
            .ok_or_else(|| ApiError::invalid_json("the body must be a JSON object"))?
            .clone();
        let instruction = match obj.remove("instruction") {
            None | Some(Value::Null) => return Err(ApiError::missing_field("instruction")),
            Some(Value::String(s)) => s,
            Some(_) => {
                return Err(ApiError::invalid_field(
                    "instruction",
                    "`instruction` must be a string",
                ));
            }
        };
        if instruction.trim().is_empty() {
            return Err(ApiError::invalid_field(
                "instruction",
                "`instruction` must not be empty",
            ));
        }
        // `null` means "not given", as for every optional field.
        obj.retain(|_, v| !v.is_null());
        let options = RunOptions::from_json_object(&obj).map_err(|e| match e {
            OptionError::Unknown(k) => ApiError::unknown_field(&k),
            OptionError::Invalid(k, why) => ApiError::invalid_field(&k, format!("`{k}`: {why}")),
        })?;
        options.check().map_err(|e| option_error(&e))?;
        // The operator's rules on models, folders and endpoints, and whether
        // the engine takes the options (a workflow file that cannot be read,
        // a verifier model without a key…), before anything else.
        self.agent_options(&options)?;
        let model = options
            .model
            .clone()
            .unwrap_or_else(|| self.options.default_model.clone());
        let max_steps = options.max_steps.unwrap_or(self.options.default_max_steps);
        let (mode, attempts) = match options.run_mode() {
            RunMode::Agent => (Mode::Agent, 1),
            RunMode::Plan => (Mode::Plan, 1),
            RunMode::Exec { attempts } => (Mode::Exec, attempts),
        };
        check_step_budget(max_steps, attempts, self.options.max_steps_limit)?;
        // The run gets the operator policy, narrowed by the request's.
        let requested = options.policy.clone().unwrap_or_default();
        let policy = self
            .operator_policy()
            .narrowed_by(&requested)
            .map_err(|e| match e.kind {
                PolicyErrorKind::Widens => policy_denied(&e.setting, e.message),
                _ => ApiError::invalid_field(&e.setting, e.message),
            })?;
        let session_policy = SessionPolicy::new(&policy)
            .map_err(|e| ApiError::invalid_field("policy", e.to_string()))?;
        if let Some(u) = &options.start_url {
            Self::judge_url(&session_policy, "startUrl", u).await?;
        }
        Ok(NewRun {
            instruction,
            start_url: options.start_url.clone(),
            model,
            max_steps,
            mode,
            attempts,
            policy,
            system_prompt: options.system_prompt.clone(),
            options,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn path(p: &str) -> PathSetting {
        PathSetting::Path(PathBuf::from(p))
    }

    fn refused(r: Result<PathSetting, ApiError>) -> (u16, &'static str, String) {
        let e = r.expect_err("refused");
        (e.status.as_u16(), e.code, e.field.unwrap_or_default())
    }

    #[cfg(unix)]
    #[test]
    fn an_allowed_model_is_the_same_provider_and_id_or_a_prefix() {
        for (entry, model, allowed) in [
            (
                "anthropic/claude-haiku-4-5",
                "anthropic/claude-haiku-4-5",
                true,
            ),
            (
                "anthropic/claude-haiku-4-5",
                "anthropic/claude-haiku-4-5x",
                false,
            ),
            (
                "anthropic/claude-haiku-*",
                "anthropic/claude-haiku-4-5",
                true,
            ),
            (
                "anthropic/claude-haiku-*",
                "anthropic/claude-opus-4-7",
                false,
            ),
            // The provider counts: the same id elsewhere is another model.
            (
                "anthropic/claude-haiku-*",
                "compatible/claude-haiku-4-5",
                false,
            ),
            ("google/gemini-3-flash", "gemini/gemini-3-flash", true),
            (" openai/gpt-5 ", "openai/gpt-5", true),
            ("openai/*", "openai/gpt-5-mini", true),
        ] {
            assert_eq!(model_allowed(entry, model), allowed, "{entry} / {model}");
        }
    }

    #[test]
    fn nothing_is_created_behind_a_symlink_out_of_the_operators_folder() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("downloads");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("escape")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("nowhere"), root.join("dangling")).unwrap();
        for wanted in ["escape/new", "escape/a/b", "escape", "dangling/new"] {
            let got = refused(confine("downloadDir", &path(wanted), Some(&root), true));
            assert_eq!(
                got,
                (403, "policy_denied", "downloadDir".into()),
                "{wanted}"
            );
        }
        assert_eq!(
            std::fs::read_dir(&outside).unwrap().count(),
            0,
            "a folder was created outside the operator's folder"
        );
        assert!(!dir.path().join("nowhere").exists());
    }

    #[test]
    fn absolute_paths_and_dot_dot_are_refused_before_anything_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cache");
        std::fs::create_dir_all(&root).unwrap();
        let elsewhere = dir.path().join("elsewhere");
        for wanted in [
            "../elsewhere".to_string(),
            "a/../../elsewhere".to_string(),
            elsewhere.display().to_string(),
        ] {
            let got = refused(confine("cache", &path(&wanted), Some(&root), true));
            assert_eq!(got, (403, "policy_denied", "cache".into()), "{wanted}");
        }
        assert!(!elsewhere.exists());
        assert!(
            !root.join("a").exists(),
            "`a` was created before `..` was refused"
        );
    }

    #[test]
    fn a_folder_the_request_names_that_cannot_be_created_is_a_4xx_naming_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("downloads");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("file"), b"x").unwrap();
        for wanted in ["file", "file/sub"] {
            let got = refused(confine("downloadDir", &path(wanted), Some(&root), true));
            assert_eq!(
                got,
                (400, "invalid_field", "downloadDir".into()),
                "{wanted}"
            );
        }
        // Uploads are never created: a missing one is named.
        let got = refused(confine("uploadDir", &path("missing"), Some(&root), false));
        assert_eq!(got, (400, "invalid_field", "uploadDir".into()));
        assert!(!root.join("missing").exists());
    }

    #[test]
    fn a_plain_subfolder_is_created_inside_and_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("downloads");
        let got = confine("downloadDir", &path("./a/b"), Some(&root), true).unwrap();
        let real = root.canonicalize().unwrap().join("a").join("b");
        assert_eq!(got, PathSetting::Path(real.clone()));
        assert!(real.is_dir());
        // Again: it exists now.
        assert_eq!(
            confine("downloadDir", &path("a/b"), Some(&root), true).unwrap(),
            PathSetting::Path(real)
        );
        assert_eq!(
            confine("downloadDir", &PathSetting::On, Some(&root), true).unwrap(),
            PathSetting::Path(root.canonicalize().unwrap())
        );
        assert_eq!(
            refused(confine("cache", &PathSetting::On, None, true)),
            (403, "policy_denied", "cache".into())
        );
    }
}
