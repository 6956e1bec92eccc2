//! `FixtureServer` over real sockets.

use std::fs;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lumen_test_support::{FixtureServer, RequestRecord, StatusCode, fixtures_root};
use tempfile::TempDir;

use super::http::{self, HttpResponse};

const SECRET: &str = "secret outside the root";

/// A site in a scratch folder: `<tmp>/site` is served, and
/// `<tmp>/outside/secret.txt` must never be reachable.
struct Site {
    dir: TempDir,
}

impl Site {
    fn new() -> Self {
        let dir = TempDir::new().unwrap();
        let site = Self { dir };
        for (relative, contents) in [
            ("site/index.html", "<h1>home</h1>".as_bytes()),
            ("site/style.css", b"body { color: red }"),
            ("site/app.js", b"console.log(1)"),
            ("site/data.json", b"{\"a\":1}"),
            ("site/pixel.png", b"\x89PNG\r\n\x1a\n"),
            ("site/photo.jpg", b"\xff\xd8\xff\xe0"),
            ("site/icon.svg", b"<svg/>"),
            ("site/table.csv", b"a,b\n1,2\n"),
            ("site/notes.txt", b"notes"),
            ("site/favicon.ico", b"\0\0\x01\0"),
            ("site/blob.bin", b"\x00\x01"),
            ("site/with space.txt", b"spaced"),
            ("site/sub/index.html", b"<h1>sub</h1>"),
            ("site/downloads/report.csv", b"x,y\n"),
            ("outside/secret.txt", SECRET.as_bytes()),
        ] {
            let path = site.dir.path().join(relative);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, contents).unwrap();
        }
        site
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("site")
    }

    async fn serve(&self) -> FixtureServer {
        FixtureServer::start_at(self.root()).await.unwrap()
    }
}

fn v4(server: &FixtureServer) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, server.port()))
}

async fn get(server: &FixtureServer, target: &str) -> HttpResponse {
    let host = format!("127.0.0.1:{}", server.port());
    http::get(v4(server), &host, target).await.unwrap()
}

/// Whether a fresh request to `addr` fails, at connect or before an answer.
async fn refused(addr: SocketAddr) -> bool {
    http::get(addr, "127.0.0.1", "/index.html").await.is_err()
}

#[tokio::test]
async fn urls_name_the_port_and_both_hosts() {
    let site = Site::new();
    let server = site.serve().await;
    let port = server.port();
    assert_ne!(port, 0);
    assert_eq!(
        server.url("/a/b.html"),
        format!("http://127.0.0.1:{port}/a/b.html")
    );
    assert_eq!(
        server.url("a/b.html"),
        format!("http://127.0.0.1:{port}/a/b.html")
    );
    assert_eq!(server.url(""), format!("http://127.0.0.1:{port}/"));
    assert_eq!(
        server.cross_origin_url("x.html"),
        format!("http://localhost:{port}/x.html")
    );
    assert_eq!(server.root(), fs::canonicalize(site.root()).unwrap());
    assert_eq!(server.addrs().first(), Some(&v4(&server)));
    assert!(server.addrs().iter().all(|addr| addr.port() == port));
}

#[tokio::test]
async fn content_types_follow_the_extension() {
    let site = Site::new();
    let server = site.serve().await;
    for (target, content_type) in [
        ("/index.html", "text/html; charset=utf-8"),
        ("/style.css", "text/css; charset=utf-8"),
        ("/app.js", "text/javascript; charset=utf-8"),
        ("/data.json", "application/json"),
        ("/pixel.png", "image/png"),
        ("/photo.jpg", "image/jpeg"),
        ("/icon.svg", "image/svg+xml"),
        ("/table.csv", "text/csv; charset=utf-8"),
        ("/notes.txt", "text/plain; charset=utf-8"),
        ("/favicon.ico", "image/x-icon"),
        ("/blob.bin", "application/octet-stream"),
    ] {
        let response = get(&server, target).await;
        assert_eq!(response.status, 200, "{target}");
        assert_eq!(
            response.header("content-type"),
            Some(content_type),
            "{target}"
        );
        assert_eq!(
            response.header("cache-control"),
            Some("no-store"),
            "{target}"
        );
        let on_disk = fs::read(site.root().join(&target[1..])).unwrap();
        assert_eq!(response.body, on_disk, "{target}");
        assert_eq!(response.header("content-disposition"), None, "{target}");
    }
}

#[tokio::test]
async fn percent_encoded_names_are_decoded() {
    let site = Site::new();
    let server = site.serve().await;
    let response = get(&server, "/with%20space.txt").await;
    assert_eq!(response.status, 200);
    assert_eq!(response.text(), "spaced");
}

#[tokio::test]
async fn missing_files_are_404() {
    let site = Site::new();
    let server = site.serve().await;
    for target in [
        "/nope.html",
        "/sub/nope.css",
        "/downloads/",
        "/index.html/x",
    ] {
        let response = get(&server, target).await;
        assert_eq!(response.status, 404, "{target}");
        assert_eq!(
            response.header("cache-control"),
            Some("no-store"),
            "{target}"
        );
    }
}

#[tokio::test]
async fn folders_serve_their_index() {
    let site = Site::new();
    let server = site.serve().await;

    let home = get(&server, "/").await;
    assert_eq!(home.status, 200);
    assert_eq!(home.text(), "<h1>home</h1>");
    assert_eq!(
        home.header("content-type"),
        Some("text/html; charset=utf-8")
    );

    let sub = get(&server, "/sub/").await;
    assert_eq!(sub.status, 200);
    assert_eq!(sub.text(), "<h1>sub</h1>");

    // Without the slash, relative links would resolve against the parent.
    let redirect = get(&server, "/sub?x=1").await;
    assert_eq!(redirect.status, 301);
    assert_eq!(redirect.header("location"), Some("/sub/?x=1"));
    assert_eq!(redirect.header("cache-control"), Some("no-store"));
}

#[tokio::test]
async fn traversal_outside_the_root_is_rejected() {
    let site = Site::new();
    let server = site.serve().await;
    for target in [
        "/../outside/secret.txt",
        "/sub/../../outside/secret.txt",
        "/%2e%2e/outside/secret.txt",
        "/%2E%2E/outside/secret.txt",
        "/.%2e/outside/secret.txt",
        "/sub/..%2f..%2foutside%2fsecret.txt",
        "/%2e%2e%2Foutside%2Fsecret.txt",
        "/..%5coutside%5csecret.txt",
        "/%2e%2e%5coutside%5csecret.txt",
    ] {
        let response = get(&server, target).await;
        assert_eq!(response.status, 400, "{target}");
        // Our refusal, not the HTTP parser's.
        assert!(response.text().contains("is not allowed"), "{target}");
        assert!(!response.text().contains(SECRET), "{target}");
    }

    // Double encoding decodes once, to a literal `%2e%2e` folder name.
    let response = get(&server, "/%252e%252e/outside/secret.txt").await;
    assert_eq!(response.status, 404);
}

#[cfg(unix)]
#[tokio::test]
async fn symlinks_out_of_the_root_are_refused() {
    let site = Site::new();
    std::os::unix::fs::symlink(site.dir.path().join("outside"), site.root().join("link")).unwrap();
    let server = site.serve().await;
    let response = get(&server, "/link/secret.txt").await;
    assert_eq!(response.status, 403);
    assert!(!response.text().contains(SECRET));
}

#[tokio::test]
async fn query_delay_delays_the_answer() {
    let site = Site::new();
    let server = site.serve().await;
    let started = Instant::now();
    let response = get(&server, "/index.html?lumen_delay_ms=300").await;
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(response.status, 200);
    assert_eq!(response.text(), "<h1>home</h1>");
}

#[tokio::test]
async fn programmatic_delay_applies_to_its_prefix() {
    let site = Site::new();
    let server = site.serve().await;
    server.set_delay("sub/", Duration::from_millis(300));

    let started = Instant::now();
    let response = get(&server, "/sub/index.html").await;
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(response.status, 200);

    // A query delay replaces the programmatic one for that request.
    let started = Instant::now();
    get(&server, "/sub/?lumen_delay_ms=400").await;
    assert!(started.elapsed() >= Duration::from_millis(400));
}

#[tokio::test]
async fn query_status_is_injected() {
    let site = Site::new();
    let server = site.serve().await;

    let response = get(&server, "/index.html?lumen_status=503").await;
    assert_eq!(response.status, 503);
    assert_eq!(response.text(), "injected status 503 Service Unavailable\n");
    assert_eq!(
        response.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(response.header("cache-control"), Some("no-store"));

    // Statuses apply to missing files too, and combine with delays.
    let started = Instant::now();
    let response = get(&server, "/missing?lumen_delay_ms=200&lumen_status=500").await;
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(response.status, 500);

    let response = get(&server, "/index.html?lumen_status=abc").await;
    assert_eq!(response.status, 400);
    assert!(response.text().contains("lumen_status"));
}

#[tokio::test]
async fn programmatic_failures_apply_to_the_longest_prefix() {
    let site = Site::new();
    let server = site.serve().await;
    server.fail("/sub/", StatusCode::INTERNAL_SERVER_ERROR);
    server.fail("/sub/deep/", StatusCode::IM_A_TEAPOT);

    assert_eq!(get(&server, "/sub/").await.status, 500);
    assert_eq!(get(&server, "/sub/deep/x").await.status, 418);
    assert_eq!(get(&server, "/index.html").await.status, 200);
    assert_eq!(get(&server, "/sub/?lumen_status=502").await.status, 502);

    server.fail("/sub/", StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        get(&server, "/sub/").await.status,
        503,
        "a later call replaces"
    );

    server.clear_faults();
    assert_eq!(get(&server, "/sub/").await.status, 200);
    assert_eq!(get(&server, "/sub/deep/x").await.status, 404);
}

#[tokio::test]
async fn downloads_are_attachments() {
    let site = Site::new();
    let server = site.serve().await;
    let response = get(&server, "/downloads/report.csv").await;
    assert_eq!(response.status, 200);
    assert_eq!(
        response.header("content-disposition"),
        Some("attachment; filename=\"report.csv\"")
    );
    assert_eq!(
        response.header("content-type"),
        Some("text/csv; charset=utf-8")
    );
    assert_eq!(response.text(), "x,y\n");
}

#[tokio::test]
async fn requests_are_logged_in_order() {
    let site = Site::new();
    let server = site.serve().await;
    get(&server, "/index.html").await;
    get(&server, "/missing.css?v=2&lumen_status=500").await;
    let host = format!("127.0.0.1:{}", server.port());
    let posted = http::request(v4(&server), "POST", &host, "/sub/")
        .await
        .unwrap();
    assert_eq!(posted.status, 200, "other methods are answered like GET");
    get(&server, "/../secret").await;

    let record = |method: &str, path: &str, query: Option<&str>| RequestRecord {
        method: method.to_owned(),
        path: path.to_owned(),
        query: query.map(str::to_owned),
    };
    assert_eq!(
        server.requests(),
        vec![
            record("GET", "/index.html", None),
            record("GET", "/missing.css", Some("v=2&lumen_status=500")),
            record("POST", "/sub/", None),
            record("GET", "/../secret", None),
        ]
    );

    server.clear_requests();
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn localhost_is_reachable() {
    let site = Site::new();
    let server = site.serve().await;
    let port = server.port();
    let host = format!("localhost:{port}");

    // What a browser does first: resolve `localhost`, take any address.
    let response = http::get(("localhost", port), &host, "/index.html")
        .await
        .unwrap();
    assert_eq!(response.status, 200);

    // And every resolved address we listen on answers, so a browser that
    // tries `::1` first is not refused.
    let served: Vec<IpAddr> = server.addrs().iter().map(SocketAddr::ip).collect();
    let mut answered = 0;
    for addr in tokio::net::lookup_host(("localhost", port)).await.unwrap() {
        if served.contains(&addr.ip()) {
            let response = http::get(addr, &host, "/index.html").await.unwrap();
            assert_eq!(response.status, 200, "{addr}");
            answered += 1;
        }
    }
    assert!(
        answered > 0,
        "no address of localhost is served: {served:?}"
    );
}

#[tokio::test]
async fn ipv6_loopback_is_served_when_the_machine_has_it() {
    let site = Site::new();
    let server = site.serve().await;
    let ipv6_available = std::net::TcpListener::bind("[::1]:0").is_ok();
    assert_eq!(server.addrs().len(), if ipv6_available { 2 } else { 1 });
    for &addr in server.addrs() {
        let response = http::get(addr, "localhost", "/index.html").await.unwrap();
        assert_eq!(response.status, 200, "{addr}");
    }
}

#[tokio::test]
async fn dropping_the_server_stops_it() {
    let site = Site::new();
    let server = site.serve().await;
    let addrs = server.addrs().to_vec();
    assert_eq!(get(&server, "/index.html").await.status, 200);
    drop(server);

    // The listeners close once their tasks see the signal, so poll briefly.
    for addr in addrs {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !refused(addr).await {
            assert!(Instant::now() < deadline, "{addr} still answers after drop");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test]
async fn shutdown_closes_the_port_before_returning() {
    let site = Site::new();
    let server = site.serve().await;
    let addrs = server.addrs().to_vec();
    assert_eq!(get(&server, "/index.html").await.status, 200);
    server.shutdown().await;
    for addr in addrs {
        let error = tokio::net::TcpStream::connect(addr).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::ConnectionRefused, "{addr}");
    }
}

#[tokio::test]
async fn shutdown_cuts_injected_delays_short() {
    let site = Site::new();
    let server = site.serve().await;
    let addr = v4(&server);
    let pending = tokio::spawn(async move {
        http::get(addr, "127.0.0.1", "/index.html?lumen_delay_ms=30000").await
    });
    // Wait until the request is in, so the delay is what shutdown interrupts.
    while server.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.shutdown().await;

    let response = tokio::time::timeout(Duration::from_secs(20), pending)
        .await
        .expect("the delayed request outlived the server by far")
        .unwrap()
        .unwrap();
    assert_eq!(response.status, 503);
}

#[tokio::test]
async fn a_missing_root_is_an_error() {
    let site = Site::new();
    let missing = site.dir.path().join("absent");
    let error = FixtureServer::start_at(&missing).await.unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::NotFound);
    assert!(error.to_string().contains("absent"), "{error}");

    let file = site.root().join("index.html");
    let error = FixtureServer::start_at(&file).await.unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::NotADirectory);
}

/// The real `fixtures/sites` tree: it must exist, and its `index.html` is
/// served byte for byte once the fixture pages are in place.
#[tokio::test]
async fn serves_the_workspace_fixtures() {
    let root = fixtures_root();
    assert!(root.is_dir(), "{} must exist", root.display());

    let server = FixtureServer::start().await.unwrap();
    assert_eq!(server.root(), fs::canonicalize(&root).unwrap());
    let response = get(&server, "/").await;
    let index = Path::new(&root).join("index.html");
    if index.is_file() {
        assert_eq!(response.status, 200);
        assert_eq!(
            response.header("content-type"),
            Some("text/html; charset=utf-8")
        );
        assert_eq!(response.body, fs::read(index).unwrap());
    } else {
        assert_eq!(response.status, 404);
    }
}
