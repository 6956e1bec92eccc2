//! `lumen browser set …`: emulation of a device, viewport, user agent,
//! geolocation, offline mode, extra request headers and colour scheme.
//!
//! Each `set` writes the session's [`Emulation`] to its state file and asks
//! the session's keeper ([`super::keeper`]) to apply it: CDP overrides last
//! only as long as the CDP session that set them, so they are set by the
//! keeper's sessions, which stay attached to every page of the browser
//! (new tabs included) until `close`.

use std::collections::BTreeMap;

use clap::Subcommand;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::keeper;
use crate::exit::CliError;

/// `set`.
#[derive(Debug, Subcommand)]
pub(super) enum Set {
    /// The viewport in CSS pixels, with an optional device scale factor
    /// (desktop, no touch).
    Viewport {
        width: u32,
        height: u32,
        scale: Option<f64>,
    },
    /// A device from the built-in table: its viewport, scale, touch and
    /// user agent (`set device list` names them).
    Device { name: String },
    /// The user agent of every request and of `navigator.userAgent`.
    #[command(alias = "user-agent")]
    Useragent { user_agent: String },
    /// The position `navigator.geolocation` reports (and the permission to
    /// read it).
    #[command(alias = "geolocation")]
    Geo {
        #[arg(allow_negative_numbers = true)]
        latitude: f64,
        #[arg(allow_negative_numbers = true)]
        longitude: f64,
    },
    /// Cut the page off the network (`on`) or reconnect it (`off`).
    Offline { state: String },
    /// Extra headers sent with every request, as a JSON object (`'{}'`
    /// removes them).
    Headers {
        #[arg(value_name = "JSON")]
        headers: String,
    },
    /// The preferred colour scheme: `dark`, `light` or `none`.
    Media { scheme: String },
    /// Drop every emulation setting of the session.
    Reset,
}

/// A session's emulation, as its state file keeps it and the keeper
/// applies it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct Emulation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) viewport: Option<Viewport>,
    /// The device the viewport, touch and user agent came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) device: Option<String>,
    #[serde(default)]
    pub(super) touch: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) user_agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) geo: Option<[f64; 2]>,
    #[serde(default)]
    pub(super) offline: bool,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) headers: BTreeMap<String, String>,
    /// `dark` or `light`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) media: Option<String>,
}

/// An emulated viewport.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(super) struct Viewport {
    pub(super) width: u32,
    pub(super) height: u32,
    pub(super) scale: f64,
    pub(super) mobile: bool,
}

/// A device of the table: name, width, height, scale, mobile (and touch),
/// user agent.
type Device = (&'static str, u32, u32, f64, bool, &'static str);

const IOS: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 \
                   (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
const IPADOS: &str = "Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 \
                      (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";

/// The built-in devices (screen sizes in CSS pixels).
const DEVICES: &[Device] = &[
    ("iPhone SE", 375, 667, 2.0, true, IOS),
    ("iPhone 15", 393, 852, 3.0, true, IOS),
    ("iPhone 15 Pro Max", 430, 932, 3.0, true, IOS),
    (
        "Pixel 7",
        412,
        915,
        2.625,
        true,
        "Mozilla/5.0 (Linux; Android 14; Pixel 7) AppleWebKit/537.36 (KHTML, like Gecko) \
         Chrome/124.0.0.0 Mobile Safari/537.36",
    ),
    (
        "Galaxy S23",
        360,
        780,
        3.0,
        true,
        "Mozilla/5.0 (Linux; Android 14; SM-S911B) AppleWebKit/537.36 (KHTML, like Gecko) \
         Chrome/124.0.0.0 Mobile Safari/537.36",
    ),
    ("iPad", 820, 1180, 2.0, true, IPADOS),
    ("iPad Pro 11", 834, 1194, 2.0, true, IPADOS),
    (
        "Desktop 1080p",
        1920,
        1080,
        1.0,
        false,
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) \
         Chrome/124.0.0.0 Safari/537.36",
    ),
];

/// A device by name: case, spaces and dashes do not matter.
fn device(name: &str) -> Option<&'static Device> {
    let key = |s: &str| {
        s.chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase()
    };
    let wanted = key(name);
    DEVICES.iter().find(|d| key(d.0) == wanted)
}

fn device_names() -> String {
    DEVICES.iter().map(|d| d.0).collect::<Vec<_>>().join(", ")
}

/// Checks a header name (an HTTP token) and value (no line breaks).
fn header_ok(name: &str, value: &str) -> Result<(), CliError> {
    let token = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !token {
        return Err(CliError::config(format!(
            "{name:?} is not a valid header name (letters, digits and !#$%&'*+-.^_`|~ only)"
        )));
    }
    if value.chars().any(|c| c == '\r' || c == '\n' || c == '\0') {
        return Err(CliError::config(format!(
            "the value of header {name:?} holds a line break or NUL"
        )));
    }
    Ok(())
}

/// Applies one `set` to the session's emulation; returns the JSON and
/// text to print.
pub(super) async fn run(session: &str, cmd: &Set) -> Result<(Value, String), CliError> {
    if let Set::Device { name } = cmd
        && name == "list"
    {
        let list: Vec<Value> = DEVICES
            .iter()
            .map(|d| json!({"name": d.0, "width": d.1, "height": d.2, "scale": d.3, "mobile": d.4}))
            .collect();
        let text = DEVICES
            .iter()
            .map(|d| format!("{} ({}x{} @{}x)", d.0, d.1, d.2, d.3))
            .collect::<Vec<_>>()
            .join("\n");
        return Ok((json!({"devices": list}), text));
    }
    let _lock = super::lock(session).await?;
    let mut state = super::opened(session)?;
    let before = state.clone();
    let e = &mut state.emulation;
    let said = match cmd {
        Set::Viewport {
            width,
            height,
            scale,
        } => {
            let scale = scale.unwrap_or(1.0);
            if !(1..=10_000).contains(width) || !(1..=10_000).contains(height) {
                return Err(CliError::config(
                    "the viewport's width and height must be 1 to 10000 CSS pixels",
                ));
            }
            if !(scale.is_finite() && (0.1..=10.0).contains(&scale)) {
                return Err(CliError::config(
                    "the scale (device pixel ratio) must be between 0.1 and 10",
                ));
            }
            e.viewport = Some(Viewport {
                width: *width,
                height: *height,
                scale,
                mobile: false,
            });
            e.device = None;
            e.touch = false;
            format!("viewport {width}x{height} at scale {scale}")
        }
        Set::Device { name } => {
            let Some(&(n, width, height, scale, mobile, ua)) = device(name) else {
                return Err(CliError::config(format!(
                    "unknown device {name:?}; known devices: {}",
                    device_names()
                )));
            };
            e.viewport = Some(Viewport {
                width,
                height,
                scale,
                mobile,
            });
            e.device = Some(n.to_owned());
            e.touch = mobile;
            e.user_agent = Some(ua.to_owned());
            format!("device {n} ({width}x{height} at scale {scale})")
        }
        Set::Useragent { user_agent } => {
            if user_agent.is_empty() || user_agent.chars().any(char::is_control) {
                return Err(CliError::config(
                    "the user agent must be non-empty text without control characters",
                ));
            }
            e.user_agent = Some(user_agent.clone());
            format!("user agent {user_agent:?}")
        }
        Set::Geo {
            latitude,
            longitude,
        } => {
            let valid = latitude.is_finite()
                && (-90.0..=90.0).contains(latitude)
                && longitude.is_finite()
                && (-180.0..=180.0).contains(longitude);
            if !valid {
                return Err(CliError::config(
                    "latitude must be -90 to 90 and longitude -180 to 180 (decimal degrees)",
                ));
            }
            e.geo = Some([*latitude, *longitude]);
            format!("geolocation {latitude}, {longitude}")
        }
        Set::Offline { state } => {
            e.offline = match state.as_str() {
                "on" | "true" => true,
                "off" | "false" => false,
                other => {
                    return Err(CliError::config(format!(
                        "expected `on` or `off`, not {other:?}"
                    )));
                }
            };
            format!("offline {}", if e.offline { "on" } else { "off" })
        }
        Set::Headers { headers: json } => {
            let parsed: Value = serde_json::from_str(json).map_err(|err| {
                CliError::config(format!(
                    "headers must be a JSON object like '{{\"X-Name\": \"value\"}}': {err}"
                ))
            })?;
            let Some(object) = parsed.as_object() else {
                return Err(CliError::config(
                    "headers must be a JSON object like '{\"X-Name\": \"value\"}'",
                ));
            };
            let mut headers = BTreeMap::new();
            for (name, value) in object {
                let Some(value) = value.as_str() else {
                    return Err(CliError::config(format!(
                        "the value of header {name:?} must be a string"
                    )));
                };
                header_ok(name, value)?;
                headers.insert(name.clone(), value.to_owned());
            }
            e.headers = headers;
            format!("{} extra header(s)", e.headers.len())
        }
        Set::Media { scheme } => {
            e.media = match scheme.as_str() {
                "dark" | "light" => Some(scheme.clone()),
                "none" | "no-preference" => None,
                other => {
                    return Err(CliError::config(format!(
                        "unknown colour scheme {other:?}; use dark, light or none"
                    )));
                }
            };
            format!("colour scheme {scheme}")
        }
        Set::Reset => {
            *e = Emulation::default();
            "emulation reset".to_owned()
        }
    };
    keeper::apply(session, &mut state, &before).await?;
    Ok((
        json!({"ok": true, "emulation": state.emulation}),
        format!("ok: {said}"),
    ))
}

/// The CDP commands that make one page match `e` (each setting set or
/// cleared, so applying twice is harmless).
pub(super) fn page_commands(e: &Emulation) -> Vec<(&'static str, Value)> {
    let mut out = vec![match e.viewport {
        Some(v) => (
            "Emulation.setDeviceMetricsOverride",
            json!({
                "width": v.width, "height": v.height, "deviceScaleFactor": v.scale,
                "mobile": v.mobile, "screenWidth": v.width, "screenHeight": v.height,
            }),
        ),
        None => ("Emulation.clearDeviceMetricsOverride", json!({})),
    }];
    out.push((
        "Emulation.setTouchEmulationEnabled",
        if e.touch {
            json!({"enabled": true, "maxTouchPoints": 5})
        } else {
            json!({"enabled": false})
        },
    ));
    // An empty user agent means "no override".
    out.push((
        "Emulation.setUserAgentOverride",
        json!({"userAgent": e.user_agent.clone().unwrap_or_default()}),
    ));
    out.push(match e.geo {
        Some([latitude, longitude]) => (
            "Emulation.setGeolocationOverride",
            json!({"latitude": latitude, "longitude": longitude, "accuracy": 1}),
        ),
        None => ("Emulation.clearGeolocationOverride", json!({})),
    });
    out.push((
        "Network.emulateNetworkConditions",
        json!({"offline": e.offline, "latency": 0, "downloadThroughput": -1,
               "uploadThroughput": -1}),
    ));
    out.push(("Network.setExtraHTTPHeaders", json!({"headers": e.headers})));
    out.push((
        "Emulation.setEmulatedMedia",
        json!({"features": match &e.media {
            Some(m) => json!([{"name": "prefers-color-scheme", "value": m}]),
            None => json!([]),
        }}),
    ));
    out
}

/// The browser-level commands for `e`: the permission to read the
/// emulated position.
pub(super) fn browser_commands(e: &Emulation) -> Vec<(&'static str, Value)> {
    match e.geo {
        Some(_) => vec![(
            "Browser.grantPermissions",
            json!({"permissions": ["geolocation"]}),
        )],
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every form parses (an argument named like a global flag once made
    /// clap panic at run time).
    #[test]
    fn every_set_and_network_form_parses() {
        use clap::Parser as _;
        for line in [
            "set viewport 800 600",
            "set viewport 800 600 2",
            "set device iPhone",
            "set useragent Bot/1",
            "set geo -33.9 -151.2",
            "set offline on",
            "set headers {}",
            "set media dark",
            "set reset",
            "network route /api --abort",
            "network route /api --body x --status 201 --content-type text/html",
            "network unroute",
            "network requests --filter api --clear",
        ] {
            let mut argv = vec!["lumen", "browser", "--json"];
            argv.extend(line.split(' '));
            let cli = crate::args::Cli::try_parse_from(&argv);
            assert!(cli.is_ok(), "{line}: {:?}", cli.err());
        }
    }

    #[test]
    fn devices_are_found_loosely() {
        assert_eq!(device("iphone-15").map(|d| d.0), Some("iPhone 15"));
        assert_eq!(device("Pixel 7").map(|d| d.1), Some(412));
        assert!(device("Nokia 3310").is_none());
    }

    #[test]
    fn header_names_and_values_are_checked() {
        assert!(header_ok("X-Test", "a b").is_ok());
        assert!(header_ok("Bad Name", "v").is_err());
        assert!(header_ok("X-Test", "a\r\nInjected: 1").is_err());
        assert!(header_ok("", "v").is_err());
    }

    #[test]
    fn clearing_commands_undo_every_setting() {
        let names: Vec<&str> = page_commands(&Emulation::default())
            .iter()
            .map(|c| c.0)
            .collect();
        assert!(names.contains(&"Emulation.clearDeviceMetricsOverride"));
        assert!(names.contains(&"Emulation.clearGeolocationOverride"));
        assert!(browser_commands(&Emulation::default()).is_empty());
    }
}
