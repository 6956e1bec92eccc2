//! Opens a URL in a launched Chromium and prints what the tab sees.
//!
//! ```sh
//! cargo run -p lumen-browser --example open -- https://example.org
//! cargo run -p lumen-browser --example open -- about:blank --hold
//! ```
//!
//! With `--hold` it prints the profile folder and waits to be killed: the
//! test suite kills it with SIGKILL and checks that its Chromium died too.

#![allow(clippy::print_stdout)]

use std::io::Write as _;

use lumen_browser::{CdpTab, LaunchOptions};
use lumen_core::BrowserTab;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args.next().unwrap_or_else(|| "about:blank".to_owned());
    let hold = args.any(|a| a == "--hold");
    let tab = CdpTab::launch(LaunchOptions::default()).await?;
    let outcome = tab.goto(&url).await?;
    println!("ok: {}  title: {:?}", outcome.ok, tab.title().await?);
    if let Some(dir) = tab.user_data_dir() {
        println!("profile: {}", dir.display());
    }
    std::io::stdout().flush()?;
    if hold {
        tokio::time::sleep(std::time::Duration::from_secs(600)).await;
    }
    tab.close().await?;
    Ok(())
}
