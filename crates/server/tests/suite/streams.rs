//! The WebSocket stream: subscriptions, backlog, live events, ping/pong.

use std::time::Duration;

use futures::{SinkExt as _, StreamExt as _};
use lumen_server::Server;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::{Client, Env, assert_every_step_once};

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn send(ws: &mut Ws, v: Value) {
    ws.send(Message::Text(v.to_string().into())).await.unwrap();
}

/// The next JSON text message (protocol pings are answered by the client
/// library and skipped here).
async fn next(ws: &mut Ws) -> Value {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(90), ws.next())
            .await
            .expect("the WebSocket went quiet")
            .expect("the WebSocket closed")
            .unwrap();
        if let Message::Text(t) = msg {
            return serde_json::from_str(&t).unwrap();
        }
    }
}

#[tokio::test]
async fn websocket_subscribers_get_backlog_then_live_events_and_pongs() {
    let env = Env::new().await;
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    env.click();
    env.done("done");
    let id = c
        .create(json!({"instruction": "Click", "startUrl": env.counter(), "maxSteps": 3}))
        .await;
    c.post(&format!("/v1/runs/{id}/pause"), json!({})).await;

    let (mut ws, _) = tokio_tungstenite::connect_async(super::ws_request(
        server.local_addr(),
        &[("authorization", format!("Bearer {}", super::TOKEN))],
    ))
    .await
    .unwrap();
    send(&mut ws, json!({"type": "ping", "nonce": 7})).await;
    assert_eq!(next(&mut ws).await, json!({"type": "pong", "nonce": 7}));
    send(
        &mut ws,
        json!({"type": "subscribe", "runId": "run_missing"}),
    )
    .await;
    let err = next(&mut ws).await;
    assert_eq!(
        (err["type"].as_str(), err["error"]["code"].as_str()),
        (Some("error"), Some("not_found"))
    );
    send(&mut ws, json!({"type": "hello"})).await;
    assert_eq!(next(&mut ws).await["error"]["code"], "invalid_json");

    send(&mut ws, json!({"type": "subscribe", "runId": id})).await;
    assert_eq!(
        next(&mut ws).await,
        json!({"type": "subscribed", "runId": id})
    );
    c.post(&format!("/v1/runs/{id}/resume"), json!({})).await;
    let mut events = Vec::new();
    loop {
        let m = next(&mut ws).await;
        match m["type"].as_str() {
            Some("event") => {
                assert_eq!(m["runId"], id.as_str());
                events.push(m["event"].clone());
            }
            Some("ended") => break,
            other => panic!("unexpected {other:?}: {m}"),
        }
    }
    assert_every_step_once(&events, 2);
    assert_eq!(events.last().unwrap()["type"], "done");

    // A later subscriber asks for what came after an id and gets only that.
    send(
        &mut ws,
        json!({"type": "subscribe", "runId": id, "after": 3}),
    )
    .await;
    assert_eq!(next(&mut ws).await["type"], "subscribed");
    let mut tail = Vec::new();
    loop {
        let m = next(&mut ws).await;
        if m["type"] == "ended" {
            break;
        }
        tail.push(m["event"].clone());
    }
    assert_eq!(tail, events[4..].to_vec());
    server.shutdown().await;
}

/// A `/v1/stream` client that stopped answering (not even pings) is
/// closed: an upgraded socket is past the listener's idle limit, and it
/// would hold its connection slot and its followers for good. One that
/// reads stays.
#[tokio::test]
async fn a_websocket_client_that_went_quiet_is_closed() {
    let env = Env::new().await;
    let mut options = env.options();
    let silence = Duration::from_millis(1500);
    options.test_hooks.stream_silence = Some(silence);
    let server = Server::start(options).await.unwrap();
    let connect = || {
        tokio_tungstenite::connect_async(super::ws_request(
            server.local_addr(),
            &[("authorization", format!("Bearer {}", super::TOKEN))],
        ))
    };
    let (mut quiet, _) = connect().await.unwrap();
    let (mut reading, _) = connect().await.unwrap();
    // `reading` is read (and so answers pings) for well past the silence;
    // `quiet` is left alone.
    let until = tokio::time::Instant::now() + silence * 3;
    while let Ok(msg) = tokio::time::timeout_at(until, reading.next()).await {
        match msg {
            Some(Ok(Message::Close(_))) | None => panic!("a client that reads was closed"),
            Some(Ok(_)) => {}
            Some(Err(e)) => panic!("{e}"),
        }
    }
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match quiet.next().await {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the quiet client is still connected");
    server.shutdown().await;
}
