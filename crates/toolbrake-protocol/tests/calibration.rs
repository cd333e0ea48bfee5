//! The split-conformal promise on simulated exchangeable runs: a setting calibrated on n
//! good runs harms a new good run with probability at most α (over many draws of the
//! calibration runs), and the same procedure with the rank one too low breaks it.

use proptest::prelude::*;
use toolbrake_core::budget::{BudgetConfig, MAX_LINE};
use toolbrake_protocol::calibrate::{line, line_at_rank, rank, rung_score, Share};
use toolbrake_protocol::tune::calibration::{calibrate, RunLabels};
use toolbrake_protocol::tune::Tuning;

/// A small deterministic generator (xorshift64*): each case's runs follow from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One simulated good run on a ladder of `rungs` settings (strictest first): harmful
/// stops at every rung below its fragility, and now and then one more at a looser rung
/// (real runs are not monotone: a looser gate can stop a later call). Every run is drawn
/// from the same distribution: exchangeable.
fn run(rng: &mut Rng, rungs: usize, skew: u32, noise: u64) -> Vec<u64> {
    let mut u = rng.below(rungs as u64 + 1);
    for _ in 0..skew {
        u = u.min(rng.below(rungs as u64 + 1));
    }
    let mut harmful: Vec<u64> = (0..rungs).map(|j| u64::from((j as u64) < u)).collect();
    if noise > 0 && rng.below(noise) == 0 && rungs > 0 {
        let j = rng.below(rungs as u64) as usize;
        harmful[j] += 1;
    }
    harmful
}

/// Over `draws` draws of n calibration runs and one new run: the share of draws in
/// which the new run is harmed at the rung the calibration chose.
fn harmed_share(
    seed: u64,
    n: usize,
    alpha: Share,
    rungs: usize,
    skew: u32,
    noise: u64,
    draws: u32,
) -> f64 {
    let mut rng = Rng(seed | 1);
    let mut harmed = 0u32;
    for _ in 0..draws {
        let scores: Vec<usize> = (0..n)
            .map(|_| rung_score(run(&mut rng, rungs, skew, noise).into_iter()))
            .collect();
        let chosen = line(&scores, alpha).unwrap().value;
        let new = run(&mut rng, rungs, skew, noise);
        // The loosest rung's index is `rungs`: past the ladder, no setting, no harm.
        harmed += u32::from(chosen < rungs && new[chosen] > 0);
    }
    f64::from(harmed) / f64::from(draws)
}

/// Four standard errors of a share near `p` over `draws` draws: the Monte Carlo slack.
fn slack(p: f64, draws: u32) -> f64 {
    4.0 * (p * (1.0 - p) / f64::from(draws)).sqrt()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Whatever the ladder, the skew of the runs and the noise, the promise holds.
    #[test]
    fn a_calibrated_setting_harms_at_most_alpha_of_good_runs(
        seed in any::<u64>(),
        alpha_den in prop::sample::select(vec![10u64, 20, 40]),
        extra in 0usize..40,
        rungs in 1usize..12,
        skew in 0u32..4,
        noise in prop::sample::select(vec![0u64, 3, 10]),
    ) {
        let alpha = Share::new(1, alpha_den).unwrap();
        let n = (alpha_den as usize - 1) + extra;
        let draws = 3000;
        let share = harmed_share(seed, n, alpha, rungs, skew, noise, draws);
        let a = 1.0 / alpha_den as f64;
        prop_assert!(share <= a + slack(a, draws), "harmed {share} > α {a} (n {n})");
    }

    /// With continuous scores and (n+1)α whole, the promise is tight: the rank computed
    /// one too low harms α + 1/(n+1) of new good runs, above α. (A run's score here is its
    /// fragility itself: harmed at every setting stricter than it.)
    #[test]
    fn the_rank_one_too_low_breaks_the_promise(
        seed in any::<u64>(),
        n in prop::sample::select(vec![19usize, 39, 59]),
    ) {
        let alpha = Share::new(1, 20).unwrap();
        let draws = 10_000u32;
        let mut rng = Rng(seed | 1);
        let low = |n: u64, a: Share| rank(n, a).map(|k| k - 1);
        let (mut harmed_low, mut harmed_right) = (0u32, 0u32);
        for _ in 0..draws {
            let scores: Vec<u64> = (0..n).map(|_| rng.next()).collect();
            let new = rng.next();
            harmed_low += u32::from(new > line_at_rank(&scores, alpha, low).unwrap().value);
            harmed_right += u32::from(new > line(&scores, alpha).unwrap().value);
        }
        let (low_share, right_share) = (
            f64::from(harmed_low) / f64::from(draws),
            f64::from(harmed_right) / f64::from(draws),
        );
        let expected = 0.05 + 1.0 / (n as f64 + 1.0);
        prop_assert!(low_share > 0.05 + slack(expected, draws) / 2.0,
            "one too low harmed only {low_share} (n {n}), expected about {expected}");
        prop_assert!(right_share <= 0.05 + slack(0.05, draws), "{right_share}");
    }
}

#[test]
fn too_few_good_runs_promise_nothing() {
    let alpha = Share::parse("5%").unwrap();
    let e = line(&[1u32; 18], alpha).unwrap_err();
    assert_eq!((e.have, e.need), (18, 19));
    assert_eq!(
        e.to_string(),
        "18 good runs to calibrate on; the promise needs at least 19 (1 more)"
    );
    assert!(line(&[1u32; 19], alpha).is_ok());
}

/// A judged history of `n` runs of `calls` calls each, none stopped, under the ladder.
fn judged(n: usize, calls: u32) -> (Tuning, usize) {
    use toolbrake_protocol::tune::{calibration_ladder, Figures, RunFigures};
    let (settings, base_at) = calibration_ladder(&toolbrake_core::config::Config::default());
    let rungs = settings.len();
    let run = RunFigures {
        calls,
        stopped: 0,
        harmful: 0,
    };
    let tuning = Tuning {
        figures: vec![Figures::default(); rungs],
        frontier: vec![false; rungs],
        settings,
        recommended: None,
        max_harmful: Share::new(1, 50).unwrap(),
        runs: vec![vec![run; n]; rungs],
        run_names: (0..n).map(|i| format!("run{i}")).collect(),
        base_error: None,
        events: 0,
        calls: u64::from(calls) * n as u64,
        run_cap: None,
        cut_runs: Vec::new(),
        base_source: String::new(),
    };
    (tuning, base_at)
}

#[test]
fn a_run_level_line_above_the_largest_accepted_is_never_printed_or_written() {
    let alpha = Share::parse("5%").unwrap();
    let labels = RunLabels::default();
    // 39 good runs of 1,000,050 calls each: the calibrated line is 1,000,050, which
    // `[budget] line` does not accept (1 to 1,000,000).
    let (tuning, base_at) = judged(39, 1_000_050);
    let p = calibrate(&tuning, base_at, &labels, alpha, true).unwrap();
    assert!(
        p.edit(&tuning).get("budget").is_none(),
        "{}",
        p.edit(&tuning)
    );
    assert!(!p.toml(&tuning).contains("[budget]"), "{}", p.toml(&tuning));
    let json = p.json(&tuning);
    assert!(json["run_line"].is_null(), "{json}");
    assert_eq!(json["run_line_refused"]["line"], 1_000_050, "{json}");
    assert_eq!(json["run_line_refused"]["max"], MAX_LINE, "{json}");
    let text = p.text(&tuning);
    assert!(
        text.contains("No run-level line: calibrated at α = 2.5% (k = 39 of 39), it would be 1000050, above the largest `[budget] line` toolbrake accepts (1000000)."),
        "{text}"
    );
    assert!(!text.contains("or cross the run-level line"), "{text}");
    assert!(!text.contains("line = 1000050"), "{text}");

    // A line within the range is offered, and what is written loads.
    let (tuning, base_at) = judged(39, 1_000_000);
    let p = calibrate(&tuning, base_at, &labels, alpha, true).unwrap();
    let budget = p.edit(&tuning)["budget"].clone();
    assert_eq!(budget["line"], 1_000_000, "{budget}");
    assert_eq!(
        BudgetConfig::from_value(Some(&budget)).unwrap().line(),
        Some(MAX_LINE)
    );
    assert!(p.toml(&tuning).contains("line = 1000000"));
}

/// `plain` runs of three distinct calls each (nothing to stop: good), and one run `long`
/// of `long` distinct calls, every other result without its session (answered by id).
fn long_history(plain: usize, long: usize) -> String {
    let mut h = String::new();
    for r in 0..plain {
        for c in 0..3 {
            h.push_str(&format!(
                "{{\"event\":\"call\",\"session\":\"run{r}\",\"id\":\"{c}\",\"tool\":\"search\",\"args\":{{\"q\":\"topic {c}\"}}}}\n{{\"event\":\"result\",\"session\":\"run{r}\",\"id\":\"{c}\",\"outcome\":{{\"text\":\"answer {c}\"}}}}\n"
            ));
        }
        h.push_str(&format!("{{\"event\":\"end\",\"session\":\"run{r}\"}}\n"));
    }
    for c in 0..long {
        let session = if c % 2 == 0 {
            ",\"session\":\"long\""
        } else {
            ""
        };
        h.push_str(&format!(
            "{{\"event\":\"call\",\"session\":\"long\",\"id\":\"{c}\",\"tool\":\"search\",\"args\":{{\"q\":\"page {c}\"}}}}\n{{\"event\":\"result\"{session},\"id\":\"{c}\",\"outcome\":{{\"text\":\"page {c} text\"}}}}\n"
        ));
    }
    h.push_str("{\"event\":\"end\",\"session\":\"long\"}\n");
    h
}

/// The history read with at most `cap` calls kept per run (none: all) and judged under
/// the calibration ladder.
fn judge_capped(history: &str, cap: Option<u64>) -> (Tuning, usize, u64) {
    use toolbrake_protocol::tune::{calibration_ladder, measure, Corpus};
    let mut corpus = cap.map_or_else(Corpus::default, Corpus::with_run_cap);
    corpus
        .read("history", history.as_bytes(), None, 1 << 20)
        .unwrap();
    let (settings, base_at) = calibration_ladder(&toolbrake_core::config::Config::default());
    let calls = corpus.calls();
    let tuning = measure(&corpus, settings, 1, Share::new(1, 50).unwrap());
    (tuning, base_at, calls)
}

#[test]
fn a_run_past_the_cap_is_replayed_up_to_it_and_counted_harmed() {
    let alpha = Share::parse("5%").unwrap();
    let labels = RunLabels::default();
    let cap = 200;
    let (tuning, base_at, calls) = judge_capped(&long_history(39, 1200), Some(cap));
    // Only the long run's first 200 calls are kept; the results of the others, with
    // their session or without, are skipped with them (none is left without its call).
    assert_eq!(calls, 39 * 3 + 200);
    assert_eq!(tuning.cut_runs, vec![("long".to_string(), 1200)]);
    assert_eq!(tuning.base_error, None);
    assert_eq!(tuning.figures[0].errors, 0);
    assert!(tuning.figures.iter().all(|f| f.calls == calls));
    let p = calibrate(&tuning, base_at, &labels, alpha, false).unwrap();
    let json = p.json(&tuning);
    assert_eq!(json["good_runs"], 40, "{json}");
    assert_eq!(json["cut_runs"], 1, "{json}");
    assert_eq!(json["cut_good_runs"], 1, "{json}");
    assert_eq!(json["cut_at"], 200, "{json}");
    assert_eq!(json["calls_replayed"], 39 * 3 + 200, "{json}");
    assert_eq!(json["calls_not_replayed"], 1000, "{json}");
    assert_eq!(json["harmed_good_runs"], 1, "{json}");
    let text = p.text(&tuning);
    assert!(
        text.contains("40 runs (317 calls); 1 run longer than 200 calls cut there (1000 calls past the cut not replayed): 1 good of them counted harmed at every setting, 40 good"),
        "{text}"
    );

    // The cut run counts as harmed at every setting: with 20 good runs at α = 5% the
    // promise rests on the worst of them, so no setting keeps it, where the whole run,
    // harmed by none, would have let one.
    let history = long_history(19, 1200);
    let (whole, base_at, _) = judge_capped(&history, None);
    assert!(calibrate(&whole, base_at, &labels, alpha, false).is_ok());
    let (tuning, base_at, _) = judge_capped(&history, Some(cap));
    let e = calibrate(&tuning, base_at, &labels, alpha, false).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no setting of the ladder keeps the promise: even the loosest harms 1 of your 20 good runs, more than 5% allows"
    );
}
