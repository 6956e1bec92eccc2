//! The `lumen.toml` config file and its merge with the flags (a flag wins
//! over the file; the file wins over the defaults).
//!
//! ```toml
//! model = "anthropic/claude-sonnet-4-6"
//! max_steps = 25
//! max_tokens = 200000               # stop before the next model call
//! max_cost = 0.50                   # US dollars, at list prices
//! max_failures = 5                  # failed actions in a row
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
use lumen::safety::{PolicyConfig, Secrets};
use serde::Deserialize;

use crate::args::{Mode, PolicyArgs, RunArgs};
use crate::exit::CliError;

/// The model used when neither a flag nor the config file names one.
pub(crate) const DEFAULT_MODEL: &str = "anthropic/claude-sonnet-4-6";

/// The providers `create_adapter` knows by prefix.
const PREFIXES: &[&str] = &["anthropic", "openai", "google", "compatible"];

/// The config file, every key optional. Unknown keys are errors, so a typo
/// is reported instead of silently ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileConfig {
    model: Option<String>,
    base_url: Option<String>,
    tools: Option<String>,
    effort: Option<String>,
    thinking_budget: Option<u32>,
    planner_model: Option<String>,
    max_steps: Option<u32>,
    max_tokens: Option<u64>,
    max_cost: Option<f64>,
    max_failures: Option<u32>,
    headed: Option<bool>,
    cdp_url: Option<String>,
    start_url: Option<String>,
    #[serde(default)]
    allow_domains: Vec<String>,
    #[serde(default)]
    block_domains: Vec<String>,
    /// Secret name → environment variable holding its value.
    #[serde(default)]
    secrets: BTreeMap<String, String>,
    secrets_file: Option<PathBuf>,
    /// Secret name → the domains it may be typed on.
    #[serde(default)]
    secret_domains: BTreeMap<String, Vec<String>>,
    mode: Option<Mode>,
    attempts: Option<u32>,
    trace_dir: Option<PathBuf>,
    allow_model_javascript: Option<bool>,
    upload_dir: Option<PathBuf>,
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
        toml::from_str(&text).map_err(|e| {
            CliError::config(format!(
                "the config file {} is not valid: {}; fix it (see docs/cli.md for the keys)",
                path.display(),
                e.message()
            ))
        })
    }
}

/// Everything a run needs, merged and checked.
#[derive(Debug)]
pub(crate) struct RunConfig {
    pub(crate) model: String,
    pub(crate) base_url: Option<String>,
    pub(crate) tools: Option<Tools>,
    pub(crate) effort: Option<Effort>,
    pub(crate) thinking_budget: Option<u32>,
    pub(crate) planner_model: Option<String>,
    pub(crate) max_steps: u32,
    pub(crate) max_tokens: Option<u64>,
    pub(crate) max_cost_usd: Option<f64>,
    pub(crate) max_failures: Option<u32>,
    pub(crate) headed: bool,
    pub(crate) cdp_url: Option<String>,
    pub(crate) start_url: Option<String>,
    pub(crate) policy: PolicyConfig,
    pub(crate) secrets: Secrets,
    pub(crate) mode: Mode,
    pub(crate) attempts: u32,
    pub(crate) trace_dir: Option<PathBuf>,
    /// The folder uploads may come from (`None`: uploads are off).
    pub(crate) upload_dir: Option<PathBuf>,
}

impl RunConfig {
    /// Merges the flags over the config file (if any), reading secrets from
    /// `env`.
    pub(crate) fn resolve(
        args: &RunArgs,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, CliError> {
        let file = match &args.config {
            Some(path) => FileConfig::load(path)?,
            None => FileConfig::default(),
        };
        let model = args
            .model
            .clone()
            .or(file.model)
            .unwrap_or_else(|| DEFAULT_MODEL.to_owned());
        let base_url = args.base_url.clone().or(file.base_url);
        check_model(&model, base_url.as_deref(), &env)?;
        let tools = match args.tools.clone().or(file.tools) {
            Some(t) => Some(
                t.parse::<Tools>()
                    .map_err(|e| CliError::config(format!("--tools: {e}")))?,
            ),
            None => None,
        };
        let effort = match args.effort.clone().or(file.effort) {
            Some(e) => Some(
                e.parse::<Effort>()
                    .map_err(|e| CliError::config(format!("--effort: {e}")))?,
            ),
            None => None,
        };
        let thinking_budget = args.thinking_budget.or(file.thinking_budget);
        let planner_model = args.planner_model.clone().or(file.planner_model);
        if let Some(p) = &planner_model {
            check_model(p, base_url.as_deref(), &env)?;
        }
        let max_steps = args.max_steps.or(file.max_steps).unwrap_or(30);
        if max_steps == 0 {
            return Err(CliError::config(
                "--max-steps must be at least 1".to_owned(),
            ));
        }
        let max_tokens = args.max_tokens.or(file.max_tokens);
        if max_tokens == Some(0) {
            return Err(CliError::config("--max-tokens must be at least 1"));
        }
        let max_cost_usd = args.max_cost.or(file.max_cost);
        if let Some(usd) = max_cost_usd
            && !(usd.is_finite() && usd > 0.0)
        {
            return Err(CliError::config(format!(
                "--max-cost {usd}: give a positive number of US dollars, e.g. --max-cost 0.50"
            )));
        }
        let probe = lumen::TokenUsage {
            input_tokens: 1,
            ..Default::default()
        };
        if max_cost_usd.is_some() && crate::pricing::cost(&model, &probe).is_none() {
            return Err(CliError::config(format!(
                "--max-cost: {model} has no published price, so a cost budget cannot be \
                 checked; use --max-tokens instead"
            )));
        }
        let max_failures = args.max_failures.or(file.max_failures);
        if max_failures == Some(0) {
            return Err(CliError::config("--max-failures must be at least 1"));
        }
        let mode = args.mode.or(file.mode).unwrap_or(Mode::Agent);
        let attempts = args.attempts.or(file.attempts).unwrap_or(match mode {
            Mode::Exec => 3,
            _ => 1,
        });
        if attempts == 0 {
            return Err(CliError::config("--attempts must be at least 1"));
        }
        if args.attempts.is_some() && mode != Mode::Exec {
            return Err(CliError::config(
                "--attempts only applies with --mode exec; add --mode exec or drop --attempts",
            ));
        }
        // `lumen run` starts open (local pages work); the policy options
        // close it.
        let mut policy = policy_from(&args.policy, PolicyConfig::default())?;
        policy
            .allowed_domains
            .extend(pick(&args.allow_domains, file.allow_domains));
        policy
            .blocked_domains
            .extend(pick(&args.block_domains, file.block_domains));
        if args.allow_model_javascript || file.allow_model_javascript == Some(true) {
            policy.allow_model_javascript = Some(true);
        }
        lumen::safety::SessionPolicy::new(&policy)
            .map_err(|e| CliError::config(format!("the policy: {e}")))?;
        let upload_dir = args.upload_dir.clone().or(file.upload_dir);
        if let Some(dir) = &upload_dir
            && !dir.is_dir()
        {
            return Err(CliError::config(format!(
                "--upload-dir {}: not a folder; create it or name an existing one",
                dir.display()
            )));
        }
        let mut secrets = Secrets::new();
        let mut pairs: Vec<(String, String)> = file.secrets.into_iter().collect();
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
            insert_secret(&mut secrets, &name, value)?;
        }
        if let Some(path) = args.secrets_file.clone().or(file.secrets_file) {
            read_secrets_file(&path, &mut secrets)?;
        }
        let mut scopes: Vec<(String, Vec<String>)> = file.secret_domains.into_iter().collect();
        for spec in &args.secret_domains {
            let (name, domains) = spec.split_once('=').ok_or_else(|| {
                CliError::config(format!(
                    "--secret-domain {spec:?} must look like NAME=example.com[,*.example.org]"
                ))
            })?;
            let domains = domains.split(',').map(|d| d.trim().to_owned()).collect();
            scopes.push((name.trim().to_owned(), domains));
        }
        for (name, domains) in scopes {
            secrets
                .scope(&name, &domains)
                .map_err(|e| CliError::config(e.to_string()))?;
        }
        Ok(Self {
            model,
            base_url,
            tools,
            effort,
            thinking_budget,
            planner_model,
            max_steps,
            max_tokens,
            max_cost_usd,
            max_failures,
            headed: args.headed || file.headed.unwrap_or(false),
            cdp_url: args.cdp_url.clone().or(file.cdp_url),
            start_url: args.url.clone().or(file.start_url),
            policy,
            secrets,
            mode,
            attempts,
            trace_dir: args.output.trace_dir.clone().or(file.trace_dir),
            upload_dir,
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

fn insert_secret(secrets: &mut Secrets, name: &str, value: String) -> Result<(), CliError> {
    secrets
        .insert(name, value)
        .map_err(|e| CliError::config(format!("secret {name}: {e}")))
}

/// `NAME=value` lines; blank lines and `#` comments are skipped. Errors
/// name the line, never the value.
fn read_secrets_file(path: &Path, secrets: &mut Secrets) -> Result<(), CliError> {
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
        insert_secret(secrets, name.trim(), value.trim().to_owned())?;
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
        let err = toml::from_str::<FileConfig>("modle = \"x\"").unwrap_err();
        assert!(err.message().contains("modle"), "{}", err.message());
        let ok: FileConfig =
            toml::from_str("model = \"openai/gpt-5\"\nmax_steps = 4\nmode = \"exec\"").unwrap();
        assert_eq!(ok.max_steps, Some(4));
        assert_eq!(ok.mode, Some(Mode::Exec));
    }

    fn run_args(extra: &[&str]) -> RunArgs {
        use clap::Parser as _;
        let mut argv = vec!["lumen", "run", "a task"];
        argv.extend_from_slice(extra);
        match crate::args::Cli::try_parse_from(argv).unwrap().command {
            crate::args::Command::Run(args) => *args,
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
        assert_eq!(config.tools, Some(Tools::Browser));
        assert_eq!(config.effort, Some(Effort::High));
        assert_eq!(config.thinking_budget, Some(4096));
        let err = RunConfig::resolve(&run_args(&["--tools", "mouse"]), env).unwrap_err();
        assert!(
            err.message.contains("computer or browser"),
            "{}",
            err.message
        );
        let err = RunConfig::resolve(&run_args(&["--effort", "extreme"]), env).unwrap_err();
        assert!(
            err.message.contains("minimal, low, medium, high or max"),
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
            config.secrets.domains("PW"),
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
        assert_eq!(plain.policy.allow_model_javascript, None);
        assert_eq!(plain.upload_dir, None);
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
        assert_eq!(on.policy.allow_model_javascript, Some(true));
        assert_eq!(on.upload_dir.as_deref(), Some(dir.path()));
        let missing = dir.path().join("nope");
        let err = RunConfig::resolve(&run_args(&["--upload-dir", missing.to_str().unwrap()]), env)
            .unwrap_err();
        assert!(err.message.contains("--upload-dir"), "{}", err.message);
    }
}
