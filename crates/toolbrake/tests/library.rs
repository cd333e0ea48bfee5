//! The Rust library's guards see what the body returned: a poll whose output advances runs
//! (as through the Node `wrapExecute` and `serve`), one that returns the same thing again
//! is stopped.

use serde::Serialize;
use serde_json::{json, Value};
use std::sync::Arc;
use toolbrake::{decorate, Brake, GuardError, Outcome, Tool};

fn code<T, E>(r: &Result<toolbrake::Guarded<T>, GuardError<E>>) -> Option<&'static str> {
    r.as_ref().err().and_then(|e| e.refusal()).map(|r| r.code)
}

#[test]
fn guard_lets_a_poll_whose_output_advances_run_and_stops_one_that_does_not() {
    let brake = Brake::default();
    let args = json!({"job": 7});
    let mut runs = 0;
    for pct in [10, 20, 30, 40, 50] {
        let r = brake.guard("s", "job_status", &args, || {
            runs += 1;
            Ok::<_, String>(format!("progress {pct}%"))
        });
        assert!(r.is_ok(), "{pct}%: {:?}", code(&r));
    }
    assert_eq!(runs, 5);
    // &str, Value and Serialize structs are digested too.
    let same = brake.guard("s", "job_status", &args, || Ok::<_, String>("progress 50%"));
    assert!(
        same.is_ok(),
        "the same result once more: the streak has two"
    );
    let stopped = brake.guard("s", "job_status", &args, || Ok::<_, String>("progress 50%"));
    assert_eq!(code(&stopped), Some("LOOP_BRAKE"));

    let values = Brake::default();
    for n in 0..5 {
        let r = values.guard("s", "rows", &args, || Ok::<_, String>(json!({"rows": n})));
        assert!(r.is_ok(), "rows {n}");
    }
    #[derive(Serialize)]
    struct Status {
        done: u32,
        of: u32,
    }
    let structs = Brake::default();
    for done in 0..5 {
        let r = structs.guard("s", "status", &args, || {
            Ok::<_, String>(Status { done, of: 5 })
        });
        assert!(r.is_ok(), "done {done}");
    }
    for _ in 0..2 {
        let r = structs.guard("s", "status", &args, || {
            Ok::<_, String>(Status { done: 5, of: 5 })
        });
        assert!(r.is_ok());
    }
    let r = structs.guard("s", "status", &args, || {
        Ok::<_, String>(Status { done: 5, of: 5 })
    });
    assert_eq!(code(&r), Some("LOOP_BRAKE"));
}

#[test]
fn guard_async_wrap_and_decorate_digest_the_result() {
    let brake = Arc::new(Brake::default());
    let args = json!({"job": 7});
    futures_executor::block_on(async {
        for pct in [10, 20, 30, 40, 50] {
            let r = brake
                .guard_async("a", "job_status", &args, || async move {
                    Ok::<_, String>(format!("progress {pct}%"))
                })
                .await;
            assert!(r.is_ok(), "async {pct}%");
        }
    });

    let counter = std::sync::atomic::AtomicU32::new(0);
    let poll = Brake::wrap(brake.clone(), "job_status", "w", move |_: &Value| {
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok::<_, String>(format!("progress {}%", 10 * (n + 1)))
    });
    for i in 0..5 {
        assert!(poll(&args).is_ok(), "wrap call {}", i + 1);
    }

    #[derive(Clone)]
    struct Poll(Arc<std::sync::atomic::AtomicU32>);
    impl Tool for Poll {
        type Output = String;
        type Error = String;
        fn name(&self) -> &str {
            "job_status"
        }
        fn execute(&self, _session: &str, _args: &Value) -> Result<String, String> {
            let n = self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(format!("progress {}%", 10 * (n + 1)))
        }
    }
    let braked = decorate(&Poll(Arc::default()), brake.clone());
    for i in 0..5 {
        assert!(
            braked.execute("d", &args).is_ok(),
            "decorated call {}",
            i + 1
        );
    }
}

/// `guard_with` records what the closure says: a value that is not `Serialize` and carries
/// a failure (an HTTP 503) counts as one.
#[test]
fn guard_with_records_the_outcome_it_is_given() {
    struct Response {
        status: u16,
        body: String,
    }
    let brake =
        // The failure track alone: the streak brake and the same-output track stop an
        // identical call that came back the same sooner.
        Brake::from_toml(
            "[streak]\nenabled = false\n[breaker]\non_limit = \"deny\"\nsame_output_limit = \"off\"\n",
        )
        .unwrap();
    let args = json!({"url": "https://api.example.com/down"});
    let mut stopped = None;
    for i in 0..8 {
        let r = brake.guard_with(
            "s",
            "fetch",
            &args,
            || {
                Ok::<_, String>(Response {
                    status: 503,
                    body: "Service Unavailable".into(),
                })
            },
            |r| Outcome {
                status_code: Some(r.status.into()),
                ..Outcome::success(r.body.clone())
            },
        );
        if let Err(GuardError::Refused(refusal)) = r {
            stopped = Some((i + 1, refusal.message));
            break;
        }
    }
    let (at, message) = stopped.expect("the failing fetch is stopped");
    assert_eq!(at, 6, "gate for the 6th call after 5 failures");
    assert!(message.contains("consecutive failures"), "{message}");
}
