//! The task catalogues.
//!
//! WebVoyager (live): loading the task file, the reference answers and the
//! `lumen25` subset, and choosing which tasks an eval runs. Selection
//! applies, in order: the subset (`--subset lumen25`), the site filter
//! (`--sites`), the id filter (`--tasks`), the seeded stratified sample
//! (`--sample N --seed S`) and finally `--limit`.
//!
//! The replica sites (offline): [`ReplicaCatalogue`], the tasks of
//! `fixtures/sites/eval/tasks.json` with their oracle scripts and checks.
//! (MiniWoB++'s tasks are listed with their oracles in `miniwob`.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context as _, bail};
use serde::Deserialize;
use serde_json::Value;

/// One WebVoyager task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Task {
    /// `"<Site>--<N>"`.
    pub(crate) id: String,
    /// The site's name as the dataset spells it (`"Allrecipes"`).
    pub(crate) site: String,
    /// The question.
    pub(crate) question: String,
    /// Where the agent starts.
    pub(crate) start_url: String,
}

impl Task {
    /// The `N` of `<Site>--<N>`, if the id has one.
    pub(crate) fn number(&self) -> Option<u32> {
        self.id.rsplit_once("--").and_then(|(_, n)| n.parse().ok())
    }
}

/// A reference answer from `reference_answer.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reference {
    /// `"golden"` (one right answer) or `"possible"` (an example).
    pub(crate) kind: String,
    /// The answer text.
    pub(crate) answer: String,
}

/// Parses a task file: one JSON object a line, blank lines ignored. Every
/// bad line is reported with its number.
pub(crate) fn parse_tasks(text: &str) -> anyhow::Result<Vec<Task>> {
    let mut tasks = Vec::new();
    let mut seen = BTreeSet::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let number = index + 1;
        let value: Value =
            serde_json::from_str(line).with_context(|| format!("line {number}: not JSON"))?;
        let field = |name: &str| {
            value
                .get(name)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .with_context(|| format!("line {number}: missing string field `{name}`"))
        };
        let task = Task {
            id: field("id")?,
            site: field("web_name")?,
            question: field("ques")?,
            start_url: field("web")?,
        };
        if !seen.insert(task.id.clone()) {
            bail!("line {number}: duplicate task id {:?}", task.id);
        }
        tasks.push(task);
    }
    Ok(tasks)
}

/// Parses `reference_answer.json` into answers by task id (`<Site>--<N>`).
pub(crate) fn parse_references(text: &str) -> anyhow::Result<BTreeMap<String, Vec<Reference>>> {
    let value: Value = serde_json::from_str(text).context("reference answers: not JSON")?;
    let sites = value
        .as_object()
        .context("reference answers: expected an object keyed by site")?;
    let mut out: BTreeMap<String, Vec<Reference>> = BTreeMap::new();
    for (site, entry) in sites {
        let answers = entry
            .get("answers")
            .and_then(Value::as_array)
            .with_context(|| format!("reference answers: {site} has no `answers` list"))?;
        for answer in answers {
            let id = answer
                .get("id")
                .and_then(Value::as_u64)
                .with_context(|| format!("reference answers: {site}: an answer has no id"))?;
            let reference = Reference {
                kind: answer
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("possible")
                    .to_owned(),
                answer: answer
                    .get("ans")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            };
            out.entry(format!("{site}--{id}"))
                .or_default()
                .push(reference);
        }
    }
    Ok(out)
}

/// The WebVoyager data as shipped in `fixtures/webvoyager`.
#[derive(Debug, Clone)]
pub(crate) struct Dataset {
    /// All 643 tasks, in file order.
    pub(crate) tasks: Vec<Task>,
    /// Reference answers by task id.
    pub(crate) references: BTreeMap<String, Vec<Reference>>,
    /// Ids of the `lumen25` subset, in its file order.
    pub(crate) lumen25: Vec<String>,
}

impl Dataset {
    /// Loads the three files from `dir`.
    pub(crate) fn load(dir: &Path) -> anyhow::Result<Dataset> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
        };
        let tasks =
            parse_tasks(&read("WebVoyager_data.jsonl")?).context("WebVoyager_data.jsonl")?;
        let references =
            parse_references(&read("reference_answer.json")?).context("reference_answer.json")?;
        let lumen25 = parse_tasks(&read("lumen_subset25.jsonl")?)
            .context("lumen_subset25.jsonl")?
            .into_iter()
            .map(|t| t.id)
            .collect();
        Ok(Dataset {
            tasks,
            references,
            lumen25,
        })
    }
}

/// Which tasks to run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Selection {
    /// `lumen25` or nothing.
    pub(crate) subset: Option<String>,
    /// Site names (case-insensitive); empty means all.
    pub(crate) sites: Vec<String>,
    /// Task ids; empty means all.
    pub(crate) ids: Vec<String>,
    /// Stratified sample size and seed.
    pub(crate) sample: Option<(usize, u64)>,
    /// At most this many tasks, after everything else.
    pub(crate) limit: Option<usize>,
}

/// Applies `selection` to the dataset. Unknown subsets, sites and ids are
/// errors, so a typo never silently selects nothing.
pub(crate) fn select(data: &Dataset, selection: &Selection) -> anyhow::Result<Vec<Task>> {
    let mut tasks: Vec<Task> = match selection.subset.as_deref() {
        None => data.tasks.clone(),
        Some("lumen25") => {
            let by_id: BTreeMap<&str, &Task> =
                data.tasks.iter().map(|t| (t.id.as_str(), t)).collect();
            data.lumen25
                .iter()
                .map(|id| {
                    by_id
                        .get(id.as_str())
                        .map(|t| (*t).clone())
                        .with_context(|| format!("lumen25 names unknown task {id:?}"))
                })
                .collect::<anyhow::Result<_>>()?
        }
        Some(other) => bail!("unknown subset {other:?} (known: lumen25)"),
    };
    if !selection.sites.is_empty() {
        let known: BTreeSet<String> = data.tasks.iter().map(|t| t.site.to_lowercase()).collect();
        for site in &selection.sites {
            if !known.contains(&site.to_lowercase()) {
                bail!("unknown site {site:?}");
            }
        }
        tasks.retain(|t| {
            selection
                .sites
                .iter()
                .any(|s| s.eq_ignore_ascii_case(&t.site))
        });
    }
    if !selection.ids.is_empty() {
        for id in &selection.ids {
            if !data.tasks.iter().any(|t| &t.id == id) {
                bail!("unknown task id {id:?}");
            }
        }
        tasks.retain(|t| selection.ids.contains(&t.id));
    }
    if let Some((n, seed)) = selection.sample {
        tasks = stratified_sample(&tasks, n, seed);
    }
    if let Some(limit) = selection.limit {
        tasks.truncate(limit);
    }
    Ok(tasks)
}

/// SplitMix64: a tiny, well-known PRNG; plenty for choosing tasks, and the
/// same sequence on every platform.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform integer in `0..bound` (`bound > 0`), without modulo bias.
    pub(crate) fn below(&mut self, bound: u64) -> u64 {
        let zone = u64::MAX - u64::MAX % bound;
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % bound;
            }
        }
    }

    /// Fisher–Yates shuffle.
    pub(crate) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

/// FNV-1a, to give each site its own PRNG stream from one seed.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A seeded stratified sample of `n` tasks: `n / S` per site (S = sites
/// present), and the remainder going one each to sites chosen by a seeded
/// shuffle of the site names. Within a site, tasks are drawn by a
/// Fisher–Yates shuffle seeded with `seed ^ fnv1a(site)`, so adding a site
/// does not change what is drawn from the others. A site with fewer tasks
/// than its share gives all it has. The result is ordered by site, then by
/// task number.
pub(crate) fn stratified_sample(tasks: &[Task], n: usize, seed: u64) -> Vec<Task> {
    let mut by_site: BTreeMap<&str, Vec<&Task>> = BTreeMap::new();
    for task in tasks {
        by_site.entry(task.site.as_str()).or_default().push(task);
    }
    if by_site.is_empty() || n == 0 {
        return Vec::new();
    }
    let sites: Vec<&str> = by_site.keys().copied().collect();
    let per_site = n / sites.len();
    let mut extra = sites.clone();
    SplitMix64::new(seed).shuffle(&mut extra);
    let extra: BTreeSet<&str> = extra.into_iter().take(n % sites.len()).collect();
    let mut out = Vec::new();
    for site in sites {
        let mut pool = by_site.get(site).cloned().unwrap_or_default();
        SplitMix64::new(seed ^ fnv1a(site)).shuffle(&mut pool);
        let take = per_site + usize::from(extra.contains(site));
        let mut chosen: Vec<Task> = pool.into_iter().take(take).cloned().collect();
        chosen.sort_by_key(|t| (t.number(), t.id.clone()));
        out.extend(chosen);
    }
    out
}

/// The replica sites' catalogue, `fixtures/sites/eval/tasks.json`: each
/// task with its oracle's script and its checker's expectations.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ReplicaCatalogue {
    pub(crate) tasks: Vec<ReplicaTask>,
}

/// One replica-site task.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ReplicaTask {
    pub(crate) id: String,
    pub(crate) site: String,
    /// Part of the `--quick` slice.
    pub(crate) quick: bool,
    /// Start page, relative to the site folder.
    pub(crate) start: String,
    pub(crate) question: String,
    pub(crate) turns: Vec<Turn>,
    pub(crate) expect: Expect,
}

/// One scripted model turn.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Turn {
    /// The page (and query) whose layout the turn's targets are read from.
    pub(crate) at: String,
    pub(crate) actions: Vec<OracleAction>,
}

/// What the oracle does, by selector.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub(crate) enum OracleAction {
    /// Click the element's centre, then type.
    TypeInto {
        r#type: String,
        text: String,
    },
    Click {
        click: String,
    },
    Key {
        key: String,
    },
    Done {
        done: String,
    },
    #[serde(rename_all = "camelCase")]
    AnswerFrom {
        answer_from: Vec<String>,
    },
}

/// The checker.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Expect {
    /// Strings the answer must contain (case-insensitive).
    #[serde(default)]
    pub(crate) answer: Vec<String>,
    /// A JS expression that must be `true` when the run ends.
    #[serde(default)]
    pub(crate) state: Option<String>,
}

impl ReplicaCatalogue {
    pub(crate) fn load(path: &Path) -> anyhow::Result<ReplicaCatalogue> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let catalogue: ReplicaCatalogue =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        for task in &catalogue.tasks {
            let last = task.turns.last().and_then(|t| t.actions.last());
            if !matches!(
                last,
                Some(OracleAction::Done { .. } | OracleAction::AnswerFrom { .. })
            ) {
                bail!("{}: the last action must be done or answerFrom", task.id);
            }
        }
        Ok(catalogue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(site: &str, n: u32) -> Task {
        Task {
            id: format!("{site}--{n}"),
            site: site.into(),
            question: format!("question {n}"),
            start_url: format!("https://{}.example/", site.to_lowercase()),
        }
    }

    fn shipped() -> Dataset {
        let dir = crate::util::project_root()
            .unwrap()
            .join("fixtures/webvoyager");
        Dataset::load(&dir).unwrap()
    }

    #[test]
    fn the_shipped_dataset_has_643_tasks_on_15_sites_and_a_25_task_subset() {
        let data = shipped();
        assert_eq!(data.tasks.len(), 643);
        let sites: BTreeSet<&str> = data.tasks.iter().map(|t| t.site.as_str()).collect();
        assert_eq!(sites.len(), 15);
        assert_eq!(data.lumen25.len(), 25);
        let lumen25 = select(
            &data,
            &Selection {
                subset: Some("lumen25".into()),
                ..Selection::default()
            },
        )
        .unwrap();
        assert_eq!(lumen25.len(), 25);
        assert!(data.references.contains_key("Allrecipes--0"));
        assert_eq!(data.tasks[0].number(), Some(0));
    }

    #[test]
    fn the_task_parser_reports_the_bad_line_and_duplicate_ids() {
        let good = r#"{"web_name":"A","id":"A--1","ques":"q","web":"https://a/"}"#;
        assert_eq!(parse_tasks(&format!("{good}\n\n")).unwrap().len(), 1);
        let err = parse_tasks(&format!("{good}\n{{oops")).unwrap_err();
        assert!(format!("{err:#}").contains("line 2"), "{err:#}");
        let err = parse_tasks(&format!("{good}\n{good}")).unwrap_err();
        assert!(format!("{err:#}").contains("duplicate"), "{err:#}");
        let err = parse_tasks(r#"{"web_name":"A","id":"A--1","web":"x"}"#).unwrap_err();
        assert!(format!("{err:#}").contains("ques"), "{err:#}");
    }

    #[test]
    fn reference_answers_are_keyed_by_full_task_id() {
        let refs = parse_references(
            r#"{"Site X": {"notice": "", "answers": [{"id": 3, "type": "golden", "ans": "42"}]}}"#,
        )
        .unwrap();
        assert_eq!(
            refs["Site X--3"],
            vec![Reference {
                kind: "golden".into(),
                answer: "42".into()
            }]
        );
        assert!(parse_references("[]").is_err());
    }

    #[test]
    fn selection_filters_by_site_id_and_limit_and_rejects_unknown_names() {
        let data = shipped();
        let pick = |s: Selection| select(&data, &s);
        let github = pick(Selection {
            sites: vec!["github".into()],
            ..Selection::default()
        })
        .unwrap();
        assert_eq!(github.len(), 41);
        assert!(github.iter().all(|t| t.site == "GitHub"));
        let two = pick(Selection {
            ids: vec!["ArXiv--3".into(), "Amazon--0".into()],
            ..Selection::default()
        })
        .unwrap();
        assert_eq!(two.len(), 2);
        let limited = pick(Selection {
            limit: Some(5),
            ..Selection::default()
        })
        .unwrap();
        assert_eq!(limited.len(), 5);
        for bad in [
            Selection {
                sites: vec!["Nowhere".into()],
                ..Selection::default()
            },
            Selection {
                ids: vec!["Amazon--999".into()],
                ..Selection::default()
            },
            Selection {
                subset: Some("lumen26".into()),
                ..Selection::default()
            },
        ] {
            assert!(pick(bad).is_err());
        }
    }

    #[test]
    fn the_sample_is_stratified_deterministic_and_seed_dependent() {
        let tasks: Vec<Task> = ["A", "B", "C"]
            .iter()
            .flat_map(|s| (0..10).map(move |n| task(s, n)))
            .collect();
        let sample = stratified_sample(&tasks, 7, 42);
        assert_eq!(sample.len(), 7);
        let count = |site: &str| sample.iter().filter(|t| t.site == site).count();
        let mut counts = [count("A"), count("B"), count("C")];
        counts.sort_unstable();
        assert_eq!(
            counts,
            [2, 2, 3],
            "two per site, one site gets the remainder"
        );
        assert_eq!(
            sample,
            stratified_sample(&tasks, 7, 42),
            "same seed, same tasks"
        );
        assert_ne!(
            sample,
            stratified_sample(&tasks, 7, 43),
            "another seed differs"
        );
        // Sorted by site, then number, and no duplicates.
        let ids: BTreeSet<&str> = sample.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids.len(), 7);
        assert!(sample.windows(2).all(|w| (w[0].site.as_str(), w[0].number())
            <= (w[1].site.as_str(), w[1].number())));
        // A site short of tasks gives what it has.
        let short = vec![task("A", 0), task("B", 0), task("B", 1), task("B", 2)];
        assert_eq!(stratified_sample(&short, 4, 1).len(), 3);
        assert!(stratified_sample(&tasks, 0, 1).is_empty());
    }

    #[test]
    fn a_sites_draw_does_not_depend_on_the_other_sites() {
        let a: Vec<Task> = (0..10).map(|n| task("A", n)).collect();
        let mut ab = a.clone();
        ab.extend((0..10).map(|n| task("B", n)));
        let alone = stratified_sample(&a, 2, 9);
        let together: Vec<Task> = stratified_sample(&ab, 4, 9)
            .into_iter()
            .filter(|t| t.site == "A")
            .collect();
        assert_eq!(alone, together);
    }

    #[test]
    fn splitmix_matches_the_reference_sequence() {
        // First outputs for seed 0 of the published SplitMix64.
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        let mut rng = SplitMix64::new(5);
        assert!((0..1000).all(|_| rng.below(7) < 7));
    }

    fn shipped_replicas() -> ReplicaCatalogue {
        let root = crate::util::project_root().unwrap();
        ReplicaCatalogue::load(&root.join("fixtures/sites/eval/tasks.json")).unwrap()
    }

    #[test]
    fn the_catalogue_covers_six_sites_with_several_tasks_and_a_quick_task_each() {
        let catalogue = shipped_replicas();
        let mut sites: Vec<&str> = catalogue.tasks.iter().map(|t| t.site.as_str()).collect();
        sites.dedup();
        assert_eq!(
            sites,
            [
                "recipes",
                "bookshop",
                "news",
                "dictionary",
                "flights",
                "repo"
            ]
        );
        for site in sites {
            let of_site: Vec<&ReplicaTask> =
                catalogue.tasks.iter().filter(|t| t.site == site).collect();
            assert!(of_site.len() >= 2, "{site}");
            assert_eq!(of_site.iter().filter(|t| t.quick).count(), 1, "{site}");
            for t in of_site {
                assert!(t.id.starts_with(&format!("{site}/")), "{}", t.id);
                assert!(t.expect.state.is_some(), "{}: checks the page", t.id);
                assert!(!t.expect.answer.is_empty(), "{}: checks the answer", t.id);
            }
        }
        assert!(catalogue.tasks.iter().any(|t| {
            t.turns
                .iter()
                .flat_map(|turn| &turn.actions)
                .any(|a| matches!(a, OracleAction::Key { .. }))
        }));
    }

    #[test]
    fn actions_parse_by_their_key() {
        let a: Vec<OracleAction> = serde_json::from_str(
            r##"[{"click": "#a"}, {"type": "#q", "text": "x"}, {"key": "Enter"}, {"done": "ok"}, {"answerFrom": ["#t"]}]"##,
        )
        .unwrap();
        assert_eq!(
            a,
            [
                OracleAction::Click { click: "#a".into() },
                OracleAction::TypeInto {
                    r#type: "#q".into(),
                    text: "x".into()
                },
                OracleAction::Key {
                    key: "Enter".into()
                },
                OracleAction::Done { done: "ok".into() },
                OracleAction::AnswerFrom {
                    answer_from: vec!["#t".into()]
                },
            ]
        );
    }
}
