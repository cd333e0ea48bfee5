//! A real Prometheus (Debian's `prometheus`; `scripts/test` installs it) for the tests of
//! toolbrake's metrics: started on a free loopback port scraping one target every second,
//! asked through its HTTP API until a query returns a series, killed when dropped.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running Prometheus.
pub struct Prometheus {
    child: Child,
    api: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free loopback port (bound and released: good enough for a test's own servers).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET path` over HTTP/1.0 (no chunked body), with an optional bearer token: status line,
/// headers and body as one text.
pub fn http_get(addr: &str, path: &str, token: Option<&str>) -> std::io::Result<String> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n{auth}\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    Ok(text)
}

impl Prometheus {
    /// Starts Prometheus in `dir` scraping `target` (`host:port`, `GET /metrics`) every
    /// second as job `job`, with `Authorization: Bearer token` when given.
    pub fn start(dir: &Path, job: &str, target: &str, token: Option<&str>) -> Prometheus {
        let bin = Path::new("/usr/bin/prometheus");
        assert!(
            bin.exists(),
            "this test needs Prometheus: apt-get install prometheus (scripts/test installs it)"
        );
        std::fs::create_dir_all(dir).unwrap();
        let auth = token.map_or(String::new(), |t| {
            format!("    authorization:\n      credentials: {t}\n")
        });
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: {job}\n    metrics_path: /metrics\n{auth}    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new(bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("prometheus starts");
        Prometheus {
            child,
            api: format!("127.0.0.1:{port}"),
        }
    }

    /// The series `query` (PromQL) returns, asked until it returns at least one (within a
    /// minute: Prometheus starts, scrapes, and answers).
    pub fn series(&self, query: &str) -> Vec<Value> {
        let path = format!(
            "/api/v1/query?query={}",
            url::form_urlencoded::byte_serialize(query.as_bytes()).collect::<String>()
        );
        let start = Instant::now();
        let mut last = String::new();
        loop {
            if let Ok(answer) = http_get(&self.api, &path, None) {
                let body = answer.split("\r\n\r\n").nth(1).unwrap_or("");
                if let Ok(v) = serde_json::from_str::<Value>(body.trim()) {
                    if let Some(r) = v["data"]["result"].as_array().filter(|r| !r.is_empty()) {
                        return r.clone();
                    }
                }
                last = answer;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "Prometheus never returned a series for {query}; last answer:\n{last}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}
