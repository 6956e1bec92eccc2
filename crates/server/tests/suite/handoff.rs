//! Handing a run to a person, through the API: the run waits with status
//! `waiting_for_human`, a ticket opens the live view, the test
//! acts as the person over the view's WebSocket (real Chromium, real
//! screencast frames, real input), and the run goes on with their note.

use std::time::Duration;

use base64::Engine as _;
use futures::{SinkExt as _, StreamExt as _};
use lumen_server::Server;
use lumen_test_support::mock_provider::Route;
use lumen_test_support::mock_provider::script::chat_turn;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

use super::{Client, Env};

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

fn request_human(env: &Env, reason: &str) {
    env.mock.push(
        Route::ChatCompletions,
        chat_turn(
            &[("h", "request_human", json!({"reason": reason}))],
            None,
            100,
        ),
    );
}

fn bodies(env: &Env) -> Vec<String> {
    env.mock
        .requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect()
}

/// The next JSON message of the live view (frames skipped unless asked for).
async fn next(socket: &mut Socket, frames: bool) -> Value {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(30), socket.next())
            .await
            .expect("the live view went quiet")
            .expect("the live view closed")
            .unwrap();
        let Message::Text(text) = msg else { continue };
        let v: Value = serde_json::from_str(&text).unwrap();
        if v["type"] != "frame" || frames {
            return v;
        }
    }
}

async fn send(socket: &mut Socket, msg: Value) {
    socket
        .send(Message::Text(msg.to_string().into()))
        .await
        .unwrap();
}

async fn connect(
    addr: std::net::SocketAddr,
    path: &str,
    origin: Option<&str>,
) -> Result<Socket, u16> {
    let mut req = format!("ws://{addr}{path}").into_client_request().unwrap();
    if let Some(o) = origin {
        req.headers_mut().insert("origin", o.parse().unwrap());
    }
    match tokio_tungstenite::connect_async(req).await {
        Ok((socket, _)) => Ok(socket),
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => Err(r.status().as_u16()),
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test]
async fn a_person_enters_the_code_through_the_live_view_and_the_run_completes() {
    let env = Env::new().await;
    let server = Server::start(env.options()).await.unwrap();
    let addr = server.local_addr();
    let c = Client::new(addr);
    request_human(&env, "Enter the one-time code sent to the user's phone");
    env.done("Signed in");
    let id = c
        .create(json!({
            "instruction": "Sign in; the code goes to the user's phone",
            "startUrl": env.site.url("handoff/otp.html"),
            "maxSteps": 4,
            // Completion only counts once the code was really accepted.
            "verifyUrl": "welcome\\.html$",
            "handoff": {"timeoutSecs": 120}
        }))
        .await;
    let run = c.wait_status(&id, "waiting_for_human").await;
    assert_eq!(run["handoff"]["trigger"], "model", "{run}");
    assert!(
        run["handoff"]["reason"]
            .as_str()
            .unwrap()
            .contains("one-time code")
    );
    assert!(
        bodies(&env)[0].contains("\"request_human\""),
        "the model is offered the tool"
    );
    assert_eq!(
        env.mock.violations(),
        Vec::<String>::new(),
        "a request with the tool is one the provider accepts"
    );

    // The live view is for the ticket holder only.
    let anonymous = Client {
        token: None,
        ..Client::new(addr)
    };
    assert_eq!(
        anonymous
            .post(&format!("/v1/runs/{id}/live"), json!({}))
            .await
            .0,
        401
    );
    assert_eq!(
        anonymous
            .get(&format!(
                "/v1/runs/{id}/live?ticket=00112233445566778899aabbccddeeff"
            ))
            .await
            .0,
        401
    );
    let (status, ticket) = c.post(&format!("/v1/runs/{id}/live"), json!({})).await;
    assert_eq!(status, 200, "{ticket}");
    let page = c
        .http
        .get(format!("{}{}", c.base, ticket["url"].as_str().unwrap()))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let csp = page.headers()["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(page.text().await.unwrap().contains("<canvas"));
    let socket_path = ticket["socket"].as_str().unwrap();
    assert_eq!(
        connect(addr, socket_path, Some("https://evil.example"))
            .await
            .err(),
        Some(403),
        "a foreign page cannot open the live view"
    );

    // The person: sees the page, clicks the field, types the code, presses
    // Enter, and hands back with a note.
    let mut socket = connect(addr, socket_path, None).await.unwrap();
    let hello = next(&mut socket, false).await;
    assert_eq!(hello["type"], "handoff", "{hello}");
    let frame = next(&mut socket, true).await;
    assert_eq!(frame["type"], "frame", "{frame}");
    let jpeg = base64::engine::general_purpose::STANDARD
        .decode(frame["data"].as_str().unwrap())
        .unwrap();
    assert_eq!(&jpeg[..2], &[0xFF, 0xD8], "a JPEG");
    assert_eq!(frame["width"], 1280, "{}", frame["width"]);
    // One person at a time: a second view of the same hand-over is
    // refused while this one is open, even with a fresh ticket.
    let (_, second) = c.post(&format!("/v1/runs/{id}/live"), json!({})).await;
    assert_eq!(
        connect(addr, second["socket"].as_str().unwrap(), None)
            .await
            .err(),
        Some(409),
        "a second view at once"
    );
    send(
        &mut socket,
        json!({"type": "mouseDown", "x": 220, "y": 120}),
    )
    .await;
    send(&mut socket, json!({"type": "mouseUp", "x": 220, "y": 120})).await;
    send(&mut socket, json!({"type": "text", "text": "482913"})).await;
    send(&mut socket, json!({"type": "nonsense"})).await;
    let error = next(&mut socket, false).await;
    assert_eq!(error["type"], "error", "a bad message is answered: {error}");
    send(&mut socket, json!({"type": "keyDown", "key": "Enter"})).await;
    send(&mut socket, json!({"type": "keyUp", "key": "Enter"})).await;
    send(&mut socket, json!({"type": "done", "note": "code entered"})).await;
    let finished = next(&mut socket, false).await;
    assert_eq!(finished["type"], "finished", "{finished}");

    let run = c
        .wait(&id, "ended", |r| {
            r["status"] != "waiting_for_human" && r["status"] != "running"
        })
        .await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["result"], "Signed in");
    assert!(
        run["lastUrl"].as_str().unwrap().ends_with("welcome.html"),
        "{run}"
    );
    let after = &bodies(&env)[1];
    assert!(after.contains("code entered"), "the note reaches the model");
    assert!(after.contains("A person took over the browser"));
    let events = c.sse(&id, None).await;
    let names: Vec<&str> = events.iter().map(|(_, n, _)| n.as_str()).collect();
    let waiting = names
        .iter()
        .position(|n| *n == "waiting_for_human")
        .expect("waiting_for_human event");
    let done = names
        .iter()
        .position(|n| *n == "human_done")
        .expect("human_done event");
    assert!(waiting < done, "{names:?}");
    assert_eq!(
        c.post(&format!("/v1/runs/{id}/handoff/done"), json!({}))
            .await
            .0,
        409,
        "nothing to finish any more"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_handoff_nobody_answers_ends_the_run_with_handoff_timeout() {
    let env = Env::new().await;
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    request_human(&env, "Solve the CAPTCHA");
    let id = c
        .create(json!({
            "instruction": "Sign in",
            "startUrl": env.site.url("handoff/otp.html"),
            "maxSteps": 3,
            "handoff": {"timeoutSecs": 1}
        }))
        .await;
    let run = c.wait(&id, "ended", |r| r["status"] == "failed").await;
    assert_eq!(run["outcome"], "handoffTimeout", "{run}");
    let result = run["result"].as_str().unwrap();
    assert!(result.contains("nobody took over within 1 s"), "{result}");
    assert!(result.contains("Solve the CAPTCHA"), "{result}");
    assert_eq!(env.requests(), 1, "no model call after the timeout");
    server.shutdown().await;
}

#[tokio::test]
async fn a_url_trigger_hands_over_before_the_model_and_done_takes_a_note() {
    let env = Env::new().await;
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    env.done("ok");
    let id = c
        .create(json!({
            "instruction": "Sign in",
            "startUrl": env.site.url("handoff/otp.html"),
            "maxSteps": 3,
            "handoff": {"urls": ["*/handoff/otp.html"], "timeoutSecs": 60}
        }))
        .await;
    let run = c.wait_status(&id, "waiting_for_human").await;
    assert_eq!(run["handoff"]["trigger"], "url", "{run}");
    assert_eq!(env.requests(), 0, "the person comes before the model");
    let path = format!("/v1/runs/{id}/handoff/done");
    let (status, body) = c.post(&path, json!({"note": 7})).await;
    assert_eq!(
        (status, body["error"]["field"].as_str()),
        (400, Some("note")),
        "{body}"
    );
    let (status, body) = c.post(&path, json!({"handoff": 9})).await;
    assert_eq!(status, 409, "another hand-over: {body}");
    let (status, body) = c.post(&path, json!({"note": "signed in for you"})).await;
    assert_eq!(status, 202, "{body}");
    let run = c.wait_status(&id, "completed").await;
    assert_eq!(run["result"], "ok");
    assert!(
        bodies(&env)[0].contains("signed in for you"),
        "the note reaches the model's first step"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_payment_is_handed_to_the_person_instead_of_clicked() {
    let env = Env::new().await;
    let server = Server::start(env.options()).await.unwrap();
    let c = Client::new(server.local_addr());
    // A click on "Pay" (180,180 of 1280x720, in the 0-1000 grid).
    env.mock.push(
        Route::ChatCompletions,
        chat_turn(
            &[(
                "p",
                "click",
                json!({"x": lumen::normalize(180.0, 1280), "y": lumen::normalize(180.0, 720)}),
            )],
            None,
            100,
        ),
    );
    env.done("left for the person");
    let id = c
        .create(json!({
            "instruction": "Buy it",
            "startUrl": env.site.url("handoff/pay.html"),
            "maxSteps": 3,
            "handoff": {"beforePayment": true, "timeoutSecs": 60}
        }))
        .await;
    let run = c.wait_status(&id, "waiting_for_human").await;
    assert_eq!(run["handoff"]["trigger"], "payment", "{run}");
    let (status, _) = c
        .post(
            &format!("/v1/runs/{id}/handoff/done"),
            json!({"note": "I left it unpaid"}),
        )
        .await;
    assert_eq!(status, 202);
    let run = c.wait_status(&id, "completed").await;
    assert!(
        run["lastUrl"].as_str().unwrap().ends_with("pay.html"),
        "the click was not made: {run}"
    );
    let after = &bodies(&env)[1];
    assert!(
        after.contains("Not executed: the page takes a payment"),
        "the model is told"
    );
    assert!(after.contains("I left it unpaid"));
    server.shutdown().await;
}

#[tokio::test]
async fn ipc_hands_back_with_handoff_done() {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
    let env = Env::new().await;
    request_human(&env, "Confirm the order");
    env.done("confirmed");
    let (mut client_in, server_in) = tokio::io::duplex(1 << 16);
    let (server_out, client_out) = tokio::io::duplex(1 << 16);
    let service = tokio::spawn(lumen_server::ipc(env.options(), server_in, server_out));
    let mut lines = BufReader::new(client_out).lines();
    let mut call = async |req: Value| -> Value {
        client_in
            .write_all(format!("{req}\n").as_bytes())
            .await
            .unwrap();
        let line = tokio::time::timeout(Duration::from_secs(90), lines.next_line())
            .await
            .expect("ipc went quiet")
            .unwrap()
            .unwrap();
        serde_json::from_str(&line).unwrap()
    };
    let created = call(json!({"id": 1, "method": "create", "params": {
        "instruction": "Order", "startUrl": env.counter(), "maxSteps": 3,
        "handoff": {"timeoutSecs": 60}
    }}))
    .await;
    let id = created["result"]["id"].as_str().unwrap().to_owned();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let run = call(json!({"id": 2, "method": "get", "params": {"runId": id}})).await;
        if run["result"]["status"] == "waiting_for_human" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never waited: {run}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let done = call(
        json!({"id": 3, "method": "handoff_done", "params": {"runId": id, "note": "ok to go"}}),
    )
    .await;
    assert_eq!(done["result"]["id"], id.as_str(), "{done}");
    loop {
        let run = call(json!({"id": 4, "method": "get", "params": {"runId": id}})).await;
        if run["result"]["status"] == "completed" {
            assert_eq!(run["result"]["result"], "confirmed");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never completed: {run}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(bodies(&env)[1].contains("ok to go"));
    drop(client_in);
    service.await.unwrap().unwrap();
}

/// A person whose connection died without closing (a phone that changed
/// networks) must be able to open the view again: the server closes a
/// view whose client answers nothing, not even its pings, and gives the
/// place back. A client that keeps reading stays connected.
#[tokio::test]
async fn a_view_whose_client_went_quiet_gives_its_place_back() {
    let env = Env::new().await;
    let mut options = env.options();
    let silence = Duration::from_millis(1500);
    options.test_hooks.live_silence = Some(silence);
    let server = Server::start(options).await.unwrap();
    let addr = server.local_addr();
    let c = Client::new(addr);
    env.done("ok");
    let id = c
        .create(json!({
            "instruction": "Sign in",
            "startUrl": env.site.url("handoff/otp.html"),
            "maxSteps": 3,
            "handoff": {"urls": ["*/handoff/otp.html"], "timeoutSecs": 120}
        }))
        .await;
    c.wait_status(&id, "waiting_for_human").await;
    let (_, ticket) = c.post(&format!("/v1/runs/{id}/live"), json!({})).await;
    let path = ticket["socket"].as_str().unwrap().to_owned();

    // The first client says hello, then is never read again: no pongs.
    let mut gone = connect(addr, &path, None).await.unwrap();
    assert_eq!(next(&mut gone, false).await["type"], "handoff");
    assert_eq!(connect(addr, &path, None).await.err(), Some(409));
    let since = std::time::Instant::now();
    let mut again = loop {
        match connect(addr, &path, None).await {
            Ok(socket) => break socket,
            Err(409) if since.elapsed() < silence * 8 => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(status) => panic!("the quiet view kept its place: {status}"),
        }
    };
    assert_eq!(next(&mut again, false).await["type"], "handoff");

    // This one reads (and so answers pings) for well past the silence.
    let until = tokio::time::Instant::now() + silence * 3;
    while let Ok(msg) = tokio::time::timeout_at(until, again.next()).await {
        match msg {
            Some(Ok(Message::Close(_))) | None => panic!("a client that reads was closed"),
            Some(Ok(_)) => {}
            Some(Err(e)) => panic!("{e}"),
        }
    }
    send(&mut again, json!({"type": "done"})).await;
    assert_eq!(next(&mut again, false).await["type"], "finished");
    c.wait_status(&id, "completed").await;
    drop(gone);
    server.shutdown().await;
}
