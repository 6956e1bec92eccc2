//! `cargo xtask bench cli`: `lumen browser` against agent-browser's native
//! binary, whole processes as the shell sees them.
//!
//! Both tools drive their own headless Chromium (the same executable) on
//! the same fixture page (`form.html` from lumen-mock's `FixtureServer`).
//! After one cold `open` each, every sample runs each warm command once per
//! tool, interleaved and alternating which tool goes first, and times the
//! process from spawn to exit: `click @ref`, `fill @ref text`,
//! `type @ref text`, `snapshot -i`, `screenshot`, `url` (`get url` in
//! agent-browser) and `get text @ref`. Cold `open` (a new browser) is
//! measured separately, a few times, also interleaved. Medians and the
//! ratio lumen / agent-browser are printed as a Markdown table, then the
//! memory (RSS) of what each tool keeps running between commands: its
//! session process (agent-browser's daemon; lumen's keeper, which `open`
//! starts and which runs the warm commands on its link to the page) and
//! its Chromium.
//!
//! agent-browser is found through `--agent-browser`, `$AGENT_BROWSER`, or
//! `agent-browser` on `PATH` (its npm wrapper is swapped for the native
//! binary next to it). Without it, only lumen is measured, with a note on
//! how to install it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use lumen_mock::FixtureServer;

/// Options of `cargo xtask bench cli`.
#[derive(Debug, clap::Args)]
pub(crate) struct Options {
    /// Warm samples per command (medians are reported).
    #[arg(long, default_value_t = 100)]
    samples: usize,
    /// Cold `open` samples per tool.
    #[arg(long, default_value_t = 3)]
    cold: usize,
    /// The Chromium both tools start (default: the one lumen-browser's
    /// locator finds: LUMEN_CHROME, CHROME_PATH, /usr/bin/chromium, PATH).
    #[arg(long)]
    chrome: Option<PathBuf>,
    /// agent-browser's native binary (default: $AGENT_BROWSER, then
    /// `agent-browser` on PATH).
    #[arg(long)]
    agent_browser: Option<PathBuf>,
    /// The lumen binary (default: build and use target/release/lumen).
    #[arg(long)]
    lumen: Option<PathBuf>,
}

/// The Chromium to start: `--chrome`, else lumen-browser's locator.
fn chrome_of(options: &Options) -> Result<PathBuf> {
    match &options.chrome {
        Some(path) => Ok(path.clone()),
        None => Ok(lumen::browser::chromium::locate()?),
    }
}

/// The warm commands, as (label, lumen args, agent-browser args); `{ref}`
/// is the Name field's ref, `{button}` the Submit button's, `{shot}` a
/// screenshot path. `type` adds to what `fill` just put in the field (the
/// next sample's `fill` replaces it again).
const WARM: &[(&str, &[&str], &[&str])] = &[
    ("click @ref", &["click", "{ref}"], &["click", "{ref}"]),
    (
        "fill @ref text",
        &["fill", "{ref}", "Ada Lovelace"],
        &["fill", "{ref}", "Ada Lovelace"],
    ),
    (
        "type @ref text",
        &["type", "{ref}", "Ada Lovelace"],
        &["type", "{ref}", "Ada Lovelace"],
    ),
    ("snapshot -i", &["snapshot", "-i"], &["snapshot", "-i"]),
    (
        "screenshot",
        &["screenshot", "{shot}"],
        &["screenshot", "{shot}"],
    ),
    ("url", &["url"], &["get", "url"]),
    (
        "get text @ref",
        &["get", "text", "{button}"],
        &["get", "text", "{button}"],
    ),
];

/// One tool: how to run a command of it.
struct Tool {
    name: &'static str,
    exe: PathBuf,
    /// Arguments before the command (`browser --session …`).
    prefix: Vec<String>,
    env: Vec<(String, String)>,
    /// The ref of the form's Name field, once known.
    name_ref: String,
    /// The ref of the form's Submit button, once known.
    button_ref: String,
    /// What marks the tool's session process (agent-browser's daemon,
    /// lumen's keeper): the tool's own executable, with every one of these
    /// in its environment (its Chromium inherits the environment too).
    session_env: Vec<String>,
    /// What marks the tool's Chromium in its command line, when it is no
    /// child of the session process (lumen's, detached: its profile).
    browser_mark: Option<String>,
    shot: PathBuf,
}

impl Tool {
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.exe);
        cmd.args(&self.prefix);
        let shot = self.shot.to_string_lossy();
        for a in args {
            cmd.arg(
                a.replace("{ref}", &self.name_ref)
                    .replace("{button}", &self.button_ref)
                    .replace("{shot}", &shot),
            );
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null());
        cmd
    }

    /// Runs a command to completion; its wall time, spawn to exit.
    fn timed(&self, args: &[&str]) -> Result<(Duration, String)> {
        let mut cmd = self.command(args);
        let start = Instant::now();
        let out = cmd
            .output()
            .with_context(|| format!("starting {}", self.exe.display()))?;
        let took = start.elapsed();
        if !out.status.success() {
            bail!(
                "{} {}: {}{}",
                self.name,
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim(),
                String::from_utf8_lossy(&out.stdout).trim()
            );
        }
        Ok((took, String::from_utf8_lossy(&out.stdout).into_owned()))
    }

    /// Best effort: ends the tool's session.
    fn close(&self) {
        let _ = self
            .command(&["close"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// agent-browser's native binary: given, from `$AGENT_BROWSER`, or on
/// `PATH` (where npm links its JavaScript wrapper; the native binary sits
/// next to it).
fn find_agent_browser(given: Option<&Path>) -> Option<PathBuf> {
    let candidate = given
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("AGENT_BROWSER").map(PathBuf::from))
        .or_else(|| {
            let path = std::env::var_os("PATH")?;
            std::env::split_paths(&path)
                .map(|d| d.join("agent-browser"))
                .find(|p| p.is_file())
        })?;
    let real = candidate.canonicalize().ok()?;
    if real.extension().is_some_and(|e| e == "js") {
        let native = real.with_file_name(format!(
            "agent-browser-{}-{}",
            std::env::consts::OS,
            match std::env::consts::ARCH {
                "x86_64" => "x64",
                "aarch64" => "arm64",
                other => other,
            }
        ));
        return native.is_file().then_some(native);
    }
    real.is_file().then_some(real)
}

/// The ref the tool's `snapshot -i` gives the element `what` (`textbox
/// "Name"`): `- textbox "Name" [@e5]` (lumen) or `[ref=e5]`
/// (agent-browser).
fn ref_of(snapshot: &str, what: &str) -> Option<String> {
    let line = snapshot.lines().find(|l| l.contains(what))?;
    let at = line
        .find("@e")
        .or_else(|| line.find("ref=e").map(|i| i + 4))?;
    let digits: String = line[at..]
        .trim_start_matches('@')
        .chars()
        .skip(1)
        .take_while(char::is_ascii_digit)
        .collect();
    (!digits.is_empty()).then(|| format!("@e{digits}"))
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cores} cores, {cpu}, {}", std::env::consts::OS)
}

pub(crate) fn run(options: &Options) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let site = runtime
        .block_on(FixtureServer::start())
        .context("starting the fixture server")?;
    let url = site.url("form.html");
    let result = bench(options, &url);
    drop(site);
    result
}

fn bench(options: &Options, url: &str) -> Result<()> {
    let root = crate::util::project_root()?;
    let lumen = match &options.lumen {
        Some(p) => p.clone(),
        None => {
            let mut build = crate::util::cargo();
            build
                .current_dir(&root)
                .args(["build", "--release", "--quiet", "-p", "lumen-cli"]);
            crate::util::run(&mut build)?;
            root.join("target/release/lumen")
        }
    };
    let scratch = std::env::temp_dir().join(format!("lumen-bench-cli-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let chrome = chrome_of(options)?.to_string_lossy().into_owned();
    let lumen_state = scratch.join("lumen-state");
    let mut tools = vec![Tool {
        name: "lumen",
        exe: lumen,
        prefix: vec!["browser".into(), "--session".into(), "bench".into()],
        env: vec![
            (
                "LUMEN_STATE_DIR".into(),
                lumen_state.to_string_lossy().into_owned(),
            ),
            ("LUMEN_CHROME".into(), chrome.clone()),
        ],
        name_ref: String::new(),
        button_ref: String::new(),
        session_env: vec![
            "LUMEN_KEEPER_SESSION=bench".into(),
            format!("LUMEN_STATE_DIR={}", lumen_state.display()),
        ],
        browser_mark: Some(format!(
            "--user-data-dir={}",
            lumen_state.join("bench-profile").display()
        )),
        shot: scratch.join("lumen.png"),
    }];
    match find_agent_browser(options.agent_browser.as_deref()) {
        Some(exe) => tools.push(Tool {
            name: "agent-browser",
            exe,
            prefix: vec!["--session".into(), "lumenbench".into()],
            env: vec![
                ("AGENT_BROWSER_EXECUTABLE_PATH".into(), chrome),
                (
                    "AGENT_BROWSER_ARGS".into(),
                    "--no-sandbox,--disable-gpu,--disable-quic,--no-first-run,\
                     --disable-background-networking,--disable-component-update,--disable-sync"
                        .into(),
                ),
            ],
            name_ref: String::new(),
            button_ref: String::new(),
            session_env: vec![
                "AGENT_BROWSER_DAEMON=1".into(),
                "AGENT_BROWSER_SESSION=lumenbench".into(),
            ],
            browser_mark: None,
            shot: scratch.join("agent-browser.png"),
        }),
        None => eprintln!(
            "agent-browser not found: measuring lumen alone. Install it with\n  \
             npm install --prefix /tmp/ab agent-browser\nand pass --agent-browser \
             /tmp/ab/node_modules/agent-browser/bin/agent-browser-linux-x64 (or set \
             AGENT_BROWSER, or put agent-browser on PATH)."
        ),
    }
    let result = measure(&mut tools, options, url);
    // What each tool keeps running between commands, measured right after
    // the warm commands; then lumen's keeper once it also follows every
    // page for emulation and routes (from the first `set`).
    let during: Vec<(Memory, Memory)> = tools
        .iter()
        .map(|t| (t.session_memory(), t.browser_memory()))
        .collect();
    let keeper = match (&result, tools.first()) {
        (Ok(_), Some(lumen)) => lumen.timed(&["set", "media", "light"]).map(|_| {
            // Let it settle (attached to the page, its socket listening).
            std::thread::sleep(Duration::from_millis(500));
            lumen.session_memory()
        }),
        _ => Ok(Memory::default()),
    };
    for t in &tools {
        t.close();
    }
    // Nothing of either tool may outlive `close` (Chromium gets 5 s to quit).
    let deadline = Instant::now() + Duration::from_secs(8);
    let mut left: Vec<usize> = tools.iter().map(Tool::processes_left).collect();
    while left.iter().any(|&n| n > 0) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        left = tools.iter().map(Tool::processes_left).collect();
    }
    let _ = std::fs::remove_dir_all(&scratch);
    let rows = result?;
    let keeper = keeper?;

    let version = Command::new(chrome_of(options)?)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let ab_version = tools
        .get(1)
        .and_then(|t| Command::new(&t.exe).arg("--version").output().ok())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    println!(
        "lumen browser vs {}: whole processes, medians of {} warm samples and {} cold opens",
        ab_version
            .as_deref()
            .unwrap_or("(agent-browser not installed)"),
        options.samples.max(1),
        options.cold.max(1)
    );
    println!("{version}, headless, {}", machine());
    println!();
    println!("| command | lumen (ms) | agent-browser (ms) | lumen / agent-browser |");
    println!("|---|---:|---:|---:|");
    for (what, ours, theirs) in rows {
        match theirs {
            Some(t) => println!(
                "| {what} | {:.1} | {:.1} | {:.2} |",
                ms(ours),
                ms(t),
                ms(ours) / ms(t).max(1e-6)
            ),
            None => println!("| {what} | {:.1} | – | – |", ms(ours)),
        }
    }
    println!();
    println!(
        "Memory (RSS in MiB, summed over the processes, shared pages counted in each; \
         peak in brackets), right after the warm commands:"
    );
    println!();
    let column = |i: usize, f: &dyn Fn(&(Memory, Memory)) -> String| {
        during.get(i).map_or_else(|| "–".to_owned(), f)
    };
    println!("| kept between commands | lumen | agent-browser |");
    println!("|---|---:|---:|");
    println!(
        "| session process (lumen: keeper; agent-browser: daemon) | {} | {} |",
        column(0, &|m| m.0.shown()),
        column(1, &|m| m.0.shown())
    );
    println!(
        "| lumen keeper following the pages too (after `set media light`) | {} | – |",
        keeper.shown()
    );
    println!(
        "| Chromium, all its processes | {} | {} |",
        column(0, &|m| m.1.shown()),
        column(1, &|m| m.1.shown())
    );
    println!(
        "| processes left after `close` | {} | {} |",
        left.first()
            .map_or_else(|| "–".to_owned(), usize::to_string),
        left.get(1).map_or_else(|| "–".to_owned(), usize::to_string)
    );
    Ok(())
}

/// The memory of some processes, from `/proc/<pid>/status`.
#[derive(Debug, Default, Clone, Copy)]
struct Memory {
    processes: usize,
    /// Summed `VmRSS`, KiB.
    rss_kib: u64,
    /// Summed `VmHWM` (each process's peak RSS), KiB.
    peak_kib: u64,
}

impl Memory {
    fn of(pids: &[u32]) -> Self {
        let mut m = Self::default();
        for pid in pids {
            let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
                continue;
            };
            let field = |name: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                    .unwrap_or(0)
            };
            m.processes += 1;
            m.rss_kib += field("VmRSS:");
            m.peak_kib += field("VmHWM:");
        }
        m
    }

    fn shown(&self) -> String {
        if self.processes == 0 {
            return "none".to_owned();
        }
        let mib = |k: u64| k as f64 / 1024.0;
        format!(
            "{:.1} ({:.1}), {} process{}",
            mib(self.rss_kib),
            mib(self.peak_kib),
            self.processes,
            if self.processes == 1 { "" } else { "es" }
        )
    }
}

/// Every process: (pid, parent pid).
fn all_processes() -> Vec<(u32, u32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
            let after = &stat[stat.rfind(')')? + 1..];
            let ppid = after.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect()
}

/// A process's NUL-separated `/proc` file (`environ`, `cmdline`) as words.
fn proc_words(pid: u32, file: &str) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/{file}"))
        .map(|b| {
            b.split(|&c| c == 0)
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// `roots` and every process below them.
fn with_descendants(roots: Vec<u32>, all: &[(u32, u32)]) -> Vec<u32> {
    let mut out = roots;
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        for &(pid, ppid) in all {
            if ppid == parent && !out.contains(&pid) {
                out.push(pid);
            }
        }
        i += 1;
    }
    out
}

impl Tool {
    /// The tool's session processes (agent-browser's daemon, lumen's
    /// keeper), by their executable and environment.
    fn session_pids(&self, all: &[(u32, u32)]) -> Vec<u32> {
        let exe = self.exe.canonicalize().unwrap_or_else(|_| self.exe.clone());
        all.iter()
            .map(|&(pid, _)| pid)
            .filter(|&pid| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == exe))
            .filter(|&pid| {
                let env = proc_words(pid, "environ");
                !env.is_empty() && self.session_env.iter().all(|want| env.contains(want))
            })
            .collect()
    }

    /// The tool's Chromium: below its session process, or marked by its
    /// command line (and everything below that).
    fn browser_pids(&self, all: &[(u32, u32)]) -> Vec<u32> {
        let session = self.session_pids(all);
        let mut roots: Vec<u32> = with_descendants(session.clone(), all)
            .into_iter()
            .filter(|pid| !session.contains(pid))
            .collect();
        if let Some(mark) = &self.browser_mark {
            roots.extend(
                all.iter()
                    .map(|&(pid, _)| pid)
                    .filter(|&pid| proc_words(pid, "cmdline").iter().any(|w| w == mark)),
            );
        }
        roots.sort_unstable();
        roots.dedup();
        let mut pids = with_descendants(roots, all);
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    fn session_memory(&self) -> Memory {
        Memory::of(&self.session_pids(&all_processes()))
    }

    fn browser_memory(&self) -> Memory {
        Memory::of(&self.browser_pids(&all_processes()))
    }

    /// How many of the tool's processes (session or browser) are alive.
    fn processes_left(&self) -> usize {
        let all = all_processes();
        let mut pids = self.session_pids(&all);
        pids.extend(self.browser_pids(&all));
        pids.sort_unstable();
        pids.dedup();
        pids.len()
    }
}

type Rows = Vec<(String, Duration, Option<Duration>)>;

fn measure(tools: &mut [Tool], options: &Options, url: &str) -> Result<Rows> {
    let mut rows: Rows = Vec::new();
    // Cold opens: a new browser each time, tools interleaved.
    let mut cold: Vec<Vec<Duration>> = vec![Vec::new(); tools.len()];
    for i in 0..options.cold.max(1) {
        for k in 0..tools.len() {
            let t = &tools[(k + i) % tools.len()];
            t.close();
            let (took, _) = t.timed(&["open", url])?;
            cold[(k + i) % tools.len()].push(took);
        }
    }
    // Refs, and one warm-up of every command.
    for t in tools.iter_mut() {
        let (_, snap) = t.timed(&["snapshot", "-i"])?;
        t.name_ref = ref_of(&snap, "textbox \"Name\"")
            .with_context(|| format!("{}: no textbox \"Name\" in\n{snap}", t.name))?;
        t.button_ref = ref_of(&snap, "button \"Submit\"")
            .with_context(|| format!("{}: no button \"Submit\" in\n{snap}", t.name))?;
        for (_, ours, theirs) in WARM {
            let args = if t.name == "lumen" { ours } else { theirs };
            t.timed(args)?;
        }
    }
    let n = options.samples.max(1);
    let mut warm: Vec<Vec<Vec<Duration>>> = vec![vec![Vec::new(); tools.len()]; WARM.len()];
    for i in 0..n {
        for (c, (_, ours, theirs)) in WARM.iter().enumerate() {
            for k in 0..tools.len() {
                let which = (k + i) % tools.len();
                let t = &tools[which];
                let args = if t.name == "lumen" { ours } else { theirs };
                let (took, _) = t.timed(args)?;
                warm[c][which].push(took);
            }
        }
    }
    for (c, (what, _, _)) in WARM.iter().enumerate() {
        let mut per_tool = warm[c].iter().cloned().map(median);
        let ours = per_tool.next().unwrap_or_default();
        rows.push(((*what).to_owned(), ours, per_tool.next()));
    }
    let mut cold_medians = cold.into_iter().map(median);
    let ours = cold_medians.next().unwrap_or_default();
    rows.push(("cold open".to_owned(), ours, cold_medians.next()));
    Ok(rows)
}
