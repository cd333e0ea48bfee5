//! The call hash equals the seed's JavaScript formula's, byte for byte
//! (docs/decisions.md, "Call hash").
//! Runs `node` (required: the test fails without it) over a corpus of awkward inputs.

use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};
use toolbrake_core::canonical::call_hash;

/// The reference: keys sorted by JavaScript's default sort at every depth, JSON.stringify
/// for everything else, SHA-256 of `tool + "\n" + text`.
const NODE_SCRIPT: &str = r#"
const crypto = require('node:crypto');
const lines = require('node:fs').readFileSync(0, 'utf8').split('\n').filter(Boolean);
function canon(v) {
  if (Array.isArray(v)) return '[' + v.map(canon).join(',') + ']';
  if (v !== null && typeof v === 'object') {
    return '{' + Object.keys(v).sort().map(k => JSON.stringify(k) + ':' + canon(v[k])).join(',') + '}';
  }
  return JSON.stringify(v);
}
for (const line of lines) {
  const { tool, args } = JSON.parse(line);
  const value = JSON.parse(args);
  process.stdout.write(crypto.createHash('sha256').update(tool + '\n' + canon(value)).digest('hex') + '\n');
}
"#;

const HANDWRITTEN: &[&str] = &[
    r#"{"q":"weather"}"#,
    r#"{"b":2,"a":1}"#,
    r#"null"#,
    r#""a string""#,
    r#"[1,2,3]"#,
    r#"{}"#,
    r#"[]"#,
    r#"{"":{"":[]}}"#,
    r#"-0"#,
    r#"[-0.0, 0.0, 1.0, 1e21, 1e20, 1e-7, 1.5e-7, 0.1, 0.2, 0.30000000000000004]"#,
    r#"[12345678901234567890, 9007199254740993, -9007199254740993, 18446744073709551616]"#,
    r#"[1e308, 5e-324, 2.2250738585072014e-308, 123456789012345680000, 1.7976931348623157e308]"#,
    r#"[100, 1e2, 1E2, 0.000001, 0.0000001, 123e-20, 4.35, 0.1e1]"#,
    r#"{"\u00e9":1,"e\u0301":2,"\uff61":3,"\ud83d\ude00":4,"a":5,"A":6,"_":7,"~":8}"#,
    r#"{"ctl":"\u0000\u0001\u0007\b\t\n\u000b\f\r\u000e\u001f\u007f\u0080\u2028\u2029"}"#,
    r#"{"quote\"key":"back\\slash","slash":"a/b","emoji":"😀👍🏽","cjk":"循环"}"#,
    r#"{"10":1,"9":2,"b":3,"1":4,"01":5,"-1":6}"#,
    r#"{"__proto__":{"x":1},"constructor":2}"#,
    r#"{"nested":{"z":[{"y":{"x":[[[]]]}}],"a":{"c":3,"b":2}}}"#,
    r#"{"dup":1,"dup":2}"#,
    r#"true"#,
    r#"3.14159"#,
];

/// A small deterministic generator of awkward JSON texts.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.next() as usize % xs.len()]
    }

    fn string(&mut self) -> String {
        const PARTS: &[&str] = &[
            "a",
            "Z",
            "0",
            " ",
            "é",
            "😀",
            "\u{ff61}",
            "\u{e000}",
            "\u{10ffff}",
            "\"",
            "\\",
            "\n",
            "\u{1}",
            "\u{1f}",
            "\u{7f}",
            "\u{2028}",
            "/",
            "循",
            "\u{fffd}",
            "",
        ];
        let n = self.next() % 5;
        (0..n).map(|_| self.pick(PARTS)).collect()
    }

    fn number(&mut self) -> String {
        const NUMS: &[&str] = &[
            "0",
            "-0",
            "1",
            "-1",
            "0.5",
            "1e21",
            "1e-7",
            "123456789012345678901234567890",
            "9007199254740993",
            "0.1",
            "2.5e+30",
            "-4.2E-12",
            "1.0",
            "100",
            "7e22",
            "6.02214076e23",
        ];
        self.pick(NUMS).to_string()
    }

    fn value(&mut self, depth: u32) -> String {
        let choice = if depth > 4 {
            self.next() % 4
        } else {
            self.next() % 7
        };
        match choice {
            0 => "null".into(),
            1 => self.number(),
            2 => serde_json::to_string(&self.string()).unwrap(),
            3 => (if self.next().is_multiple_of(2) {
                "true"
            } else {
                "false"
            })
            .into(),
            4 | 5 => {
                let n = self.next() % 4;
                let members: Vec<String> = (0..n)
                    .map(|_| {
                        format!(
                            "{}:{}",
                            serde_json::to_string(&self.string()).unwrap(),
                            self.value(depth + 1)
                        )
                    })
                    .collect();
                format!("{{{}}}", members.join(","))
            }
            _ => {
                let n = self.next() % 4;
                let items: Vec<String> = (0..n).map(|_| self.value(depth + 1)).collect();
                format!("[{}]", items.join(","))
            }
        }
    }
}

#[test]
fn call_hash_matches_node_on_an_awkward_corpus() {
    let mut corpus: Vec<(String, String)> = HANDWRITTEN
        .iter()
        .map(|a| ("search".to_string(), a.to_string()))
        .collect();
    let deep = format!("{}1{}", "[".repeat(120), "]".repeat(120));
    corpus.push(("deep".into(), deep));
    corpus.push((
        "bash".into(),
        r#"{"command":"curl -s https://a.com/x","description":"1st"}"#.into(),
    ));
    corpus.push(("tool with spaces and ünïcode 😀".into(), "{}".into()));
    let mut g = Gen(0x5eed);
    for _ in 0..400 {
        let v = g.value(0);
        corpus.push(("t".into(), v));
    }

    let mut input = String::new();
    for (tool, args) in &corpus {
        input.push_str(
            &serde_json::to_string(&serde_json::json!({"tool": tool, "args": args})).unwrap(),
        );
        input.push('\n');
    }
    let mut child = Command::new("node")
        .arg("-e")
        .arg(NODE_SCRIPT)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("node must be installed for the call-hash compatibility test");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "node failed");
    let node_hashes: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    assert_eq!(node_hashes.len(), corpus.len());
    for ((tool, args), want) in corpus.iter().zip(node_hashes) {
        let value: Value = serde_json::from_str(args).unwrap();
        assert_eq!(
            call_hash(tool, &value).unwrap(),
            want,
            "tool {tool:?} args {args}"
        );
    }
}
