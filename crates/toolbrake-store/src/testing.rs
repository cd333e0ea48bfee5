//! Test support: a throwaway `redis-server` on a free loopback port, killed on drop.
//! Only with the `testing` feature.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A `redis-server` process listening on 127.0.0.1.
pub struct RedisServer {
    child: Child,
    /// Its port.
    pub port: u16,
}

impl RedisServer {
    /// Starts one on `port` (no persistence), with extra arguments, and waits until it
    /// accepts connections.
    pub fn start_on(port: u16, extra: &[&str]) -> RedisServer {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(extra)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (scripts/test installs Debian's redis-server)");
        let mut server = RedisServer { child, port };
        let start = Instant::now();
        // Ours, not another test's server on the same port: the one answering must be the
        // process just started (a redis-server that cannot bind the port exits).
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("redis-server on port {port} exited ({status}): is the port taken?");
            }
            match server_pid(port) {
                Answer::Pid(pid) if pid == server.child.id() => break,
                // A server that wants a password answers INFO with an error: ours if it is
                // still running (one that could not bind has exited by now).
                Answer::Refused => {
                    std::thread::sleep(Duration::from_millis(50));
                    if matches!(server.child.try_wait(), Ok(None)) {
                        break;
                    }
                }
                _ => {}
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "redis-server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    /// Starts one on a free port.
    pub fn start() -> RedisServer {
        RedisServer::start_on(free_port(), &[])
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Stops the server's process (`SIGSTOP`): the kernel still accepts connections on
    /// its port, and nothing answers them, as with a hung server.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Lets a frozen server run again (`SIGCONT`).
    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, which: &str) {
        let ok = Command::new("kill")
            .arg(which)
            .arg(self.child.id().to_string())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill {which} {}", self.child.id());
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Redis Cluster of `redis-server` primaries on loopback (no replicas), formed with
/// `redis-cli --cluster create`; every node is killed on drop.
pub struct RedisCluster {
    /// The primaries.
    pub nodes: Vec<RedisServer>,
    dir: std::path::PathBuf,
}

impl RedisCluster {
    /// Starts `n` (at least 3) primaries and waits until every one reports the cluster ok.
    pub fn start(n: usize) -> RedisCluster {
        let dir = std::env::temp_dir().join(format!(
            "lb-rcluster-{}-{}",
            std::process::id(),
            free_port()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let mut nodes = Vec::new();
        for i in 0..n {
            let d = dir.join(format!("n{i}"));
            std::fs::create_dir_all(&d).expect("a temporary directory");
            nodes.push(RedisServer::start_on(
                free_port(),
                &[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    d.join("nodes.conf").to_str().expect("a UTF-8 path"),
                    "--dir",
                    d.to_str().expect("a UTF-8 path"),
                    "--cluster-node-timeout",
                    "2000",
                ],
            ));
        }
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("redis-cli must be installed (it comes with Debian's redis-server)");
        assert!(
            out.status.success(),
            "redis-cli --cluster create: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let start = Instant::now();
        for n in &nodes {
            loop {
                let ok = redis::Client::open(n.url())
                    .and_then(|c| c.get_connection())
                    .and_then(|mut c| redis::cmd("CLUSTER").arg("INFO").query::<String>(&mut c))
                    .is_ok_and(|info| info.contains("cluster_state:ok"));
                if ok {
                    break;
                }
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "the cluster did not form"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        RedisCluster { nodes, dir }
    }

    /// `redis://127.0.0.1:<port>` of every node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        self.nodes.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Ports handed out in this process: a test that stops its server and starts it again on
/// the same port must not find another test's server there.
static HANDED_OUT: Mutex<Vec<u16>> = Mutex::new(Vec::new());

/// A loopback port nobody listens on right now, and never handed out before in this
/// process.
pub fn free_port() -> u16 {
    let mut given = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free loopback port");
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// What answers on a port.
enum Answer {
    /// Nothing (yet).
    Nobody,
    /// A redis-server that refused `INFO` (it wants a password).
    Refused,
    /// A redis-server with this process id.
    Pid(u32),
}

/// Who answers on `port` (`INFO server`).
fn server_pid(port: u16) -> Answer {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return Answer::Nobody;
    };
    if s.set_read_timeout(Some(Duration::from_secs(2))).is_err()
        || s.write_all(b"INFO server\r\n").is_err()
    {
        return Answer::Nobody;
    }
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    loop {
        if text.starts_with('-') {
            return Answer::Refused;
        }
        if let Some(at) = text.find("process_id:") {
            let rest = &text[at + "process_id:".len()..];
            if let Some(line) = rest.split_once('\n').map(|(l, _)| l) {
                return line.trim().parse().map_or(Answer::Nobody, Answer::Pid);
            }
        }
        match s.read(&mut buf) {
            Ok(n) if n > 0 => text.push_str(&String::from_utf8_lossy(&buf[..n])),
            _ => return Answer::Nobody,
        }
    }
}

/// A stand-in for a Redis server that trickles its replies: it answers the connection's
/// setup (`CLIENT SETINFO`, `HELLO`, `AUTH`, `SELECT`) at once, then answers any other
/// command with the header of a 100,000-byte string and one byte of it every half
/// second, for `for_at_most` (then it closes the connection). Each connection on a thread
/// of its own; the listener lives as long as this value.
pub struct TricklingServer {
    /// Its port on 127.0.0.1.
    pub port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl TricklingServer {
    /// Starts one.
    pub fn start(for_at_most: Duration) -> TricklingServer {
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let port = listener.local_addr().expect("bound").port();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopped.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(mut conn) = conn else { continue };
                let stopped = stopped.clone();
                std::thread::spawn(move || {
                    let started = Instant::now();
                    let mut buf = [0u8; 65536];
                    while let Ok(n) = conn.read(&mut buf) {
                        if n == 0 {
                            return;
                        }
                        let text = String::from_utf8_lossy(&buf[..n]).to_ascii_uppercase();
                        let setup = ["SETINFO", "HELLO", "AUTH", "SELECT"]
                            .iter()
                            .map(|c| text.matches(&format!("\r\n{c}\r\n")).count())
                            .sum::<usize>();
                        if setup > 0 {
                            if conn.write_all(&b"+OK\r\n".repeat(setup)).is_err() {
                                return;
                            }
                            continue;
                        }
                        if conn.write_all(b"$100000\r\n").is_err() {
                            return;
                        }
                        while started.elapsed() < for_at_most && !stopped.load(Ordering::Relaxed) {
                            std::thread::sleep(Duration::from_millis(500));
                            if conn.write_all(b"x").is_err() {
                                return;
                            }
                        }
                        return;
                    }
                });
            }
        });
        TricklingServer { port, stop }
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for TricklingServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        // Wakes the listener so that it sees the stop.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}
