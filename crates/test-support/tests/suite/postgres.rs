//! The throwaway PostgreSQL: each call gives a database of its own, on a
//! real server, reachable with the URL's password. One test, so nextest
//! (a process per test) starts one cluster for it.

use std::collections::BTreeSet;

use lumen_test_support::postgres::{DATABASE_URL_ENV, database, psql};

#[test]
fn each_call_gets_a_fresh_reachable_database() {
    // Threads asking at once share one server and get databases of their own.
    let urls: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4).map(|_| s.spawn(|| database().unwrap())).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let name = |url: &str| url.rsplit('/').next().unwrap().to_owned();
    let names: BTreeSet<String> = urls.iter().map(|u| name(u)).collect();
    assert_eq!(names.len(), urls.len(), "{urls:?}");
    let servers: BTreeSet<&str> = urls.iter().map(|u| u.rsplit_once('/').unwrap().0).collect();
    assert_eq!(servers.len(), 1, "one server per process: {servers:?}");

    let (first, second) = (&urls[0], &urls[1]);
    assert!(first.starts_with("postgres://"), "{first}");
    assert_eq!(
        psql(first, "select current_database()").unwrap(),
        name(first)
    );
    assert_eq!(
        psql(second, "select current_database()").unwrap(),
        name(second)
    );

    // Fresh and separate: a table made in one is not in the other.
    psql(first, "create table t (x int); insert into t values (1)").unwrap();
    assert_eq!(psql(first, "select count(*) from t").unwrap(), "1");
    let tables = "select count(*) from pg_tables where schemaname = 'public'";
    assert_eq!(psql(second, tables).unwrap(), "0");

    // The password is checked: a wrong one is refused.
    if std::env::var_os(DATABASE_URL_ENV).is_none() {
        let (head, tail) = first.split_once('@').unwrap();
        let user = head.rsplit_once(':').unwrap().0;
        let err = psql(&format!("{user}:wrong@{tail}"), "select 1").unwrap_err();
        assert!(err.to_string().contains("password"), "{err}");
    }
}
