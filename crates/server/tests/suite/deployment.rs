//! docs/deployment.md's examples are real: its ```yaml blocks parse (every
//! document), the Docker Compose file and the Kubernetes objects have the
//! shape a deployment of several workers on one PostgreSQL queue needs, and
//! every `--flag` the workers are given is one `lumen serve` knows
//! (read from the CLI's clap definitions, crates/cli/src/args.rs).

use std::collections::BTreeSet;
use std::path::Path;

use yaml_rust2::{Yaml, YamlLoader};

fn repo_file(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The ```yaml blocks of a Markdown text, in order.
fn yaml_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match &mut current {
            None if line.trim() == "```yaml" => current = Some(String::new()),
            None => {}
            Some(_) if line.trim() == "```" => blocks.extend(current.take()),
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
        }
    }
    assert!(current.is_none(), "a ```yaml block is not closed");
    blocks
}

fn text(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

fn list(y: &Yaml) -> &[Yaml] {
    y.as_vec().map_or(&[], Vec::as_slice)
}

/// A command as words: a list as is, a string split on whitespace.
fn words(y: &Yaml) -> Vec<String> {
    match y {
        Yaml::String(s) => s.split_whitespace().map(str::to_owned).collect(),
        _ => list(y).iter().filter_map(text).collect(),
    }
}

/// Whether the words run `lumen serve` (the program named, or an image
/// whose entrypoint is `lumen`, with `serve` first).
fn is_lumen_serve(words: &[String]) -> bool {
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    matches!(words.as_slice(), ["serve", ..]) || words.windows(2).any(|w| w == ["lumen", "serve"])
}

/// The value of `--name` in `words` (`--name=value` or `--name value`),
/// the first if repeated.
fn flag(words: &[String], name: &str) -> Option<String> {
    let long = format!("--{name}");
    words.iter().enumerate().find_map(|(i, w)| {
        if let Some(value) = w.strip_prefix(&format!("{long}=")) {
            Some(value.to_owned())
        } else if *w == long {
            words.get(i + 1).cloned()
        } else {
            None
        }
    })
}

/// Every `--name` in `words`.
fn flag_names(words: &[String]) -> Vec<String> {
    words
        .iter()
        .filter_map(|w| w.strip_prefix("--"))
        .map(|w| w.split('=').next().unwrap_or(w).to_owned())
        .collect()
}

/// The host of a URL (`scheme://user:pw@host:port/path?query` → `host`).
fn url_host(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    host_port.split(':').next().unwrap_or_default().to_owned()
}

/// A Compose `environment` (a map, or a list of `KEY=value`) entry.
fn compose_env(service: &Yaml, key: &str) -> Option<String> {
    let env = &service["environment"];
    if let Some(value) = text(&env[key]) {
        return Some(value);
    }
    list(env).iter().filter_map(text).find_map(|entry| {
        let (k, v) = entry.split_once('=')?;
        (k == key).then(|| v.to_owned())
    })
}

/// The long options of `lumen serve`: the fields of `ServeArgs` with
/// `#[arg(long …)]` (the field's name in kebab case, or `long = "…"`),
/// following `#[command(flatten)]` fields into their structs.
fn serve_flags(args_rs: &str) -> BTreeSet<String> {
    let mut flags = BTreeSet::new();
    collect_flags(args_rs, "ServeArgs", &mut flags);
    flags
}

fn collect_flags(src: &str, name: &str, flags: &mut BTreeSet<String>) {
    let start = src
        .find(&format!("struct {name} {{"))
        .unwrap_or_else(|| panic!("no `struct {name}` in args.rs"));
    let body = &src[start..];
    let body = &body[..body.find("\n}").expect("the struct's closing brace")];
    let mut attrs = String::new();
    for line in body.lines().skip(1) {
        let line = line.trim();
        if line.starts_with("///") || line.starts_with("//") {
            continue;
        }
        let field = line
            .strip_prefix("pub(crate) ")
            .or_else(|| line.strip_prefix("pub "))
            .and_then(|rest| rest.split_once(':'))
            .filter(|(ident, _)| ident.chars().all(|c| c.is_alphanumeric() || c == '_'));
        let Some((ident, ty)) = field else {
            attrs.push_str(line);
            attrs.push(' ');
            continue;
        };
        if attrs.contains("#[command(flatten)]") {
            let ty = ty.trim().trim_end_matches(',');
            collect_flags(src, ty.rsplit("::").next().unwrap_or(ty), flags);
        } else if let Some(arg) = attrs.find("#[arg(").map(|i| &attrs[i..]) {
            if let Some(explicit) = arg.split("long = \"").nth(1) {
                flags.insert(explicit.split('"').next().unwrap_or_default().to_owned());
            } else if arg
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|word| word == "long")
            {
                flags.insert(ident.replace('_', "-"));
            }
        }
        attrs.clear();
    }
}

/// The parsed documents of every block, and which block is which.
struct Examples {
    compose: Yaml,
    kube: Vec<Yaml>,
}

fn examples() -> Examples {
    let doc = repo_file("../../docs/deployment.md");
    let mut compose = None;
    let mut kube = Vec::new();
    for (i, block) in yaml_blocks(&doc).iter().enumerate() {
        let docs = YamlLoader::load_from_str(block)
            .unwrap_or_else(|e| panic!("deployment.md's yaml block {} does not parse: {e}", i + 1));
        assert!(!docs.is_empty(), "yaml block {} is empty", i + 1);
        for d in docs {
            if !d["services"].is_badvalue() {
                assert!(compose.is_none(), "two Compose files");
                compose = Some(d);
            } else if text(&d["kind"]).is_some() {
                kube.push(d);
            } else {
                panic!(
                    "yaml block {} holds neither a Compose file nor a Kubernetes object",
                    i + 1
                );
            }
        }
    }
    Examples {
        compose: compose.expect("a Docker Compose example"),
        kube,
    }
}

#[test]
fn the_compose_file_runs_workers_on_one_database_pool_and_volume() {
    let Examples { compose, .. } = examples();
    let services = compose["services"].as_hash().expect("services");
    let named = |pred: &dyn Fn(&str) -> bool| -> Vec<String> {
        services
            .iter()
            .filter(|(_, s)| text(&s["image"]).is_some_and(|image| pred(&image)))
            .filter_map(|(name, _)| text(name))
            .collect()
    };
    let postgres = named(&|image| image.starts_with("postgres"));
    let [postgres] = postgres.as_slice() else {
        panic!("one postgres service, found {postgres:?}");
    };
    let postgres_service = &compose["services"][postgres.as_str()];
    assert!(
        !postgres_service["healthcheck"].is_badvalue(),
        "postgres has a healthcheck, for the workers' depends_on"
    );
    let pools = named(&|image| image.contains("browserless"));
    let [pool] = pools.as_slice() else {
        panic!("one browser pool service, found {pools:?}");
    };

    let workers: Vec<(String, &Yaml)> = services
        .iter()
        .filter(|(_, s)| is_lumen_serve(&words(&s["command"])))
        .map(|(name, s)| (text(name).unwrap_or_default(), s))
        .collect();
    assert!(
        workers.len() >= 2,
        "at least two workers, found {}",
        workers.len()
    );

    let named_volumes = compose["volumes"].as_hash().expect("top-level volumes");
    let mut data_volumes = BTreeSet::new();
    for (name, worker) in &workers {
        let cmd = words(&worker["command"]);
        let database = flag(&cmd, "database-url")
            .or_else(|| compose_env(worker, "LUMEN_DATABASE_URL"))
            .unwrap_or_else(|| panic!("{name}: no --database-url nor LUMEN_DATABASE_URL"));
        assert!(database.starts_with("postgres://"), "{name}: {database}");
        assert_eq!(
            &url_host(&database),
            postgres,
            "{name}: the database is the postgres service"
        );
        let endpoint = flag(&cmd, "browser-endpoint")
            .unwrap_or_else(|| panic!("{name}: no --browser-endpoint"));
        assert_eq!(
            &url_host(&endpoint),
            pool,
            "{name}: the browsers come from the pool"
        );
        assert_eq!(
            flag(&cmd, "host").as_deref(),
            Some("0.0.0.0"),
            "{name}: --host"
        );
        assert!(
            compose_env(worker, lumen_server::TOKEN_ENV).is_some(),
            "{name}: the token in {}",
            lumen_server::TOKEN_ENV
        );
        assert_eq!(
            text(&worker["depends_on"][postgres.as_str()]["condition"]).as_deref(),
            Some("service_healthy"),
            "{name}: waits for a healthy postgres"
        );

        let data_dir = flag(&cmd, "data-dir").unwrap_or_else(|| panic!("{name}: no --data-dir"));
        let mounted: Vec<String> = list(&worker["volumes"])
            .iter()
            .filter_map(|v| match text(v) {
                // `source:target[:mode]`
                Some(short) => {
                    let mut parts = short.split(':');
                    let (source, target) = (parts.next()?, parts.next()?);
                    (target == data_dir).then(|| source.to_owned())
                }
                None => (text(&v["target"]).as_deref() == Some(data_dir.as_str()))
                    .then(|| text(&v["source"]))
                    .flatten(),
            })
            .collect();
        let [volume] = mounted.as_slice() else {
            panic!("{name}: one volume mounted at {data_dir}, found {mounted:?}");
        };
        assert!(
            named_volumes.contains_key(&Yaml::String(volume.clone())),
            "{name}: {volume} is a named volume"
        );
        data_volumes.insert(volume.clone());
    }
    assert_eq!(
        data_volumes.len(),
        1,
        "every worker mounts the same data volume: {data_volumes:?}"
    );
}

#[test]
fn the_kubernetes_objects_run_two_workers_on_a_shared_volume_with_probes() {
    let Examples { kube, .. } = examples();
    let of_kind = |kind: &str| -> Vec<&Yaml> {
        kube.iter()
            .filter(|d| text(&d["kind"]).as_deref() == Some(kind))
            .collect()
    };
    let name_of = |d: &Yaml| text(&d["metadata"]["name"]).expect("metadata.name");

    let deployments: Vec<&Yaml> = of_kind("Deployment")
        .into_iter()
        .filter(|d| {
            list(&d["spec"]["template"]["spec"]["containers"])
                .iter()
                .any(|c| {
                    let mut cmd = words(&c["command"]);
                    cmd.extend(words(&c["args"]));
                    is_lumen_serve(&cmd)
                })
        })
        .collect();
    let [deployment] = deployments.as_slice() else {
        panic!(
            "one Deployment of `lumen serve` workers, found {}",
            deployments.len()
        );
    };
    let replicas = deployment["spec"]["replicas"].as_i64().expect("replicas");
    assert!(replicas >= 2, "replicas {replicas}");

    let pod = &deployment["spec"]["template"]["spec"];
    let container = list(&pod["containers"])
        .iter()
        .find(|c| {
            words(&c["args"]).iter().any(|w| w == "serve") || is_lumen_serve(&words(&c["command"]))
        })
        .expect("the worker container");
    let mut cmd = words(&container["command"]);
    cmd.extend(words(&container["args"]));

    // The database and the token: flags, or variables from the Secret.
    let secrets = of_kind("Secret");
    let from_secret = |var: &str| -> bool {
        list(&container["env"])
            .iter()
            .filter(|e| text(&e["name"]).as_deref() == Some(var))
            .any(|e| {
                let by = &e["valueFrom"]["secretKeyRef"];
                let (Some(secret), Some(key)) = (text(&by["name"]), text(&by["key"])) else {
                    return false;
                };
                secrets.iter().any(|s| {
                    name_of(s) == secret
                        && (!s["stringData"][key.as_str()].is_badvalue()
                            || !s["data"][key.as_str()].is_badvalue())
                })
            })
    };
    match flag(&cmd, "database-url") {
        Some(url) => assert!(url.starts_with("postgres"), "--database-url {url}"),
        None => assert!(
            from_secret("LUMEN_DATABASE_URL"),
            "LUMEN_DATABASE_URL from the Secret"
        ),
    }
    assert!(
        flag(&cmd, "token").is_some() || from_secret(lumen_server::TOKEN_ENV),
        "{} from the Secret",
        lumen_server::TOKEN_ENV
    );
    assert_eq!(flag(&cmd, "host").as_deref(), Some("0.0.0.0"), "--host");
    assert!(
        flag(&cmd, "browser-endpoint").is_some(),
        "--browser-endpoint"
    );

    // The data directory is a ReadWriteMany claim.
    let data_dir = flag(&cmd, "data-dir").expect("--data-dir");
    let mount = list(&container["volumeMounts"])
        .iter()
        .find(|m| text(&m["mountPath"]).as_deref() == Some(data_dir.as_str()))
        .unwrap_or_else(|| panic!("a volume mounted at {data_dir}"));
    let volume_name = text(&mount["name"]).expect("the mount's volume");
    let volume = list(&pod["volumes"])
        .iter()
        .find(|v| text(&v["name"]).as_deref() == Some(volume_name.as_str()))
        .unwrap_or_else(|| panic!("the pod's volume {volume_name}"));
    let claim = text(&volume["persistentVolumeClaim"]["claimName"]).expect("a claim");
    let pvc = of_kind("PersistentVolumeClaim")
        .into_iter()
        .find(|p| name_of(p) == claim)
        .unwrap_or_else(|| panic!("the PersistentVolumeClaim {claim}"));
    assert!(
        list(&pvc["spec"]["accessModes"])
            .iter()
            .any(|m| text(m).as_deref() == Some("ReadWriteMany")),
        "{claim} is ReadWriteMany"
    );

    // Probes on /health, at the server's port.
    let port = flag(&cmd, "port").unwrap_or_else(|| "3001".into());
    for probe in ["readinessProbe", "livenessProbe"] {
        let get = &container[probe]["httpGet"];
        assert_eq!(text(&get["path"]).as_deref(), Some("/health"), "{probe}");
        assert_eq!(text(&get["port"]).as_ref(), Some(&port), "{probe}");
    }

    // A Service in front of the workers.
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    let services = of_kind("Service");
    let service = services
        .iter()
        .find(|s| {
            s["spec"]["selector"].as_hash().is_some_and(|sel| {
                !sel.is_empty()
                    && sel
                        .iter()
                        .all(|(k, v)| &labels[text(k).unwrap_or_default().as_str()] == v)
            })
        })
        .expect("a Service selecting the workers");
    assert!(
        list(&service["spec"]["ports"])
            .iter()
            .any(|p| text(&p["targetPort"]).or_else(|| text(&p["port"])).as_ref() == Some(&port)),
        "the Service reaches port {port}"
    );
}

#[test]
fn every_flag_in_the_examples_is_one_lumen_serve_knows() {
    let known = serve_flags(&repo_file("../cli/src/args.rs"));
    // The parser reads what it should: flags of ServeArgs and the
    // flattened PolicyArgs, by field name and by explicit `long`.
    for sure in [
        "port",
        "data-dir",
        "allow-host",
        "endpoint-sessions",
        "allow-domain",
    ] {
        assert!(
            known.contains(sure),
            "args.rs parsing lost --{sure}: {known:?}"
        );
    }

    let Examples { compose, kube } = examples();
    let mut commands: Vec<Vec<String>> = Vec::new();
    for (_, service) in compose["services"].as_hash().expect("services") {
        commands.push(words(&service["command"]));
    }
    for d in &kube {
        for c in list(&d["spec"]["template"]["spec"]["containers"]) {
            let mut cmd = words(&c["command"]);
            cmd.extend(words(&c["args"]));
            commands.push(cmd);
        }
    }
    let used: BTreeSet<String> = commands
        .iter()
        .filter(|cmd| is_lumen_serve(cmd))
        .flat_map(|cmd| flag_names(cmd))
        .collect();
    assert!(used.len() >= 8, "the examples' flags were found: {used:?}");
    let unknown: Vec<&String> = used.difference(&known).collect();
    assert!(
        unknown.is_empty(),
        "flags `lumen serve` does not know: {unknown:?}"
    );

    // The variables the workers are configured with are ones Lumen reads.
    let options_rs = repo_file("src/options.rs");
    let args_rs = repo_file("../cli/src/args.rs");
    let mut vars = BTreeSet::new();
    for (_, service) in compose["services"].as_hash().expect("services") {
        if is_lumen_serve(&words(&service["command"])) {
            let env = &service["environment"];
            vars.extend(
                env.as_hash()
                    .into_iter()
                    .flatten()
                    .filter_map(|(k, _)| text(k)),
            );
            vars.extend(
                list(env)
                    .iter()
                    .filter_map(text)
                    .filter_map(|e| Some(e.split_once('=')?.0.to_owned())),
            );
        }
    }
    for d in &kube {
        for c in list(&d["spec"]["template"]["spec"]["containers"]) {
            vars.extend(list(&c["env"]).iter().filter_map(|e| text(&e["name"])));
        }
    }
    for var in vars.iter().filter(|v| v.starts_with("LUMEN_")) {
        assert!(
            var == lumen_server::TOKEN_ENV
                || args_rs.contains(&format!("\"{var}\""))
                || options_rs.contains(&format!("\"{var}\"")),
            "{var} is read by neither the CLI nor the server options"
        );
    }
}

#[test]
fn the_helpers_read_what_they_should() {
    let cmd: Vec<String> = [
        "lumen",
        "serve",
        "--port=3001",
        "--data-dir",
        "/data",
        "--allow-private-network",
    ]
    .map(String::from)
    .to_vec();
    assert!(is_lumen_serve(&cmd));
    assert!(is_lumen_serve(&["serve".to_owned()]));
    assert!(!is_lumen_serve(&["lumen".to_owned(), "run".to_owned()]));
    assert_eq!(flag(&cmd, "port").as_deref(), Some("3001"));
    assert_eq!(flag(&cmd, "data-dir").as_deref(), Some("/data"));
    assert_eq!(
        flag_names(&cmd),
        ["port", "data-dir", "allow-private-network"]
    );
    assert_eq!(url_host("postgres://u:p@db:5432/x?sslmode=require"), "db");
    assert_eq!(url_host("ws://browserless:3000?token=t"), "browserless");
    assert_eq!(url_host("postgres://db/x"), "db");

    let md = "text\n```yaml\na: 1\n```\n```json\n{}\n```\n```yaml\n---\nb: 2\n---\nc: 3\n```\n";
    let blocks = yaml_blocks(md);
    assert_eq!(blocks.len(), 2);
    assert_eq!(YamlLoader::load_from_str(&blocks[1]).unwrap().len(), 2);

    let args = r#"
pub(crate) struct ServeArgs {
    /// Mentions long words: long.
    #[arg(long, default_value_t = 1)]
    pub(crate) max_concurrent: usize,
    #[arg(long = "allow-host", value_name = "NAME")]
    pub(crate) allow_hosts: Vec<String>,
    #[arg(
        long,
        requires = "x"
    )]
    pub(crate) endpoint_sessions: usize,
    #[arg(short = 'm')]
    pub(crate) model: Option<String>,
    #[command(flatten)]
    pub(crate) policy: crate::args::PolicyArgs,
}

pub(crate) struct PolicyArgs {
    #[arg(long)]
    pub(crate) allow_private_network: bool,
}
"#;
    let flags: Vec<String> = serve_flags(args).into_iter().collect();
    assert_eq!(
        flags,
        [
            "allow-host",
            "allow-private-network",
            "endpoint-sessions",
            "max-concurrent"
        ]
    );
}
