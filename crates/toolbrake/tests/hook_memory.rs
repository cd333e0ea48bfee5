//! What a hook holds for a large payload of many small parts (an object of millions of
//! short keys, a long array of numbers): a small multiple of the payload, not the ten
//! times a JSON value of such parts takes, and the call is still judged (identical ones
//! refused, one that differs in its last byte not). Each hook's own peak resident set is
//! read as it is reaped (`wait4`).

mod support;
use support::hooks::bin;
use support::tmpdir;

use std::io::{Read, Write};
use std::path::Path;

/// A PreToolUse payload in `file` whose arguments are `body`'s output, the call id `id`.
fn payload(file: &Path, id: &str, body: impl FnOnce(&mut dyn Write)) -> u64 {
    let mut w = std::io::BufWriter::new(std::fs::File::create(file).unwrap());
    write!(w, "{{\"session_id\":\"m\",\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Bash\",\"tool_use_id\":\"{id}\",\"tool_input\":").unwrap();
    body(&mut w);
    w.write_all(b"}").unwrap();
    w.flush().unwrap();
    std::fs::metadata(file).unwrap().len()
}

/// `{"k0":"v",…}` of about `size` bytes, the last value `last`.
fn small_keys(size: usize, last: &'static str) -> impl FnOnce(&mut dyn Write) {
    move |w| {
        w.write_all(b"{").unwrap();
        let mut written = 1;
        let mut i = 0;
        while written < size {
            let member = format!("\"k{i}\":\"v\",");
            w.write_all(member.as_bytes()).unwrap();
            written += member.len();
            i += 1;
        }
        write!(w, "\"last\":\"{last}\"}}").unwrap();
    }
}

/// `{"items":[0,1,2,…]}` of about `size` bytes, the last item `last`.
fn array(size: usize, last: &'static str) -> impl FnOnce(&mut dyn Write) {
    move |w| {
        w.write_all(b"{\"items\":[").unwrap();
        let mut written = 10;
        let mut i = 0u64;
        while written < size {
            let item = format!("{i},");
            w.write_all(item.as_bytes()).unwrap();
            written += item.len();
            i += 1;
        }
        write!(w, "{last}]}}").unwrap();
    }
}

/// Runs the hook on `file`: its answer and its peak resident set in bytes.
#[cfg(target_os = "linux")]
#[allow(clippy::zombie_processes)] // reaped by wait4, which reads its resources
fn hook(dir: &Path, file: &Path) -> (String, u64) {
    let mut child = bin(dir)
        .args(["hook", "claude"])
        .stdin(std::fs::File::open(file).unwrap())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 reaps our own child and writes into the structs it is given. The
    // answer is a few hundred bytes: it waits in the pipe.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as libc::pid_t);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    (out, usage.ru_maxrss as u64 * 1024)
}

#[cfg(target_os = "linux")]
#[test]
fn many_small_parts_are_judged_in_memory_near_the_payloads_size() {
    let dir = tmpdir("hook-memory", "parts");
    let file = dir.join("payload.json");
    type Body = fn(usize, &'static str) -> Box<dyn FnOnce(&mut dyn Write)>;
    let shapes: [(&str, usize, Body); 2] = [
        ("44 MB of small keys", 44 << 20, |s, l| {
            Box::new(small_keys(s, l))
        }),
        ("a 15 MB array", 15 << 20, |s, l| Box::new(array(s, l))),
    ];
    let mut problems = Vec::new();
    for (n, (what, size, body)) in shapes.iter().enumerate() {
        let mut answers = Vec::new();
        for i in 1..=3 {
            let len = payload(&file, &format!("t{n}-{i}"), body(*size, "1"));
            let (answer, rss) = hook(&dir, &file);
            if rss > 3 * len {
                problems.push(format!(
                    "{what}: a hook held {} MB for a {} MB payload",
                    rss >> 20,
                    len >> 20
                ));
            }
            answers.push(answer.contains("\"deny\""));
        }
        // One byte different at the very end is another call.
        payload(&file, &format!("t{n}-4"), body(*size, "2"));
        answers.push(hook(&dir, &file).0.contains("\"deny\""));
        if answers != [false, false, true, false] {
            problems.push(format!("{what}: refused {answers:?}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
