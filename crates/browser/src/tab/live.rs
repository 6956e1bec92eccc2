//! The live view of a hand-over: the driven page's screencast for a person
//! to watch (`Page.startScreencast`, each frame acknowledged after a
//! minimum interval, so the browser never sends faster than the person's
//! client takes), and their input sent straight into the page, with no
//! receipt and no settling.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use base64::Engine as _;
use chromiumoxide::cdp::browser_protocol::page::EventScreencastFrame;
use futures::StreamExt;
use lumen_core::{LiveFrame, LiveFrames, LiveInput, Point, Result};
use serde_json::json;

use super::CdpTab;
use crate::protocol::keys;
use crate::protocol::mouse::{self, Press};

/// At most this many frames a second reach a person's client.
const MAX_FPS: u64 = 10;
/// JPEG quality of live frames.
const QUALITY: u8 = 60;

impl CdpTab {
    /// Starts the screencast of the driven page; the stream ends the
    /// screencast when dropped (or when the page goes away).
    pub(super) async fn start_screencast(&self, max_width: u32) -> Result<Option<LiveFrames>> {
        let ctx = self.active();
        let conn = self.shared.conn.clone();
        let mut events = conn
            .guard(
                "event_listener",
                conn.call_timeout,
                ctx.page.event_listener::<EventScreencastFrame>(),
            )
            .await?;
        // A new view starts with nothing held, and only the newest
        // screencast may stop the page's screencast when it ends: the
        // generation moves on before this one starts, so an older view's
        // task that ends meanwhile leaves it running.
        let live = self.shared.live.clone();
        live.buttons.store(0, Ordering::Relaxed);
        live.modifiers.store(0, Ordering::Relaxed);
        let generation = live.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let side = max_width.clamp(160, 4096);
        conn.page_raw(
            &ctx.page,
            "Page.startScreencast",
            json!({"format": "jpeg", "quality": QUALITY, "maxWidth": side, "maxHeight": side}),
        )
        .await?;
        let (tx, rx) = tokio::sync::mpsc::channel::<LiveFrame>(1);
        let page = ctx.page.clone();
        let interval = Duration::from_millis(1000 / MAX_FPS);
        tokio::spawn(async move {
            let mut last: Option<Instant> = None;
            loop {
                let frame = tokio::select! {
                    () = tx.closed() => break,
                    e = events.next() => match e {
                        Some(e) => e,
                        None => break,
                    },
                };
                let jpeg = base64::engine::general_purpose::STANDARD
                    .decode(frame.data.as_ref() as &str)
                    .unwrap_or_default();
                let meta = &frame.metadata;
                let shown = LiveFrame {
                    jpeg,
                    css_width: meta.device_width.round().max(0.0) as u32,
                    css_height: meta.device_height.round().max(0.0) as u32,
                };
                if !shown.jpeg.is_empty() && tx.send(shown).await.is_err() {
                    break;
                }
                // The browser sends the next frame only after this ack:
                // holding it back is the throttle.
                if let Some(at) = last {
                    tokio::time::sleep(interval.saturating_sub(at.elapsed())).await;
                }
                last = Some(Instant::now());
                let ack = json!({ "sessionId": frame.session_id });
                if conn
                    .page_raw(&page, "Page.screencastFrameAck", ack)
                    .await
                    .is_err()
                {
                    break;
                }
            }
            if live.generation.load(Ordering::SeqCst) == generation {
                let _ = conn.page_raw(&page, "Page.stopScreencast", json!({})).await;
            }
        });
        let frames = futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|frame| (frame, rx))
        });
        Ok(Some(Box::pin(frames)))
    }

    /// Sends one input of a person into the driven page.
    pub(super) async fn send_live_input(&self, input: &LiveInput) -> Result<bool> {
        input
            .validate()
            .map_err(|e| lumen_core::LumenError::config("liveInput", e))?;
        let ctx = self.active();
        let live = &self.shared.live;
        let mods = live.modifiers.load(Ordering::Relaxed);
        let point = |x: f64, y: f64| Point::new(x.round() as i32, y.round() as i32);
        let (method, params) = match input {
            LiveInput::MouseMove { x, y } => {
                let buttons = live.buttons.load(Ordering::Relaxed);
                let press = Press::new(mouse::held_button(buttons), buttons, 0, mods);
                mouse::mouse_event("mouseMoved", point(*x, *y), press)
            }
            LiveInput::MouseDown { x, y, button } => {
                let bit = mouse::button_bit(*button);
                let buttons = live.buttons.fetch_or(bit, Ordering::Relaxed) | bit;
                let press = Press::new(Some(*button), buttons, 1, mods);
                mouse::mouse_event("mousePressed", point(*x, *y), press)
            }
            LiveInput::MouseUp { x, y, button } => {
                let bit = mouse::button_bit(*button);
                let buttons = live.buttons.fetch_and(!bit, Ordering::Relaxed) & !bit;
                let press = Press::new(Some(*button), buttons, 1, mods);
                mouse::mouse_event("mouseReleased", point(*x, *y), press)
            }
            LiveInput::Wheel { x, y, dx, dy } => mouse::wheel(point(*x, *y), *dx, *dy, mods),
            LiveInput::KeyDown { key } | LiveInput::KeyUp { key } => {
                let down = matches!(input, LiveInput::KeyDown { .. });
                let Ok(def) = keys::normalize_key(key) else {
                    // A key Chromium has no name for (a media key, a dead
                    // key) is dropped, as a page would never see it either.
                    return Ok(true);
                };
                let bit = def.modifier_bit;
                let mods = match down {
                    true => live.modifiers.fetch_or(bit, Ordering::Relaxed) | bit,
                    false => live.modifiers.fetch_and(!bit, Ordering::Relaxed) & !bit,
                };
                // Ctrl, Alt or Meta held: a shortcut, which types nothing.
                let typing = mods & 0b0111 == 0;
                (
                    "Input.dispatchKeyEvent",
                    keys::key_event_params(down, &def, mods, typing),
                )
            }
            LiveInput::Text { text } => ("Input.insertText", json!({ "text": text })),
        };
        self.conn().page_raw(&ctx.page, method, params).await?;
        Ok(true)
    }
}

/// What a person in a live view holds down (mouse buttons and
/// modifiers), and which screencast is the newest.
#[derive(Debug, Default)]
pub(super) struct LiveState {
    buttons: std::sync::atomic::AtomicI64,
    modifiers: std::sync::atomic::AtomicI64,
    generation: std::sync::atomic::AtomicU64,
}
