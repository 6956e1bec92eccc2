//! The policy options of `lumen replay` and `lumen serve`: recorded URLs
//! are judged by them, and a bad policy is a configuration error.

use super::harness::{Env, code, done, lumen, navigate, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_judges_recorded_urls_by_the_policy_options() {
    let env = Env::new().await;
    let page2 = env.site.url("links/page2.html");
    env.script(vec![navigate(0, &page2), done(1, "on page 2", "success")]);
    let out = env.run("links/page1.html", &["--no-gif"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));

    // The recording is on 127.0.0.1: refused once the private network is.
    let out = lumen(env.dir.path())
        .args(["replay", "--block-private-network"])
        .arg(env.trace())
        .output()
        .await
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 2, "stderr: {stderr}");
    assert!(stderr.contains("refused by the policy"), "{stderr}");
    assert!(stderr.contains("blockPrivateNetwork"), "{stderr}");

    // The explicit allow makes it work again.
    let out = lumen(env.dir.path())
        .args([
            "replay",
            "--block-private-network",
            "--allow-private-host",
            "127.0.0.1",
        ])
        .arg(env.trace())
        .output()
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 0, "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("replayed 2 steps"), "{stdout}");
}

#[tokio::test]
async fn a_bad_operator_policy_is_a_configuration_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("policy.toml");
    std::fs::write(&file, "allowedSchemes = [\"file\"]\nallowPrivate = true\n").unwrap();
    for extra in [
        vec!["--allow-scheme", "not a scheme"],
        vec!["--allow-private-host", "https://x.test/"],
        vec!["--policy", file.to_str().unwrap()],
    ] {
        let out = lumen(dir.path())
            .args(["serve", "--port", "0", "--data-dir"])
            .arg(dir.path().join("data"))
            .args(&extra)
            .output()
            .await
            .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(code(&out), 2, "{extra:?}: {stderr}");
        assert!(stderr.contains("polic"), "{extra:?}: {stderr}");
    }
}
