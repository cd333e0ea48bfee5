//! The floor of a replay: read a JSON-lines file and parse every line into a
//! `serde_json::Value`, nothing else. `scripts/bench/replay_vs_original.sh` times it beside
//! `toolbrake replay` on the same file. Usage: parse_only FILE
use std::io::BufRead;

fn main() -> std::io::Result<()> {
    let path = std::env::args().nth(1).expect("usage: parse_only FILE");
    let f = std::io::BufReader::with_capacity(1 << 16, std::fs::File::open(path)?);
    let (mut lines, mut objects) = (0u64, 0u64);
    for line in f.lines() {
        let line = line?;
        lines += 1;
        if let Ok(serde_json::Value::Object(_)) = serde_json::from_str::<serde_json::Value>(&line) {
            objects += 1;
        }
    }
    println!("{lines} lines, {objects} objects");
    Ok(())
}
