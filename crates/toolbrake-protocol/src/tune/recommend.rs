//! The frontier and the recommendation of a tune.
//!
//! The recommendation always names a setting: among those whose harmful stops are within
//! the harmful-stop budget (a share of their stops, `--max-harmful`), the one that stops
//! the most waste (ties: the nearest to the base); when none is within it, the one whose
//! stops are least often harmful. A setting that stops nothing is within any budget.

use super::figures::Figures;
use super::sweep::Setting;
use crate::calibrate::Share;
use std::cmp::Ordering;

/// The default harmful-stop budget: at most 1 stop in 50 harmful.
pub const DEFAULT_MAX_HARMFUL: (u64, u64) = (1, 50);

/// Pareto: a setting is on the frontier when no other stops at least as much waste with at
/// most as many harmful stops, and is better on one of the two.
pub(super) fn frontier(figures: &[Figures]) -> Vec<bool> {
    figures
        .iter()
        .map(|a| {
            !figures.iter().any(|b| {
                b.waste >= a.waste
                    && b.harmful <= a.harmful
                    && (b.waste > a.waste || b.harmful < a.harmful)
            })
        })
        .collect()
}

/// `a.harmful / a.stopped` against `b`'s, exactly (a setting with no stop has share 0).
fn harmful_share_cmp(a: &Figures, b: &Figures) -> Ordering {
    let share = |f: &Figures| (u128::from(f.harmful), u128::from(f.stopped.max(1)));
    let ((an, ad), (bn, bd)) = (share(a), share(b));
    (an * bd).cmp(&(bn * ad))
}

/// The recommended setting (see the module's documentation); `None` only for no settings.
pub(super) fn recommend(figures: &[Figures], settings: &[Setting], budget: Share) -> Option<usize> {
    let nearer = |i: usize, j: usize| {
        settings[j]
            .distance
            .total_cmp(&settings[i].distance)
            .then(j.cmp(&i))
    };
    let within = figures
        .iter()
        .enumerate()
        .filter(|(_, f)| budget.admits(f.harmful, f.stopped))
        .max_by(|(i, a), (j, b)| a.waste.cmp(&b.waste).then(nearer(*i, *j)))
        .map(|(i, _)| i);
    within.or_else(|| {
        figures
            .iter()
            .enumerate()
            .min_by(|(i, a), (j, b)| {
                harmful_share_cmp(a, b)
                    .then(b.waste.cmp(&a.waste))
                    .then(nearer(*j, *i))
            })
            .map(|(i, _)| i)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolbrake_core::config::Config;

    fn f(waste: u64, harmful: u64, stopped: u64) -> Figures {
        Figures {
            waste,
            harmful,
            stopped,
            ..Figures::default()
        }
    }

    fn settings(n: usize) -> Vec<Setting> {
        (0..n)
            .map(|i| Setting {
                name: None,
                changes: Vec::new(),
                config: Config::default(),
                distance: i as f64,
            })
            .collect()
    }

    #[test]
    fn the_frontier_is_the_settings_no_other_beats() {
        let g = |waste, harmful| f(waste, harmful, 0);
        let figures = [g(5, 0), g(8, 2), g(8, 3), g(3, 0), g(5, 0), g(9, 9)];
        assert_eq!(frontier(&figures), [true, true, false, false, true, true]);
    }

    #[test]
    fn the_recommendation_stops_the_most_waste_within_the_budget() {
        let budget = Share::new(1, 50).unwrap();
        // 1 harmful of 50 stops is within 2%; 2 of 60 is not.
        let figures = [f(10, 0, 10), f(40, 1, 50), f(55, 2, 60)];
        assert_eq!(recommend(&figures, &settings(3), budget), Some(1));
        // A zero budget is the old rule: no harmful stop at all.
        let zero = Share::at_most(0, 1).unwrap();
        assert_eq!(recommend(&figures, &settings(3), zero), Some(0));
        // Ties in waste go to the nearest to the base.
        let tied = [f(40, 0, 40), f(40, 0, 40)];
        assert_eq!(recommend(&tied, &settings(2), budget), Some(0));
    }

    #[test]
    fn with_every_setting_over_budget_the_least_harmful_share_is_recommended() {
        let budget = Share::new(1, 50).unwrap();
        let figures = [f(10, 5, 20), f(30, 3, 40), f(50, 9, 60)];
        // Shares 25%, 7.5%, 15%: the second.
        assert_eq!(recommend(&figures, &settings(3), budget), Some(1));
    }
}
