//! Decisions per second against a local Redis from 1, 8 and 32 concurrent clients, and the
//! Redis commands and round trips per decision; then one server against a three-primary
//! Redis Cluster side by side (1 and 8 clients, each on its own session).
//!
//! `cargo run --release -p toolbrake-store --features testing --example redis_bench`
//! starts its own `redis-server` on a free loopback port. Each client is a thread with its
//! own connection doing full engine decisions (`pre` + `post`) on its own session, then the
//! same on one shared session (maximum contention). `redis_bench CLIENTS own|shared`
//! runs that one case alone (to profile it).

use serde_json::json;
use std::time::Instant;
use toolbrake_core::{Call, Config, Engine, Outcome};
use toolbrake_store::testing::{RedisCluster, RedisServer};
use toolbrake_store::{update, MemoryStore, RedisOptions, RedisStore, Store};

/// The server's command counts: every command (those a script calls included), the
/// scripts run (`EVALSHA`, `EVAL`) and the blocking waits (`BLPOP`).
fn commands_processed(url: &str) -> [u64; 3] {
    let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
    let info: String = redis::cmd("INFO").arg("all").query(&mut c).unwrap();
    let calls = |cmd: &str| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{cmd}:calls=")))
            .and_then(|v| v.split(',').next()?.parse().ok())
            .unwrap_or(0)
    };
    let total = info
        .lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    [total, calls("evalsha") + calls("eval"), calls("blpop")]
}

/// One client's decisions on `session`, kept below the gates (a user message every 50).
fn decide(store: &dyn Store, engine: &Engine, session: &str, c: usize, per_client: usize) {
    for i in 0..per_client {
        let args =
            json!({"command": format!("curl -s https://api.example.com/v1/items?page={}", i % 7)});
        let id = format!("{c}-{i}");
        let _ = update(store, session, |st| {
            engine.pre(
                st,
                &Call {
                    session,
                    id: &id,
                    tool: "Bash",
                    args: &args,
                },
            )
        })
        .unwrap();
        if i % 50 == 49 {
            let _ = update(store, session, |st| engine.user_message(st)).unwrap();
        }
    }
}

fn run(server: &RedisServer, clients: usize, per_client: usize, shared: bool) -> (f64, [f64; 3]) {
    let engine = Engine::new(Config::default());
    let before = commands_processed(&server.url());
    let start = Instant::now();
    std::thread::scope(|scope| {
        for c in 0..clients {
            let engine = &engine;
            let url = server.url();
            scope.spawn(move || {
                let store = RedisStore::new(RedisOptions {
                    url,
                    ..RedisOptions::default()
                })
                .unwrap();
                let session = if shared {
                    "shared".to_string()
                } else {
                    format!("client-{c}")
                };
                decide(&store, engine, &session, c, per_client);
            });
        }
    });
    let secs = start.elapsed().as_secs_f64();
    let decisions = (clients * per_client) as f64;
    let after = commands_processed(&server.url());
    let per = |i: usize| (after[i] - before[i]) as f64 / decisions;
    (decisions / secs, [per(0), per(1), per(2)])
}

/// Decisions per second on `opts`' store: `clients` threads, each on its own session.
fn rate(opts: &RedisOptions, clients: usize, per_client: usize) -> f64 {
    let engine = Engine::new(Config::default());
    let start = Instant::now();
    std::thread::scope(|scope| {
        for c in 0..clients {
            let (engine, opts) = (&engine, opts.clone());
            scope.spawn(move || {
                let store = RedisStore::new(opts).unwrap();
                decide(&store, engine, &format!("client-{c}"), c, per_client);
            });
        }
    });
    (clients * per_client) as f64 / start.elapsed().as_secs_f64()
}

/// What a contended decision does between receiving a session's state and sending its
/// write, in process, on the states the runs above left (the shared session's, and an own
/// one's): decode the stored JSON, decide, encode the result (medians of 2,001).
fn critical_section(engine: &Engine, c: &mut redis::Connection) {
    let args = json!({"command": "curl -s https://api.example.com/v1/items?page=1"});
    for key in ["toolbrake:{shared}", "toolbrake:{client-0}"] {
        let stored: Vec<u8> = redis::cmd("GET").arg(key).query(c).unwrap();
        let mut times = [Vec::new(), Vec::new(), Vec::new()];
        for i in 0..2001 {
            let t0 = Instant::now();
            let mut st: toolbrake_core::SessionState = serde_json::from_slice(&stored).unwrap();
            let t1 = Instant::now();
            let id = format!("cs-{i}");
            let _ = engine.pre(
                &mut st,
                &Call {
                    session: "s",
                    id: &id,
                    tool: "Bash",
                    args: &args,
                },
            );
            let t2 = Instant::now();
            let out = serde_json::to_vec(&st).unwrap();
            let t3 = Instant::now();
            std::hint::black_box(out);
            times[0].push(t1 - t0);
            times[1].push(t2 - t1);
            times[2].push(t3 - t2);
        }
        let [d, e, w] = times.map(|mut t| {
            t.sort();
            t[t.len() / 2].as_secs_f64() * 1e6
        });
        println!(
            "{key} ({} bytes): decode {d:.1} µs, decide {e:.1} µs, encode {w:.1} µs (medians)",
            stored.len()
        );
    }
}

fn main() {
    let server = RedisServer::start();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [clients, session] = &args[..] {
        let clients: usize = clients.parse().expect("CLIENTS is a number");
        let (rate, [cmds, scripts, waits]) =
            run(&server, clients, 20_000 / clients, session == "shared");
        println!("{clients} clients, {session}: {rate:.0} decisions/s, {cmds:.2} commands, {scripts:.2} scripts, {waits:.2} waits a decision");
        return;
    }
    let _ = Outcome::default();
    // The engine's own time: the same decisions on the in-process store, one thread.
    let engine = Engine::new(Config::default());
    let memory = MemoryStore::new();
    let start = Instant::now();
    decide(&memory, &engine, "alone", 0, 20_000);
    println!(
        "the same decisions in process (memory store, 1 thread): {:.0}/s",
        20_000.0 / start.elapsed().as_secs_f64()
    );
    println!("per decision: commands = every command the server ran (those inside scripts");
    println!("included), scripts = EVALSHA/EVAL, waits = BLPOP (pipelined with a script)");
    println!("clients  session   decisions/s  commands  scripts  waits");
    for clients in [1, 8, 32] {
        for shared in [false, true] {
            let (rate, [cmds, scripts, waits]) = run(&server, clients, 2000, shared);
            println!(
                "{clients:>7}  {:<8} {rate:>12.0}  {cmds:>8.2}  {scripts:>7.2}  {waits:>5.2}",
                if shared { "shared" } else { "own" }
            );
        }
    }
    let mut c = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let mut len = |key: &str| -> usize {
        let state: Vec<u8> = redis::cmd("GET").arg(key).query(&mut c).unwrap();
        state.len()
    };
    // These decisions are `pre` alone (no `post`): every call stays open up to the
    // engine's bound, so an own session's state ends near its largest.
    println!(
        "stored state: own session {} bytes, the shared session {} bytes",
        len("toolbrake:{client-0}"),
        len("toolbrake:{shared}")
    );
    critical_section(&engine, &mut c);
    let cluster = RedisCluster::start(3);
    let one = RedisOptions {
        url: server.url(),
        ..RedisOptions::default()
    };
    let many = RedisOptions {
        url: cluster.urls()[0].clone(),
        cluster: Some(cluster.urls()),
        ..RedisOptions::default()
    };
    println!("\nclients  one server d/s  3-primary cluster d/s  ratio");
    for clients in [1, 8] {
        let a = rate(&one, clients, 2000);
        let b = rate(&many, clients, 2000);
        println!("{clients:>7}  {a:>14.0}  {b:>21.0}  {:>5.2}", b / a);
    }
}
