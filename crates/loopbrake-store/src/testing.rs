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

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}
