//! Links the `toolbrake` command as a position-dependent executable: a hook is a fresh
//! process per tool call, and a PIE binary of this size spends about a fifth of a
//! millisecond of each start applying ~23,000 relocations (BENCHMARKS.md, "Hooks").
//!
//! A static build (`scripts/install`: `crt-static` with the static relocation model) is
//! already position-dependent, and rustc picks its linker flags itself: `-no-pie` beside a
//! `crt-static` link without that model would make a static-PIE binary that crashes.
fn main() {
    let crt_static = std::env::var("CARGO_CFG_TARGET_FEATURE")
        .is_ok_and(|features| features.split(',').any(|f| f == "crt-static"));
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") && !crt_static {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
