//! The `lumen.toml` config file and its merge with the flags (a flag wins
//! over the file; the file wins over the defaults).
//!
//! The flags and the file fill one [`RunOptions`], the options model the
//! server's run body uses too: a file key is the snake_case spelling of a
//! run option (`max_steps` for `maxSteps`, `verify_url` for `verifyUrl`),
//! plus the few keys only the CLI has (`headed`, `base_url`, `trace_dir`,
//! `allow_domains`, `block_domains`, `allow_model_javascript`,
//! `secrets_file`, and `secrets`, which names environment variables rather
//! than values). An unknown key is an error naming it.
//!
//! ```toml
//! model = "anthropic/claude-sonnet-4-6"
//! max_steps = 25
//! max_tokens = 200000               # stop before the next model call
//! max_cost = 0.50                   # US dollars, at list prices
//! max_failures = 5                  # failed actions in a row
//! max_actions_per_turn = 25         # actions one model turn may ask for
//! verify_url = "/order/confirmed"   # "done" only counts on such a page
//! checkpoint_interval = 5
//! viewport = "1280x800"
//! allow_domains = ["*.example.com"]
//! allow_model_javascript = false   # the browser toolset's javascript_exec
//! upload_dir = "./uploads"          # the folder file_upload may read
//! [secrets]
//! PASSWORD = "SHOP_PASSWORD"   # secret name = environment variable
//! [secret_domains]
//! PASSWORD = ["shop.example"]  # typed only on these sites
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use lumen::models::{Effort, Tools};
use lumen::safety::PolicyConfig;
use lumen::{LumenError, OptionError, PathSetting, RunOptions, SecretValues};
use serde::Deserialize;

use crate::args::{PolicyArgs, RunArgs};
use crate::exit::CliError;

/// The model used when neither a flag nor the config file names one.
pub(crate) const DEFAULT_MODEL: &str = "anthropic/claude-sonnet-4-6";

/// The providers `create_adapter` knows by prefix.
const PREFIXES: &[&str] = &["anthropic", "openai", "google", "compatible"];

/// The keys only the CLI has. Unknown keys are errors, so a typo is
/// reported instead of silently ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CliKeys {
    base_url: Option<String>,
    headed: Option<bool>,
    trace_dir: Option<PathBuf>,
    #[serde(default)]
    allow_domains: Vec<String>,
    #[serde(default)]
    block_domains: Vec<String>,
    allow_model_javascript: Option<bool>,
    /// Secret name → environment variable holding its value.
    #[serde(default)]
    secrets: BTreeMap<String, String>,
    secrets_file: Option<PathBuf>,
}

const CLI_KEYS: &[&str] = &[
    "base_url",
    "headed",
    "trace_dir",
    "allow_domains",
    "block_domains",
    "allow_model_javascript",
    "secrets",
    "secrets_file",
];

/// The config file: the CLI's own keys and the run options.
#[derive(Debug, Default)]
pub(crate) struct FileConfig {
    cli: CliKeys,
    options: RunOptions,
    /// The keys the file's `policy` table names, as written (camelCase):
    /// laid key by key over the policy it applies to (the default for
    /// `run`, the saved run's for `resume`), so a key left out keeps that
    /// policy's value.
    policy_keys: Option<serde_json::Map<String, serde_json::Value>>,
}

/// `maxSteps` → `--max-steps`.
fn flag(camel: &str) -> String {
    format!("--{}", lumen::snake_case(camel).replace('_', "-"))
}

/// A run option's error as a configuration error naming its flag.
pub(crate) fn option_error(e: &LumenError) -> CliError {
    match e {
        LumenError::Config { setting, message } if !setting.contains(['.', ' ', '_']) => {
            let named = format!("`{setting}`");
            if message.contains(&named) {
                CliError::config(message.replace(&named, &flag(setting)))
            } else {
                CliError::config(format!("{}: {message}", flag(setting)))
            }
        }
        other => CliError::config(other.to_string()),
    }
}

impl FileConfig {
    /// Reads and parses `path`.
    pub(crate) fn load(path: &Path) -> Result<Self, CliError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            CliError::config(format!(
                "cannot read the config file {}: {e}; check the path given to --config",
                path.display()
            ))
        })?;
        Self::parse(&text).map_err(|e| {
            CliError::config(format!(
                "the config file {} is not valid: {e}; fix it (see docs/cli.md for the keys)",
                path.display(),
            ))
        })
    }

    /// Parses the file's text; the error names the key.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let table: toml::Table = toml::from_str(text).map_err(|e| e.message().to_owned())?;
        let known = RunOptions::keys();
        let mut cli = toml::Table::new();
        let mut run = serde_json::Map::new();
        let mut policy_keys = None;
        for (key, value) in table {
            if CLI_KEYS.contains(&key.as_str()) {
                cli.insert(key, value);
                continue;
            }
            match known.iter().find(|k| lumen::snake_case(k) == key) {
                Some(camel) => {
                    let value = serde_json::to_value(value).map_err(|e| format!("{key}: {e}"))?;
                    if let serde_json::Value::Object(keys) = &value
                        && *camel == "policy"
                    {
                        policy_keys = Some(keys.clone());
                    }
                    run.insert((*camel).to_owned(), value);
                }
                None => return Err(format!("unknown key `{key}`")),
            }
        }
        let options = RunOptions::from_json_object(&run).map_err(|e| match e {
            OptionError::Unknown(k) => format!("unknown key `{}`", lumen::snake_case(&k)),
            OptionError::Invalid(k, why) => format!("`{}`: {why}", lumen::snake_case(&k)),
        })?;
        let cli = cli
            .try_into::<CliKeys>()
            .map_err(|e| e.message().to_owned())?;
        Ok(Self {
            cli,
            options,
            policy_keys,
        })
    }
}

/// `base` with the config file's policy keys laid over it, key by key: a
/// key the file names replaces `base`'s value, a key it leaves out keeps
/// it. The user's own file is trusted as their flags are (it may widen
/// `base`; only a server narrows a request's policy under the operator's).
fn policy_over(
    base: Option<PolicyConfig>,
    keys: Option<serde_json::Map<String, serde_json::Value>>,
) -> Result<Option<PolicyConfig>, CliError> {
    let Some(keys) = keys else {
        return Ok(base);
    };
    let mut merged = match serde_json::to_value(base.unwrap_or_default()) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    merged.extend(keys);
    serde_json::from_value(serde_json::Value::Object(merged))
        .map(Some)
        .map_err(|e| {
            CliError::config(format!(
                "the config file's `policy` is not valid: {e}; see docs/security.md for its keys"
            ))
        })
}

/// Everything a run needs, merged and checked.
#[derive(Debug)]
pub(crate) struct RunConfig {
    /// Every run option (the model filled in, secrets read, the policy
    /// built), checked.
    pub(crate) options: RunOptions,
    /// The model (also in `options`).
    pub(crate) model: String,
    pub(crate) base_url: Option<String>,
    pub(crate) headed: bool,
    pub(crate) trace_dir: Option<PathBuf>,
}

fn parsed<T: std::str::FromStr<Err = LumenError>>(
    value: Option<&String>,
) -> Result<Option<T>, CliError> {
    value
        .map(|v| v.parse::<T>().map_err(|e| option_error(&e)))
        .transpose()
}

/// The run options the flags give.
fn flag_options(args: &RunArgs) -> Result<RunOptions, CliError> {
    let path = |p: &Option<PathBuf>| p.clone().map(PathSetting::Path);
    let screenshot_format = match args.screenshot_format.as_deref() {
        None => None,
        Some("jpeg" | "jpg") => Some(lumen::ImageFormat::Jpeg),
        Some("png") => Some(lumen::ImageFormat::Png),
        Some(other) => {
            return Err(CliError::config(format!(
                "--screenshot-format {other:?}: use jpeg or png"
            )));
        }
    };
    Ok(RunOptions {
        start_url: args.url.clone(),
        model: args.model.clone(),
        planner_model: args.planner_model.clone(),
        fallback_models: (!args.fallback_models.is_empty()).then(|| args.fallback_models.clone()),
        max_wait: args.max_wait,
        tools: parsed::<Tools>(args.tools.as_ref())?,
        effort: parsed::<Effort>(args.effort.as_ref())?,
        thinking_budget: args.thinking_budget,
        system_prompt: args.system_prompt.clone(),
        mode: args.mode.map(Into::into),
        attempts: args.attempts,
        max_steps: args.max_steps,
        max_tokens: args.max_tokens,
        max_cost: args.max_cost,
        max_failures: args.max_failures,
        max_actions_per_turn: args.max_actions_per_turn,
        verify_url: args.verify_url.clone(),
        verifier_model: args.verifier_model.clone(),
        confidence_gate: args.confidence_gate,
        checkpoint_interval: args.checkpoint_interval,
        site_tips: args.site_tips.then_some(true),
        workflows: path(&args.workflows),
        cache: path(&args.cache),
        cdp_url: args.cdp_url.clone(),
        browserbase: args.browserbase.then_some(true),
        viewport: parsed::<lumen::Viewport>(args.viewport.as_ref())?,
        screenshot_format,
        screenshot_quality: args.screenshot_quality,
        screenshot_max_edge: args.screenshot_max_edge,
        images_kept: args.images_kept,
        download_dir: path(&args.download_dir),
        upload_dir: path(&args.upload_dir),
        handoff: args.handoff.then(|| lumen::HandoffPolicy {
            timeout_secs: args.handoff_timeout.unwrap_or(600),
            urls: args.handoff_urls.clone(),
            ..lumen::HandoffPolicy::default()
        }),
        ..RunOptions::default()
    })
}

impl RunConfig {
    /// Merges the flags over the config file (if any), reading secrets from
    /// `env`.
    pub(crate) fn resolve(
        args: &RunArgs,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, CliError> {
        Self::resolve_over(&RunOptions::default(), None, args, env)
    }

    /// [`resolve`](Self::resolve) over a saved run's options and base URL
    /// (`lumen resume`): the config file over them, the flags over both.
    pub(crate) fn resolve_over(
        saved: &RunOptions,
        saved_base_url: Option<String>,
        args: &RunArgs,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, CliError> {
        let file = match &args.config {
            Some(path) => FileConfig::load(path)?,
            None => FileConfig::default(),
        };
        let FileConfig {
            cli,
            options,
            policy_keys,
        } = file;
        let mut options = saved
            .overlaid_with(&options)
            .overlaid_with(&flag_options(args)?);
        // The file's `policy` merges into the saved one key by key instead
        // of replacing it whole (as every other option does).
        options.policy = policy_over(saved.policy.clone(), policy_keys)?;
        let model = options
            .model
            .clone()
            .unwrap_or_else(|| DEFAULT_MODEL.to_owned());
        options.model = Some(model.clone());
        let base_url = args.base_url.clone().or(cli.base_url).or(saved_base_url);
        check_model(&model, base_url.as_deref(), &env)?;
        for m in [&options.planner_model, &options.verifier_model]
            .into_iter()
            .flatten()
            .chain(options.fallback_models.iter().flatten())
        {
            check_model(m, base_url.as_deref(), &env)?;
        }
        let probe = lumen::TokenUsage {
            input_tokens: 1,
            ..Default::default()
        };
        if options.max_cost.is_some() && crate::pricing::cost(&model, &probe).is_none() {
            return Err(CliError::config(format!(
                "--max-cost: {model} has no published price, so a cost budget cannot be \
                 checked; use --max-tokens instead"
            )));
        }
        // `lumen run` starts open (local pages work); the file's `policy`
        // and the policy options close it.
        let base = options.policy.take().unwrap_or_default();
        let mut policy = policy_from(&args.policy, base)?;
        policy
            .allowed_domains
            .extend(pick(&args.allow_domains, cli.allow_domains));
        policy
            .blocked_domains
            .extend(pick(&args.block_domains, cli.block_domains));
        if args.allow_model_javascript || cli.allow_model_javascript == Some(true) {
            policy.allow_model_javascript = Some(true);
        }
        options.policy = Some(policy);
        if let Some(PathSetting::Path(dir)) = &options.upload_dir
            && !dir.is_dir()
        {
            return Err(CliError::config(format!(
                "--upload-dir {}: not a folder; create it or name an existing one",
                dir.display()
            )));
        }
        let mut values = BTreeMap::new();
        let mut pairs: Vec<(String, String)> = cli.secrets.into_iter().collect();
        for spec in &args.secrets {
            let (name, var) = spec.split_once('=').ok_or_else(|| {
                CliError::config(format!(
                    "--secret {spec:?} must look like NAME=ENV_VAR (the value is read from \
                     the environment, never from the command line)"
                ))
            })?;
            pairs.push((name.trim().to_owned(), var.trim().to_owned()));
        }
        for (name, var) in pairs {
            let value = env(&var).filter(|v| !v.is_empty()).ok_or_else(|| {
                CliError::config(format!(
                    "secret {name}: the environment variable {var} is not set; export it first"
                ))
            })?;
            values.insert(name, value);
        }
        if let Some(path) = args.secrets_file.clone().or(cli.secrets_file) {
            read_secrets_file(&path, &mut values)?;
        }
        let mut scopes = options.secret_domains.take().unwrap_or_default();
        for spec in &args.secret_domains {
            let (name, domains) = spec.split_once('=').ok_or_else(|| {
                CliError::config(format!(
                    "--secret-domain {spec:?} must look like NAME=example.com[,*.example.org]"
                ))
            })?;
            let domains = domains.split(',').map(|d| d.trim().to_owned()).collect();
            scopes.insert(name.trim().to_owned(), domains);
        }
        if !values.is_empty() {
            options.secrets = Some(SecretValues(values));
        }
        if !scopes.is_empty() {
            options.secret_domains = Some(scopes);
        }
        options.check().map_err(|e| match &e {
            LumenError::Config { setting, message } if setting == "secretDomains" => {
                CliError::config(message.clone())
            }
            _ => option_error(&e),
        })?;
        Ok(Self {
            options,
            model,
            base_url,
            headed: args.headed || cli.headed.unwrap_or(false),
            trace_dir: args.output.trace_dir.clone().or(cli.trace_dir),
        })
    }
}

/// The policy of the policy options: `base` (the command's default), the
/// `--policy` file's keys over it, then the flags. Checked: a bad pattern,
/// scheme or key is a configuration error naming it.
pub(crate) fn policy_from(args: &PolicyArgs, base: PolicyConfig) -> Result<PolicyConfig, CliError> {
    let mut policy = match &args.policy_file {
        None => base,
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                CliError::config(format!(
                    "cannot read the policy file {}: {e}; check the path given to --policy",
                    path.display()
                ))
            })?;
            let bad = |e: String| {
                CliError::config(format!(
                    "the policy file {} is not valid: {e}; see docs/security.md for its keys",
                    path.display()
                ))
            };
            let keys: serde_json::Value = if path.extension().is_some_and(|x| x == "json") {
                serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?
            } else {
                let t: toml::Value =
                    toml::from_str(&text).map_err(|e| bad(e.message().to_owned()))?;
                serde_json::to_value(t).map_err(|e| bad(e.to_string()))?
            };
            let serde_json::Value::Object(keys) = keys else {
                return Err(bad("it must be a table of policy keys".to_owned()));
            };
            // Keys left out keep the command's default (a server's file
            // that does not mention blockPrivateNetwork keeps it on).
            let mut merged = match serde_json::to_value(&base) {
                Ok(serde_json::Value::Object(m)) => m,
                _ => serde_json::Map::new(),
            };
            merged.extend(keys);
            serde_json::from_value(serde_json::Value::Object(merged))
                .map_err(|e| bad(e.to_string()))?
        }
    };
    policy
        .allowed_schemes
        .extend(args.allow_schemes.iter().cloned());
    policy
        .allowed_private_hosts
        .extend(args.allow_private_hosts.iter().cloned());
    if args.allow_private_network {
        policy.block_private_network = false;
    }
    if args.block_private_network {
        policy.block_private_network = true;
    }
    lumen::safety::SessionPolicy::new(&policy)
        .map_err(|e| CliError::config(format!("the policy: {e}")))?;
    Ok(policy)
}

/// Flags replace the file's list when given at all.
fn pick(flags: &[String], file: Vec<String>) -> Vec<String> {
    if flags.is_empty() {
        file
    } else {
        flags.to_vec()
    }
}

/// `NAME=value` lines; blank lines and `#` comments are skipped. Errors
/// name the line, never the value.
fn read_secrets_file(path: &Path, values: &mut BTreeMap<String, String>) -> Result<(), CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        CliError::config(format!(
            "cannot read the secrets file {}: {e}",
            path.display()
        ))
    })?;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((name, value)) = line.split_once('=') else {
            return Err(CliError::config(format!(
                "{} line {}: expected NAME=value",
                path.display(),
                i + 1
            )));
        };
        values.insert(name.trim().to_owned(), value.trim().to_owned());
    }
    Ok(())
}

/// Rejects a model string no adapter can serve, before anything starts.
pub(crate) fn check_model(
    model: &str,
    base_url: Option<&str>,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<(), CliError> {
    let has_server = base_url.is_some() || env("OPENAI_BASE_URL").is_some();
    match model.split_once('/') {
        Some((prefix, id)) if PREFIXES.contains(&prefix) => {
            if id.trim().is_empty() {
                return Err(CliError::config(format!(
                    "model {model:?} names no model after the prefix; for example \
                     {DEFAULT_MODEL}"
                )));
            }
            Ok(())
        }
        _ if has_server => Ok(()),
        Some((prefix, _)) => Err(CliError::config(format!(
            "unknown model prefix {prefix:?} in {model:?}; use anthropic/…, openai/… or \
             google/…, or pass --base-url for a model on an OpenAI-compatible server"
        ))),
        None => Err(CliError::config(format!(
            "model {model:?} has no provider prefix; use anthropic/…, openai/… or google/…, \
             or pass --base-url for a model on an OpenAI-compatible server"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn known_prefixes_pass_and_unknown_ones_name_the_fix() {
        assert!(check_model("anthropic/claude-sonnet-4-6", None, &no_env).is_ok());
        assert!(check_model("qwen2.5-vl", Some("http://127.0.0.1:8000/v1"), &no_env).is_ok());
        let err = check_model("mistral/large", None, &no_env).unwrap_err();
        assert!(err.message.contains("--base-url"), "{}", err.message);
        assert!(check_model("anthropic/", None, &no_env).is_err());
        assert!(check_model("gpt", None, &no_env).is_err());
    }

    #[test]
    fn the_file_rejects_unknown_keys() {
        let err = FileConfig::parse("modle = \"x\"").unwrap_err();
        assert!(err.contains("modle"), "{err}");
        // A camelCase spelling is not a file key.
        let err = FileConfig::parse("maxSteps = 4").unwrap_err();
        assert!(err.contains("maxSteps"), "{err}");
        let err = FileConfig::parse("checkpoint_interval = \"often\"").unwrap_err();
        assert!(err.contains("checkpoint_interval"), "{err}");
        let ok = FileConfig::parse(
            "model = \"openai/gpt-5\"\nmax_steps = 4\nmode = \"exec\"\nverify_url = \"/done\"\n\
             headed = true\ncache = \"c\"",
        )
        .unwrap();
        assert_eq!(ok.options.max_steps, Some(4));
        assert_eq!(ok.options.mode, Some(lumen::TaskMode::Exec));
        assert_eq!(ok.options.verify_url.as_deref(), Some("/done"));
        assert_eq!(ok.options.cache, Some(PathSetting::Path("c".into())));
        assert_eq!(ok.cli.headed, Some(true));
    }

    fn run_args(extra: &[&str]) -> RunArgs {
        use clap::Parser as _;
        let mut argv = vec!["lumen", "run", "a task"];
        argv.extend_from_slice(extra);
        match crate::args::Cli::try_parse_from(argv).unwrap().command {
            crate::args::Command::Run(args) => args.options,
            other => panic!("not a run: {other:?}"),
        }
    }

    #[test]
    fn policy_options_build_the_policy_and_a_file_keeps_the_default_for_missing_keys() {
        use clap::Parser as _;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("policy.toml");
        std::fs::write(
            &file,
            "allowedSchemes = [\"data\"]\nblockedDomains = [\"ads.test\"]\n",
        )
        .unwrap();
        let cli = crate::args::Cli::try_parse_from([
            "lumen",
            "serve",
            "--policy",
            file.to_str().unwrap(),
            "--allow-scheme",
            "file",
            "--allow-private-host",
            "127.0.0.1",
        ])
        .unwrap();
        let crate::args::Command::Serve(args) = cli.command else {
            panic!("not serve")
        };
        let p = policy_from(&args.policy, PolicyConfig::operator_default()).unwrap();
        assert!(
            p.block_private_network,
            "a key the file leaves out keeps the default"
        );
        assert_eq!(p.allowed_schemes, ["data", "file"]);
        assert_eq!(p.blocked_domains, ["ads.test"]);
        assert_eq!(p.allowed_private_hosts, ["127.0.0.1"]);

        let open = crate::args::PolicyArgs {
            allow_private_network: true,
            ..Default::default()
        };
        assert!(
            !policy_from(&open, PolicyConfig::operator_default())
                .unwrap()
                .block_private_network
        );
        std::fs::write(&file, "allowedScheme = [\"file\"]").unwrap();
        let bad = crate::args::PolicyArgs {
            policy_file: Some(file),
            ..Default::default()
        };
        let err = policy_from(&bad, PolicyConfig::operator_default()).unwrap_err();
        assert!(err.message.contains("allowedScheme"), "{}", err.message);
        let bad = crate::args::PolicyArgs {
            allow_schemes: vec!["no scheme".into()],
            ..Default::default()
        };
        assert!(policy_from(&bad, PolicyConfig::default()).is_err());
    }

    #[test]
    fn a_config_policy_merges_into_the_saved_one_key_by_key() {
        let env = |name: &str| (name == "ANTHROPIC_API_KEY").then(|| "k".to_owned());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("lumen.toml");
        std::fs::write(
            &file,
            "[policy]\nallowedSchemes = [\"data\"]\nblockedDomains = [\"tracker.test\"]\n",
        )
        .unwrap();
        let saved = RunOptions {
            policy: Some(PolicyConfig {
                allowed_domains: vec!["shop.test".into()],
                blocked_domains: vec!["ads.test".into()],
                block_private_network: true,
                allowed_private_hosts: vec!["127.0.0.1".into()],
                allow_model_javascript: Some(true),
                ..PolicyConfig::default()
            }),
            ..RunOptions::default()
        };
        let args = run_args(&["--config", file.to_str().unwrap()]);
        let resumed = RunConfig::resolve_over(&saved, None, &args, env).unwrap();
        let p = resumed.options.policy.unwrap();
        // The keys the file names win; the ones it leaves out stay saved.
        assert_eq!(p.allowed_schemes, ["data"]);
        assert_eq!(p.blocked_domains, ["tracker.test"]);
        assert_eq!(p.allowed_domains, ["shop.test"]);
        assert!(p.block_private_network);
        assert_eq!(p.allowed_private_hosts, ["127.0.0.1"]);
        assert_eq!(p.allow_model_javascript, Some(true));

        // `run` lays the same file over its open default.
        let fresh = RunConfig::resolve(&args, env).unwrap();
        let p = fresh.options.policy.unwrap();
        assert_eq!(p.allowed_schemes, ["data"]);
        assert!(p.allowed_domains.is_empty() && !p.block_private_network);

        // The flags still add to the merged policy.
        let args = run_args(&[
            "--config",
            file.to_str().unwrap(),
            "--allow-domain",
            "pay.test",
        ]);
        let p = RunConfig::resolve_over(&saved, None, &args, env)
            .unwrap()
            .options
            .policy
            .unwrap();
        assert_eq!(p.allowed_domains, ["shop.test", "pay.test"]);

        std::fs::write(&file, "[policy]\nallowedDomain = [\"x.test\"]\n").unwrap();
        let args = run_args(&["--config", file.to_str().unwrap()]);
        let err = RunConfig::resolve_over(&saved, None, &args, env).unwrap_err();
        assert!(err.message.contains("allowedDomain"), "{}", err.message);
    }

    #[test]
    fn tools_effort_and_budget_reach_the_run_and_bad_values_name_the_fix() {
        let env = |name: &str| (name == "ANTHROPIC_API_KEY").then(|| "k".to_owned());
        let config = RunConfig::resolve(
            &run_args(&[
                "--tools",
                "browser",
                "--effort",
                "high",
                "--thinking-budget",
                "4096",
            ]),
            env,
        )
        .unwrap();
        assert_eq!(config.options.tools, Some(Tools::Browser));
        assert_eq!(config.options.effort, Some(Effort::High));
        assert_eq!(config.options.thinking_budget, Some(4096));
        let err = RunConfig::resolve(&run_args(&["--tools", "mouse"]), env).unwrap_err();
        assert!(
            err.message.contains("computer or browser"),
            "{}",
            err.message
        );
        let err = RunConfig::resolve(&run_args(&["--effort", "extreme"]), env).unwrap_err();
        assert!(
            err.message
                .contains("minimal, low, medium, high, xhigh or max"),
            "{}",
            err.message
        );
    }

    #[test]
    fn secret_domains_scope_secrets_and_bad_ones_name_the_fix() {
        let env = |name: &str| match name {
            "ANTHROPIC_API_KEY" => Some("k".to_owned()),
            "SHOP_PW" => Some("pw-value".to_owned()),
            _ => None,
        };
        let config = RunConfig::resolve(
            &run_args(&[
                "--secret",
                "PW=SHOP_PW",
                "--secret-domain",
                "PW=shop.example, *.pay.example",
            ]),
            env,
        )
        .unwrap();
        assert_eq!(
            config.options.secrets().unwrap().domains("PW"),
            vec!["shop.example", "*.pay.example"]
        );
        for (flags, fix) in [
            (
                &["--secret", "PW=SHOP_PW", "--secret-domain", "PW"][..],
                "NAME=",
            ),
            (
                &["--secret", "PW=SHOP_PW", "--secret-domain", "NOPE=a.test"],
                "no secret by that name",
            ),
            (
                &[
                    "--secret",
                    "PW=SHOP_PW",
                    "--secret-domain",
                    "PW=https://a.test/",
                ],
                "without scheme",
            ),
        ] {
            let err = RunConfig::resolve(&run_args(flags), env).unwrap_err();
            assert!(err.message.contains(fix), "{flags:?}: {}", err.message);
        }
    }

    #[test]
    fn the_browser_opt_ins_are_off_unless_asked_for() {
        let env = |name: &str| (name == "ANTHROPIC_API_KEY").then(|| "k".to_owned());
        let plain = RunConfig::resolve(&run_args(&[]), env).unwrap();
        assert_eq!(plain.options.policy.unwrap().allow_model_javascript, None);
        assert_eq!(plain.options.upload_dir, None);
        let dir = tempfile::tempdir().unwrap();
        let on = RunConfig::resolve(
            &run_args(&[
                "--allow-model-javascript",
                "--upload-dir",
                dir.path().to_str().unwrap(),
            ]),
            env,
        )
        .unwrap();
        assert_eq!(
            on.options.policy.unwrap().allow_model_javascript,
            Some(true)
        );
        assert_eq!(
            on.options.upload_dir,
            Some(PathSetting::Path(dir.path().into()))
        );
        let missing = dir.path().join("nope");
        let err = RunConfig::resolve(&run_args(&["--upload-dir", missing.to_str().unwrap()]), env)
            .unwrap_err();
        assert!(err.message.contains("--upload-dir"), "{}", err.message);
    }
}

#[cfg(test)]
mod option_flags {
    use super::*;

    fn resolve(extra: &[&str]) -> Result<RunConfig, CliError> {
        use clap::Parser as _;
        let mut argv = vec!["lumen", "run", "a task"];
        argv.extend_from_slice(extra);
        let crate::args::Command::Run(args) =
            crate::args::Cli::try_parse_from(argv).unwrap().command
        else {
            panic!("not a run")
        };
        RunConfig::resolve(&args.options, |name| {
            (name == "ANTHROPIC_API_KEY").then(|| "k".to_owned())
        })
    }

    #[test]
    fn the_new_flags_fill_the_run_options_and_bad_ones_name_the_flag() {
        let c = resolve(&[
            "--verify-url",
            "/done$",
            "--confidence-gate",
            "3",
            "--checkpoint-interval",
            "0",
            "--site-tips",
            "--viewport",
            "1024x700",
            "--screenshot-format",
            "png",
            "--images-kept",
            "4",
            "--browserbase",
        ])
        .unwrap();
        let o = &c.options;
        assert_eq!(o.verify_url.as_deref(), Some("/done$"));
        assert_eq!(o.confidence_gate, Some(3));
        assert_eq!(o.checkpoint_interval, Some(0));
        assert_eq!(o.site_tips, Some(true));
        assert_eq!(
            o.viewport.map(|v| v.to_string()).as_deref(),
            Some("1024x700")
        );
        assert_eq!(o.screenshot_format, Some(lumen::ImageFormat::Png));
        assert_eq!(o.images_kept, Some(4));
        assert_eq!(o.browserbase, Some(true));
        for (flags, named) in [
            (&["--confidence-gate", "1"][..], "--confidence-gate"),
            (&["--viewport", "huge"], "--viewport"),
            (&["--verify-url", "("], "--verify-url"),
            (&["--screenshot-format", "gif"], "--screenshot-format"),
            (&["--attempts", "2"], "--attempts"),
        ] {
            let err = resolve(flags).unwrap_err();
            assert!(err.message.contains(named), "{flags:?}: {}", err.message);
        }
    }
}
