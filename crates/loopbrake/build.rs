//! Links the `loopbrake` command as a position-dependent executable: a hook is a fresh
//! process per tool call, and a PIE binary of this size spends about a fifth of a
//! millisecond of each start applying ~23,000 relocations (BENCHMARKS.md, "Hooks").
fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
