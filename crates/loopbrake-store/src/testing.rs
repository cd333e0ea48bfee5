//! Test support: a throwaway `redis-server` on a free loopback port, killed on drop.
//! Only with the `testing` feature.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
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
        let server = RedisServer { child, port };
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
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

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}
