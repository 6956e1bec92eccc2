use super::*;
use serde_json::json;

fn from(v: Value) -> std::result::Result<RunOptions, OptionError> {
    RunOptions::from_json_object(v.as_object().unwrap())
}

#[test]
fn the_schema_lists_exactly_the_keys_of_the_type() {
    let full = serde_json::to_value(every_option_set()).unwrap();
    let mut keys: Vec<&str> = full
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    let mut schema = RunOptions::keys();
    schema.sort_unstable();
    assert_eq!(
        keys, schema,
        "a field was added to RunOptions without a schema entry (or the reverse)"
    );
    // And the full value reads back as itself.
    let back = from(full).unwrap();
    assert_eq!(back, every_option_set());
}

#[test]
fn unknown_and_bad_keys_are_named() {
    assert_eq!(
        from(json!({"maxStep": 3})).unwrap_err(),
        OptionError::Unknown("maxStep".into())
    );
    match from(json!({"maxSteps": 3, "viewport": "big"})).unwrap_err() {
        OptionError::Invalid(k, why) => {
            assert_eq!(k, "viewport");
            assert!(why.contains("WIDTHxHEIGHT"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    match from(json!({"cache": 3})).unwrap_err() {
        OptionError::Invalid(k, why) => {
            assert_eq!(k, "cache");
            assert!(why.contains("true, false or a path"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    let ok = from(json!({"cache": "sub", "downloadDir": true, "uploadDir": false})).unwrap();
    assert_eq!(ok.cache, Some(PathSetting::Path("sub".into())));
    assert_eq!(ok.download_dir, Some(PathSetting::On));
    assert_eq!(ok.upload_dir, Some(PathSetting::Off));
}

#[test]
fn the_checkpoint_interval_defaults_to_five() {
    assert_eq!(crate::SessionOptions::default().checkpoint_interval, 5);
}

#[test]
fn check_names_the_option_out_of_range() {
    for (v, field) in [
        (json!({"confidenceGate": 1}), "confidenceGate"),
        (json!({"maxSteps": 0}), "maxSteps"),
        (json!({"maxCost": -1.0}), "maxCost"),
        (json!({"attempts": 2}), "attempts"),
        (json!({"verifyUrl": "("}), "verifyUrl"),
        (json!({"screenshotQuality": 0}), "screenshotQuality"),
        (
            json!({"cdpUrl": "ws://x", "browserbase": true}),
            "browserbase",
        ),
        (
            json!({"secretDomains": {"NOPE": ["a.test"]}}),
            "secretDomains",
        ),
    ] {
        let o = from(v.clone()).unwrap();
        match o.check() {
            Err(LumenError::Config { setting, .. }) => assert_eq!(setting, field, "{v}"),
            other => panic!("{v}: {other:?}"),
        }
    }
}

#[test]
fn apply_maps_every_option_onto_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let o = RunOptions {
        model: Some("openai/gpt-5".into()),
        planner_model: Some("openai/gpt-5-mini".into()),
        tools: Some(Tools::Computer),
        effort: Some(Effort::Low),
        thinking_budget: Some(2048),
        max_steps: Some(7),
        max_tokens: Some(900),
        max_cost: Some(1.5),
        max_failures: Some(2),
        verify_url: Some("/done$".into()),
        confidence_gate: Some(3),
        checkpoint_interval: Some(0),
        site_tips: Some(true),
        workflows: Some(PathSetting::Path(dir.path().join("wf.json"))),
        cache: Some(PathSetting::Path(dir.path().join("cache"))),
        viewport: Some("1000x600".parse().unwrap()),
        screenshot_format: Some(ImageFormat::Png),
        screenshot_quality: Some(55),
        screenshot_max_edge: Some(800),
        images_kept: Some(4),
        download_dir: Some(PathSetting::Path(dir.path().into())),
        upload_dir: Some(PathSetting::Path(dir.path().into())),
        secrets: Some(SecretValues(BTreeMap::from([(
            "PW".into(),
            "hunter2".into(),
        )]))),
        secret_domains: Some(BTreeMap::from([("PW".into(), vec!["shop.test".into()])])),
        ..RunOptions::default()
    };
    let a = o.agent_options("anthropic/claude-sonnet-4-6").unwrap();
    assert_eq!(a.model, "openai/gpt-5");
    assert_eq!(a.planner_model.as_deref(), Some("openai/gpt-5-mini"));
    assert_eq!(a.adapter.tools, Some(Tools::Computer));
    assert_eq!(a.adapter.effort, Some(Effort::Low));
    assert_eq!(a.adapter.thinking_budget, Some(2048));
    let s = &a.session;
    assert_eq!(
        (s.max_steps, s.max_tokens, s.max_cost_usd, s.max_failures),
        (7, Some(900), Some(1.5), Some(2))
    );
    assert!(s.verifier.is_some());
    assert_eq!(s.confidence_gate, Some(3));
    assert_eq!(s.checkpoint_interval, 0);
    assert!(s.site_kb.is_some() && s.workflows.is_some());
    assert_eq!(s.cache.as_ref().unwrap().dir(), dir.path().join("cache"));
    assert_eq!(s.screenshot.format, ImageFormat::Png);
    assert_eq!(s.screenshot.quality, 55);
    assert_eq!(s.screenshot.max_edge, Some(800));
    assert_eq!(s.history.keep_recent, 4);
    assert_eq!(s.secrets.domains("PW"), vec!["shop.test"]);
    assert!(!a.align_viewport, "an explicit viewport is kept");
    let BrowserSource::Local(l) = &a.browser else {
        panic!("{:?}", a.browser)
    };
    assert_eq!(l.tab.viewport, Some(Size::new(1000, 600)));
    assert_eq!(l.tab.download_dir.as_deref(), Some(dir.path()));
    assert!(
        a.adapter_options().browser_opt_ins.file_upload,
        "an upload folder offers uploads"
    );
    // Nothing set: the defaults stay.
    let plain = RunOptions::default().agent_options("openai/gpt-5").unwrap();
    assert_eq!(plain.session.max_steps, 30);
    assert!(plain.session.verifier.is_none() && plain.align_viewport);
}

#[test]
fn the_browser_source_follows_cdp_url_and_browserbase() {
    let cdp = RunOptions {
        cdp_url: Some("http://127.0.0.1:9222".into()),
        viewport: Some("800x600".parse().unwrap()),
        ..RunOptions::default()
    };
    let a = cdp.agent_options("openai/gpt-5").unwrap();
    match &a.browser {
        BrowserSource::Cdp { url, tab } => {
            assert_eq!(url, "http://127.0.0.1:9222");
            assert_eq!(tab.viewport, Some(Size::new(800, 600)));
        }
        other => panic!("{other:?}"),
    }
    let bb = RunOptions {
        browserbase: Some(true),
        ..RunOptions::default()
    };
    let mut a = AgentOptions::new("openai/gpt-5");
    let err = bb.apply_with_env(&mut a, &|_| None).unwrap_err();
    assert!(err.to_string().contains(BROWSERBASE_API_KEY_ENV), "{err}");
    bb.apply_with_env(&mut a, &|name| Some(format!("{name}-value")))
        .unwrap();
    match &a.browser {
        BrowserSource::Browserbase(b) => {
            assert_eq!(b.project_id, "BROWSERBASE_PROJECT_ID-value");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_unresolved_switch_and_a_custom_tab_are_refused_by_name() {
    let on = RunOptions {
        cache: Some(PathSetting::On),
        ..RunOptions::default()
    };
    match on.agent_options("openai/gpt-5").unwrap_err() {
        LumenError::Config { setting, .. } => assert_eq!(setting, "cache"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_file_under_the_flags_keeps_what_the_flags_leave_out() {
    let file = RunOptions {
        max_steps: Some(9),
        model: Some("openai/gpt-5".into()),
        ..RunOptions::default()
    };
    let flags = RunOptions {
        max_steps: Some(3),
        ..RunOptions::default()
    };
    let merged = file.overlaid_with(&flags);
    assert_eq!(merged.max_steps, Some(3));
    assert_eq!(merged.model.as_deref(), Some("openai/gpt-5"));
    assert_eq!(
        RunOptions {
            mode: Some(TaskMode::Exec),
            ..RunOptions::default()
        }
        .run_mode(),
        RunMode::Exec { attempts: 3 }
    );
}

#[test]
fn plain_subpaths_stay_below_their_root() {
    assert!(is_plain_subpath(Path::new("a/b")));
    for bad in ["/etc", "../x", "a/../../x", ""] {
        assert!(!is_plain_subpath(Path::new(bad)), "{bad}");
    }
}
