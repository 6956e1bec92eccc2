//! The run modes (plan, agent, exec with retries), the planner pass and
//! opening the start URL: the one place a task is run in a mode, for the
//! [`Agent`](crate::Agent), the CLI and the server alike.

use std::future::Future;
use std::sync::Arc;

use lumen_core::{LumenError, ModelAdapter, Result, RunResult, RunStatus, UsageBreakdown};
use lumen_perception::planner::{self, Plan};

use super::Session;

/// What a run should do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RunMode {
    /// Plan only: return the planner's plan as the result.
    Plan,
    /// The loop (with a plan first when a planner adapter is set).
    #[default]
    Agent,
    /// The loop with an explicit retry budget: up to `attempts` runs, each
    /// failed attempt's reason fed into the next as guidance.
    Exec {
        /// Attempts, at least 1 (0 counts as 1).
        attempts: u32,
    },
}

impl Session {
    /// Sets (or clears) the adapter of the planner pass: in agent and exec
    /// mode it writes a plan before the loop, shown in every step's prompt;
    /// in plan mode it writes the plan (the session's own adapter does when
    /// none is set).
    pub fn set_planner(&mut self, planner: Option<Arc<dyn ModelAdapter>>) {
        // The planner's tokens are priced at its own model's price.
        let mut config = self.perception.config().clone();
        if let (Some(p), Some(main)) = (&planner, &config.pricing)
            && let Ok(priced) = super::pricing(p.info(), None)
        {
            config.pricing = Some(main.clone().with_planner(&priced));
            self.perception = self.perception.clone().with_config(config);
        }
        self.planner = planner;
    }

    /// Runs `instruction` in `mode`: opens `start_url` when one is given,
    /// then plans ([`plan`](Self::plan)), runs the loop with the planner
    /// pass first if a planner is set ([`run`](Self::run)), or runs it with
    /// retries ([`exec`](Self::exec)).
    ///
    /// Errors are setup failures only: the start URL could not be opened,
    /// the planner failed, or the run was cancelled before the loop began.
    /// Whatever happens inside the loop is in the result.
    pub async fn run_mode(
        &mut self,
        instruction: &str,
        start_url: Option<&str>,
        mode: RunMode,
    ) -> Result<RunResult> {
        self.install_request_filter().await?;
        if let Some(url) = start_url {
            self.open(url).await?;
        }
        match mode {
            RunMode::Plan => self.plan(instruction).await,
            RunMode::Agent => {
                self.planner_pass(instruction).await?;
                Ok(self.run(instruction).await)
            }
            RunMode::Exec { attempts } => {
                self.planner_pass(instruction).await?;
                Ok(self.exec(instruction, attempts).await)
            }
        }
    }

    /// Plan mode: asks the planner (the planner adapter when set, otherwise
    /// the session's adapter) for a plan of `instruction` from the page the
    /// tab shows. The result is a success whose answer is the plan, with no
    /// steps and the planner's token usage. Cancelling the run's control
    /// abandons the call.
    pub async fn plan(&mut self, instruction: &str) -> Result<RunResult> {
        let planner = self.planner.clone().unwrap_or_else(|| self.adapter.clone());
        let pricing = super::pricing(planner.info(), None)?;
        let plan = self.ask_planner(planner, instruction).await?;
        Ok(RunResult {
            status: RunStatus::Success,
            result: Some(plan.text),
            steps: 0,
            history: Vec::new(),
            state: None,
            usage: plan.usage,
            usage_by_source: UsageBreakdown {
                planner: plan.usage,
                ..UsageBreakdown::default()
            },
            cost_usd: pricing.cost(&plan.usage),
            cost_note: pricing.note_for(pricing.cost(&plan.usage)),
            error: None,
        })
    }

    /// Exec mode's retries: runs the loop on `instruction`, and while an
    /// attempt ends without success (a failure or the step budget, not a
    /// cancellation or a fatal error) and attempts are left, starts a fresh
    /// attempt ([`add_task`](Self::add_task): new history and step budget,
    /// same browser and task state) told which attempt it is and why the
    /// previous one did not succeed. Returns the last attempt's result.
    pub async fn exec(&mut self, instruction: &str, attempts: u32) -> RunResult {
        let attempts = attempts.max(1);
        let mut result = self.run(instruction).await;
        for attempt in 2..=attempts {
            if matches!(result.status, RunStatus::Success | RunStatus::Cancelled)
                || result.error.is_some()
            {
                break;
            }
            let reason = result
                .result
                .clone()
                .unwrap_or_else(|| format!("{:?}", result.status));
            let retry = format!(
                "{instruction}\n\n(Attempt {attempt} of {attempts}: the previous attempt did not succeed: {reason}. Take a different approach.)"
            );
            result = self.add_task(&retry).await;
        }
        result
    }

    /// The planner pass of agent and exec mode: a plan when a planner is
    /// set, shown in every step's prompt; otherwise no plan (clearing one
    /// left by an earlier run). Its tokens count into the run's usage (as
    /// the planner's) and its budgets.
    async fn planner_pass(&mut self, instruction: &str) -> Result<()> {
        let plan = match self.planner.clone() {
            Some(planner) => {
                let plan = self.ask_planner(planner, instruction).await?;
                self.run.add_planner_usage(plan.usage);
                Some(plan.text)
            }
            None => None,
        };
        self.set_plan(plan);
        Ok(())
    }

    async fn ask_planner(&self, planner: Arc<dyn ModelAdapter>, instruction: &str) -> Result<Plan> {
        let screenshot = self.perception.config().screenshot.clone();
        let tab = self.tab.clone();
        self.unless_cancelled(async move {
            planner::plan(planner.as_ref(), tab.as_ref(), instruction, &screenshot).await
        })
        .await
    }

    /// Opens the start URL; a page that does not open is a configuration
    /// error naming the URL.
    async fn open(&self, url: &str) -> Result<()> {
        let outcome = self.unless_cancelled(self.tab.goto(url)).await?;
        if !outcome.ok {
            return Err(LumenError::config(
                "start url",
                format!(
                    "could not open {url}: {}",
                    outcome.error.unwrap_or_default()
                ),
            ));
        }
        Ok(())
    }

    /// `work`, abandoned with [`LumenError::Cancelled`] when the run's
    /// control is cancelled first (a cancelled run never waits on a page
    /// load or a planner call).
    async fn unless_cancelled<T>(&self, work: impl Future<Output = Result<T>>) -> Result<T> {
        let control = self.control();
        tokio::select! {
            biased;
            reason = control.cancelled() => Err(LumenError::Cancelled { reason }),
            r = work => r,
        }
    }
}
