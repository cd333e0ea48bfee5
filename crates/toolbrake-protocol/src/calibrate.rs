//! Split-conformal calibration of a stop line on a user's own good runs, in exact
//! arithmetic (`toolbrake tune --calibrate`).
//!
//! Each good run of the calibration set has a score (for the call-level settings: the
//! strictest rung of a ladder of settings from which every looser rung leaves the run
//! unharmed; for the run-level line: its calls plus the calls toolbrake stopped). The line
//! is the k-th smallest score with k = ⌈(n+1)(1−α)⌉ over the n good runs. When the runs
//! are exchangeable (a new good run is like the past ones: the same agent, the same kind
//! of tasks), a new good run's score is above the line with probability at most α: the
//! finite-sample guarantee of split-conformal prediction. With too few good runs k
//! exceeds n and no line can be promised: [`TooFew`] says how many more are needed.
//!
//! α is a rational read exactly from its decimal or fraction text (`0.05`, `5%`, `1/20`);
//! nothing here is a float.

use std::fmt;

/// A share in (0, 1), kept as an exact fraction `num / den` in lowest terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Share {
    num: u64,
    den: u64,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Share {
    /// `num / den`, reduced; `None` unless 0 < num < den.
    pub fn new(num: u64, den: u64) -> Option<Share> {
        if num == 0 || num >= den {
            return None;
        }
        let g = gcd(num, den);
        Some(Share {
            num: num / g,
            den: den / g,
        })
    }

    /// `num / den` where `num` may be 0 (a share of nothing), reduced; `None` unless
    /// num < den.
    pub fn at_most(num: u64, den: u64) -> Option<Share> {
        if num == 0 && den > 0 {
            return Some(Share { num: 0, den: 1 });
        }
        Share::new(num, den)
    }

    /// The numerator (lowest terms).
    pub fn num(self) -> u64 {
        self.num
    }

    /// The denominator (lowest terms).
    pub fn den(self) -> u64 {
        self.den
    }

    /// Half of this share (exact).
    pub fn half(self) -> Share {
        Share::at_most(self.num, self.den.saturating_mul(2)).expect("half of a share is one")
    }

    /// Whether `part / whole` is at most this share (`0 / 0` is).
    pub fn admits(self, part: u64, whole: u64) -> bool {
        u128::from(part) * u128::from(self.den) <= u128::from(self.num) * u128::from(whole)
    }

    /// Reads `0.05`, `5%`, `1/20` (or `0.025`, `2.5%`) exactly. The error names the value
    /// and the rule.
    pub fn parse(text: &str) -> Result<Share, String> {
        let t = text.trim();
        let bad =
            || format!("{text:?} is not a share strictly between 0 and 1 (write 0.05, 5% or 1/20)");
        let (num, den) = if let Some((a, b)) = t.split_once('/') {
            let a: u64 = a.trim().parse().map_err(|_| bad())?;
            let b: u64 = b.trim().parse().map_err(|_| bad())?;
            (a, b)
        } else {
            let (digits, scale) = match t.strip_suffix('%') {
                Some(p) => (p.trim(), 100u64),
                None => (t, 1u64),
            };
            let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
            if int.is_empty() && frac.is_empty()
                || !int.chars().all(|c| c.is_ascii_digit())
                || !frac.chars().all(|c| c.is_ascii_digit())
                || frac.len() > 12
            {
                return Err(bad());
            }
            let den = 10u64.pow(frac.len() as u32);
            let int: u64 = if int.is_empty() {
                0
            } else {
                int.parse().map_err(|_| bad())?
            };
            let frac: u64 = if frac.is_empty() {
                0
            } else {
                frac.parse().map_err(|_| bad())?
            };
            let num = int
                .checked_mul(den)
                .and_then(|n| n.checked_add(frac))
                .ok_or_else(bad)?;
            (num, den.checked_mul(scale).ok_or_else(bad)?)
        };
        Share::new(num, den).ok_or_else(bad)
    }

    /// In words for a promise: `1 in 20` when the share is one over a whole number, else
    /// the percentage (`7.5%`).
    pub fn in_words(self) -> String {
        if self.num == 1 {
            format!("1 in {}", self.den)
        } else {
            self.percent()
        }
    }

    /// As a percentage with up to 3 decimals, trailing zeros dropped (`5%`, `2.5%`).
    pub fn percent(self) -> String {
        // Rounded to thousandths of a percent, in integers.
        let scaled =
            (u128::from(self.num) * 100_000 + u128::from(self.den) / 2) / u128::from(self.den);
        let (int, frac) = (scaled / 1000, scaled % 1000);
        if frac == 0 {
            format!("{int}%")
        } else {
            let f = format!("{frac:03}");
            format!("{int}.{}%", f.trim_end_matches('0'))
        }
    }
}

impl fmt::Display for Share {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.percent())
    }
}

/// The conformal rank k = ⌈(n+1)(1−α)⌉ over `n` calibration scores (1-based), or `None`
/// when k > n: too few scores to promise anything at this α.
///
/// ```
/// use toolbrake_protocol::calibrate::{rank, Share};
/// let alpha = Share::parse("0.05").unwrap();
/// assert_eq!(rank(18, alpha), None);
/// assert_eq!(rank(19, alpha), Some(19));
/// assert_eq!(rank(240, alpha), Some(229));
/// ```
pub fn rank(n: u64, alpha: Share) -> Option<u64> {
    let keep = u128::from(alpha.den - alpha.num);
    let den = u128::from(alpha.den);
    let k = (u128::from(n) + 1) * keep;
    let k = k.div_ceil(den);
    u64::try_from(k).ok().filter(|k| *k <= n)
}

/// The fewest calibration scores with which a line can be promised at `alpha`: the
/// smallest n with ⌈(n+1)(1−α)⌉ ≤ n, that is n + 1 ≥ 1/α.
pub fn needed(alpha: Share) -> u64 {
    alpha.den.div_ceil(alpha.num) - 1
}

/// Not enough good runs to promise a line at α.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooFew {
    /// Good runs in the calibration set.
    pub have: u64,
    /// Good runs the promise needs.
    pub need: u64,
}

impl fmt::Display for TooFew {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} good {} to calibrate on; the promise needs at least {} ({} more)",
            self.have,
            if self.have == 1 { "run" } else { "runs" },
            self.need,
            self.need - self.have
        )
    }
}

/// A calibrated line: the k-th smallest of n scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<T> {
    /// The line (a score; crossing means a score above it).
    pub value: T,
    /// The rank used (1-based).
    pub k: u64,
    /// Calibration scores.
    pub n: u64,
}

/// The split-conformal line over `scores` at `alpha`: the ⌈(n+1)(1−α)⌉-th smallest.
/// A new exchangeable score is above it with probability at most α.
///
/// ```
/// use toolbrake_protocol::calibrate::{line, Share};
/// let scores: Vec<u32> = (1..=19).collect();
/// assert_eq!(line(&scores, Share::parse("5%").unwrap()).unwrap().value, 19);
/// let e = line(&scores[..10], Share::parse("5%").unwrap()).unwrap_err();
/// assert_eq!((e.have, e.need), (10, 19));
/// ```
pub fn line<T: Ord + Copy>(scores: &[T], alpha: Share) -> Result<Line<T>, TooFew> {
    line_at_rank(scores, alpha, rank)
}

/// [`line`] with the rank computed by `rank_of` (the property test checks that a rank one
/// too low breaks the guarantee).
pub fn line_at_rank<T: Ord + Copy>(
    scores: &[T],
    alpha: Share,
    rank_of: impl Fn(u64, Share) -> Option<u64>,
) -> Result<Line<T>, TooFew> {
    let n = scores.len() as u64;
    let too_few = TooFew {
        have: n,
        need: needed(alpha),
    };
    let k = rank_of(n, alpha).ok_or(too_few)?;
    if k == 0 || k > n {
        return Err(too_few);
    }
    let mut sorted = scores.to_vec();
    sorted.sort_unstable();
    Ok(Line {
        value: sorted[(k - 1) as usize],
        k,
        n,
    })
}

/// Whether a run counts as good for calibration: a person's mark first (mistaken: good,
/// whatever toolbrake did; stuck: never good), then the resolved label where the history
/// has one, else a run that ended without a stop.
pub fn is_good(
    feedback: Option<toolbrake_core::Feedback>,
    resolved: Option<bool>,
    stopped: bool,
) -> bool {
    match (feedback, resolved) {
        (Some(toolbrake_core::Feedback::Mistaken), _) => true,
        (Some(toolbrake_core::Feedback::Stuck), _) => false,
        (None, Some(r)) => r,
        (None, None) => !stopped,
    }
}

/// A good run's score on a ladder of settings ordered strictest first: the first rung
/// from which the run has no harmful stop at that rung and every looser one (`harmful[j]`:
/// harmful stops at rung j); `harmful.len()` when even the loosest harms it. A run harmed
/// at rung j has a score above j, so the rung at the calibrated line harms a new good run
/// with probability at most α.
pub fn rung_score(harmful: impl DoubleEndedIterator<Item = u64> + ExactSizeIterator) -> usize {
    let len = harmful.len();
    let mut score = len;
    for (j, h) in harmful.enumerate().rev() {
        if h > 0 {
            break;
        }
        score = j;
    }
    score
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolbrake_core::Feedback;

    #[test]
    fn shares_are_read_exactly_and_bad_ones_are_refused() {
        for t in ["0.05", "5%", "1/20", " 0.050 ", "5.0%", "2/40"] {
            assert_eq!(Share::parse(t).unwrap(), Share::new(1, 20).unwrap(), "{t}");
        }
        assert_eq!(Share::parse("0.025").unwrap().in_words(), "1 in 40");
        assert_eq!(Share::parse("7.5%").unwrap().in_words(), "7.5%");
        assert_eq!(Share::parse("0.1").unwrap().half().in_words(), "1 in 20");
        for bad in [
            "0", "1", "1.5", "-0.1", "x", "", "5%%", "1/0", "0/4", ".", "1e-2",
        ] {
            let e = Share::parse(bad).unwrap_err();
            assert!(e.contains("strictly between 0 and 1"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_rank_is_the_ceiling_and_the_minimum_follows_one_over_alpha() {
        let a = Share::parse("0.05").unwrap();
        assert_eq!(needed(a), 19);
        assert_eq!(rank(19, a), Some(19));
        // (40 + 1) × 0.95 = 38.95 → 39.
        assert_eq!(rank(40, a), Some(39));
        // (99 + 1) × 0.95 = 95 exactly: no rounding up of an exact product.
        assert_eq!(rank(99, a), Some(95));
        let a = Share::parse("1/3").unwrap();
        assert_eq!(needed(a), 2);
        assert_eq!(rank(2, a), Some(2));
        assert_eq!(rank(1, a), None);
        let a = Share::parse("0.3").unwrap();
        // 1/0.3 = 3.33… → n + 1 ≥ 4.
        assert_eq!(needed(a), 3);
        assert_eq!(rank(3, a), Some(3));
        assert_eq!(rank(2, a), None);
    }

    #[test]
    fn good_runs_follow_marks_then_labels_then_stops() {
        assert!(is_good(Some(Feedback::Mistaken), Some(false), true));
        assert!(!is_good(Some(Feedback::Stuck), Some(true), false));
        assert!(is_good(None, Some(true), true));
        assert!(!is_good(None, Some(false), false));
        assert!(is_good(None, None, false));
        assert!(!is_good(None, None, true));
    }

    #[test]
    fn a_rung_score_is_where_every_looser_rung_is_harmless() {
        assert_eq!(rung_score([0u64, 0, 0].into_iter()), 0);
        assert_eq!(rung_score([2u64, 1, 0, 0].into_iter()), 2);
        // Harmless at rung 1 but harmed at a looser one: not before rung 3.
        assert_eq!(rung_score([1u64, 0, 1, 0].into_iter()), 3);
        assert_eq!(rung_score([1u64, 1].into_iter()), 2);
    }
}
