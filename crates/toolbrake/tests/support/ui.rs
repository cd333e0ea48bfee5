//! `toolbrake ui` as the dashboard's HTTP tests run it: the real server on a configuration
//! and store of its own, two sessions in that store, and a reqwest client.

use super::tmpdir;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::time::Duration;
use toolbrake::settings::{self, StoreKind};
use toolbrake_core::{Call, Engine, Outcome};
use toolbrake_session::Sessions;

pub struct Server {
    pub child: Child,
    pub base: String,
    pub dir: PathBuf,
    pub cfg: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub const CONFIG: &str = "# The team's settings: keep this comment.\n[streak]\nmax_repeats = 4 # four is enough\n\n[breaker]\non_limit = \"deny\"\n";

pub fn start(name: &str, extra: &[&str]) -> Server {
    serve(tmpdir("ui", name), CONFIG, extra)
}

/// `toolbrake ui --listen 127.0.0.1:0 EXTRA…` on `config` with a SQLite store in `dir`
/// (written to `dir/toolbrake.toml`), without the environment's token or streak limit.
pub fn serve(dir: PathBuf, config: &str, extra: &[&str]) -> Server {
    let cfg = dir.join("toolbrake.toml");
    std::fs::write(
        &cfg,
        format!(
            "{config}\n[store]\nkind = \"sqlite\"\npath = \"{}\"\n",
            dir.join("state.db").display()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolbrake"))
        .arg("--config")
        .arg(&cfg)
        .args(["ui", "--listen", "127.0.0.1:0"])
        .args(extra)
        .env_remove("TOOLBRAKE_UI_TOKEN")
        .env_remove("TOOLBRAKE_MAX_REPEATS")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (base, _, _) = address(&mut child);
    Server {
        child,
        base,
        dir,
        cfg,
    }
}

/// What `toolbrake ui` says on its first line of stderr: its base URL (no trailing `/`),
/// that line, and the rest of its stderr.
pub fn address(child: &mut Child) -> (String, String, BufReader<ChildStderr>) {
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let base = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .trim_end_matches('/')
        .to_string();
    (base, line, err)
}

/// Two sessions in the store the dashboard reads, made by the session service the hooks use.
pub fn populate(cfg: &Path) {
    let s = settings::load(Some(cfg)).unwrap();
    let store = s
        .store
        .open(StoreKind::Sqlite, &settings::process_env)
        .unwrap();
    let engine = Engine::new(s.engine);
    let sessions = Sessions::new(&engine, store.as_ref());
    let args = json!({"command": "curl -s 'https://api.example.com/v1?token=sk-live-abcdef1234567890abcd'"});
    for i in 0..5 {
        let id = format!("c{i}");
        let call = Call {
            session: "looping",
            id: &id,
            tool: "Bash",
            args: &args,
        };
        let d = sessions.pre("looping", &call).unwrap();
        if d.runs() {
            sessions
                .post("looping", &id, &Outcome::success("{\"rows\": 3}"))
                .unwrap();
        }
    }
    let quiet = json!({"command": "ls"});
    let call = Call {
        session: "quiet/one #2",
        id: "q1",
        tool: "Bash",
        args: &quiet,
    };
    let _ = sessions.pre("quiet/one #2", &call).unwrap();
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

/// A client that shows redirects instead of following them.
pub fn no_redirect() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

pub async fn get_text(c: &reqwest::Client, url: impl reqwest::IntoUrl) -> String {
    c.get(url).send().await.unwrap().text().await.unwrap()
}

pub async fn get_json(c: &reqwest::Client, url: &str) -> (u16, Value) {
    let r = c.get(url).send().await.unwrap();
    let status = r.status().as_u16();
    (
        status,
        serde_json::from_str(&r.text().await.unwrap()).unwrap_or(Value::Null),
    )
}

pub async fn put_config(
    c: &reqwest::Client,
    s: &Server,
    body: &Value,
    origin: Option<&str>,
) -> (u16, Value) {
    let mut req = c
        .put(format!("{}/api/config", s.base))
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(o) = origin {
        req = req.header("origin", o);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    (
        status,
        serde_json::from_str(&r.text().await.unwrap()).unwrap_or(Value::Null),
    )
}
