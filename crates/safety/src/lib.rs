//! Lumen's safety layers: `PreActionHook` → `SessionPolicy` → execution →
//! `ActionVerifier`, completion `Verifier`s, and secrets.
//!
//! - [`ActionGuard`]: runs the user's [`PreActionHook`]s in order (the first
//!   deny wins), then the [`SessionPolicy`]; a block becomes an `ok: false`
//!   execution whose reason the model reads.
//! - [`SessionPolicy`]: allowed and blocked domains (`*.example.com`),
//!   allowed action types and URL schemes (only `http`/`https` unless more
//!   are allowed). It judges before an action and, from the
//!   [`EffectReceipt`](lumen_core::EffectReceipt), after it: a click,
//!   redirect or popup that reaches a forbidden page is a [`Violation`] with
//!   the [`Remedy`] the loop must carry out (go back, close the tab). It is
//!   immutable once built, so page content cannot change it. With
//!   `blockPrivateNetwork` it also refuses private, loopback and link-local
//!   addresses ([`address`]), judged on the resolved address by
//!   [`SessionPolicy::check_url_resolved`].
//! - [`PolicyRequestFilter`]: the policy at the network layer, a
//!   [`RequestFilter`](lumen_core::RequestFilter) a browser asks about
//!   every request before sending it (names judged on what they resolve
//!   to, resolutions cached briefly), and about the address it reached
//!   (the DNS-rebinding backstop).
//! - The operator policy ([`PolicyConfig::operator_default`],
//!   [`PolicyConfig::narrowed_by`]): what `lumen serve`, `mcp` and `ipc`
//!   allow at most; a client's policy may only narrow it.
//! - Completion [`Verifier`]s: [`UrlMatchesGate`], [`CustomGate`] and
//!   [`ModelVerifier`] (any [`ModelAdapter`], robust YES/NO parsing, hard
//!   pass after `max_attempts` rejections).
//! - [`ActionVerifier`]: post-action heuristics on the receipt (a click on
//!   nothing, typing into nothing, a goto that ended elsewhere).
//! - [`Secrets`]: `<secret:NAME>` placeholders for the model, substitution
//!   at type time, and redaction for everything that is stored or logged.
//!
//! May depend on: `lumen-core` and pure data crates (`regex`, `url`). Never
//! on `lumen-browser` or `lumen-models`: policy is decided on core types
//! alone, and models are reached only through [`ModelAdapter`].
//!
//! [`PreActionHook`]: lumen_core::PreActionHook
//! [`Verifier`]: lumen_core::Verifier
//! [`ModelAdapter`]: lumen_core::ModelAdapter
//!
//! # Example
//! ```
//! use lumen_core::Action;
//! use lumen_safety::{PolicyConfig, PolicyRule, SessionPolicy};
//!
//! let policy = SessionPolicy::new(&PolicyConfig {
//!     allowed_domains: vec!["*.example.com".into()],
//!     ..PolicyConfig::default()
//! })?;
//! let goto = Action::Goto { url: "file:///etc/passwd".into() };
//! let decision = policy.check_action(&goto, "https://www.example.com/");
//! assert_eq!(decision.denial().map(|d| d.rule), Some(PolicyRule::SchemeNotAllowed));
//! # Ok::<(), lumen_core::LumenError>(())
//! ```

#![deny(missing_docs)]

pub mod action_verifier;
pub mod address;
pub mod guard;
pub mod narrow;
pub mod pattern;
pub mod policy;
pub mod secrets;
pub mod verify;

pub use action_verifier::{ActionCheck, ActionVerifier};
pub use guard::{ActionGuard, BlockedBy, GuardDecision, ProviderSafetyChecks};
pub use narrow::{PolicyError, PolicyErrorKind};
pub use pattern::DomainPattern;
pub use policy::{
    Denial, PolicyConfig, PolicyDecision, PolicyRequestFilter, PolicyRule, Remedy, SessionPolicy,
    Violation, apply_blocked_requests, request_filter,
};
pub use secrets::{SecretError, Secrets};
pub use verify::{
    AllOf, CustomGate, ModelVerifier, UrlMatchesGate, Verdict, parse_verdict, verdict_of,
};
