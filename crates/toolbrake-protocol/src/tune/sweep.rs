//! The settings a tune judges: the default sweep around the base, a `--sweep` grid, and
//! the ladder calibration walks (every varied key stepped together, strictest first).

use serde_json::{json, Map, Value};
use toolbrake_core::config::{no_env, Config, ConfigError};

/// The keys the default sweep varies, each with the ladder of values it steps along
/// (loosest last; `"off"` after the numbers where the key can be turned off).
const KNOBS: &[(&str, &[u32], bool)] = &[
    ("streak.max_repeats", &[2, 3, 4, 5, 6, 8, 10, 12], false),
    ("breaker.unchanged_limit", &[1, 2, 3, 4, 5, 6, 8], true),
    ("breaker.fail_limit", &[3, 4, 5, 6, 8, 10, 12], true),
    ("breaker.cycle_limit", &[2, 3, 4, 5, 6, 8], true),
    (
        "breaker.struggle_ask_at",
        &[8, 10, 12, 16, 20, 24, 32],
        true,
    ),
    ("breaker.window", &[8, 12, 16, 24, 32, 48, 64], false),
    ("breaker.limits.exact", &[6, 8, 10, 12, 16, 20, 24], true),
    ("breaker.limits.cmd", &[6, 8, 10, 12, 16, 20, 24], true),
];

/// The keys of the combined variations "repeats looser" and "failures looser".
const REPEAT_KEYS: &[&str] = &[
    "streak.max_repeats",
    "breaker.limits.exact",
    "breaker.limits.cmd",
];
const FAILURE_KEYS: &[&str] = &[
    "breaker.unchanged_limit",
    "breaker.fail_limit",
    "breaker.cycle_limit",
    "breaker.struggle_ask_at",
];

/// Most settings one sweep judges (a `--sweep` grid is a product and grows fast).
pub const MAX_SETTINGS: usize = 1000;

/// The keys the default sweep varies, as `--sweep` names them.
pub fn default_keys() -> Vec<&'static str> {
    KNOBS.iter().map(|(k, _, _)| *k).collect()
}

/// One configuration judged: the base with some keys changed.
#[derive(Debug, Clone)]
pub struct Setting {
    /// `base`, `defaults` or a combined variation's name; `None` for a plain variation.
    pub name: Option<&'static str>,
    /// The keys that differ from the base (dotted, as `--sweep` names them) and their values.
    pub changes: Vec<(String, Value)>,
    /// The validated configuration.
    pub config: Config,
    /// How far from the base: the sum over changed keys of |ln(value / base value)|
    /// (2 for a key turned on or off). Ties in the recommendation go to the nearest.
    pub distance: f64,
}

impl Setting {
    /// The changes as `key=value, …` (`(base)` for none).
    pub fn label(&self) -> String {
        let changes = self
            .changes
            .iter()
            .map(|(k, v)| format!("{k}={}", shown(v)))
            .collect::<Vec<_>>()
            .join(", ");
        match (self.name, changes.is_empty()) {
            (Some("base"), _) | (None, true) => "(base)".into(),
            (Some(name), true) => format!("{name} (= base)"),
            (Some(name), false) => format!("{name}: {changes}"),
            (None, false) => changes,
        }
    }

    /// The label in a table row: a combined variation by its name alone (its changes are
    /// listed under the table).
    pub fn row_label(&self) -> String {
        match self.name {
            Some(name) if name != "base" && !self.changes.is_empty() => name.to_string(),
            _ => self.label(),
        }
    }

    /// The changes as a partial configuration document: `{"streak": {"max_repeats": 4},
    /// "breaker": {"limits": {"exact": 16}}}` (what `--write` merges into a file).
    pub fn edit(&self) -> Value {
        let mut doc = Value::Object(Map::new());
        for (key, value) in &self.changes {
            set_path(&mut doc, &toolbrake_config::key_parts(key), value.clone());
        }
        doc
    }

    /// The changes as `toolbrake.toml` text (`[streak]`, `[breaker]`, `[breaker.limits]`).
    pub fn toml(&self) -> String {
        let doc = self.edit();
        ["streak", "breaker"]
            .iter()
            .filter_map(|t| doc.get(*t).map(|s| toolbrake_config::section_to_toml(t, s)))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn get_path<'a>(tree: &'a Value, parts: &[String]) -> Option<&'a Value> {
    parts.iter().try_fold(tree, |v, p| v.get(p))
}

fn set_path(tree: &mut Value, parts: &[String], value: Value) {
    let mut cur = tree;
    for p in &parts[..parts.len() - 1] {
        let Value::Object(map) = cur else { return };
        cur = map
            .entry(p.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if let (Value::Object(map), Some(last)) = (cur, parts.last()) {
        map.insert(last.clone(), value);
    }
}

/// The configuration `base` becomes with `changes` applied, validated as a file would be.
fn apply(base: &Value, changes: &[(String, Value)]) -> Result<Config, ConfigError> {
    let mut tree = base.clone();
    for (key, value) in changes {
        set_path(&mut tree, &toolbrake_config::key_parts(key), value.clone());
    }
    Config::from_sections(tree.get("streak"), tree.get("breaker"), &no_env)?
        .with_budget(tree.get("budget"))
}

/// How far `value` is from `base` (see [`Setting::distance`]).
fn distance(base: Option<&Value>, value: &Value) -> f64 {
    match (base.and_then(Value::as_f64), value.as_f64()) {
        (Some(b), Some(v)) if b > 0.0 && v > 0.0 => (v / b).ln().abs(),
        _ if base == Some(value) => 0.0,
        _ => 2.0,
    }
}

/// The sweep's settings: the base first, then (with `defaults`) the base with every
/// varied key at its default, then the variations, without duplicates.
struct Builder {
    base: Value,
    settings: Vec<Setting>,
}

impl Builder {
    fn new(base: &Config) -> Self {
        let base_value = base.to_value();
        Builder {
            settings: vec![Setting {
                name: Some("base"),
                changes: Vec::new(),
                config: base.clone(),
                distance: 0.0,
            }],
            base: base_value,
        }
    }

    /// Adds the base with `changes` (those equal to the base's dropped), unless the same
    /// setting is already there.
    fn add(
        &mut self,
        name: Option<&'static str>,
        changes: Vec<(String, Value)>,
    ) -> Result<(), ConfigError> {
        let changes: Vec<(String, Value)> = changes
            .into_iter()
            .filter(|(k, v)| get_path(&self.base, &toolbrake_config::key_parts(k)) != Some(v))
            .collect();
        let config = apply(&self.base, &changes)?;
        if self.settings.iter().any(|s| s.config == config) {
            return Ok(());
        }
        let distance = changes
            .iter()
            .map(|(k, v)| distance(get_path(&self.base, &toolbrake_config::key_parts(k)), v))
            .sum();
        self.settings.push(Setting {
            name,
            changes,
            config,
            distance,
        });
        Ok(())
    }
}

/// One key's ladder around the base's value: its values (the base's inserted where it
/// belongs when it is not a rung) and the base's position.
fn ladder(base: &Value, key: &str, rungs: &[u32], off: bool) -> (Vec<Value>, usize) {
    let mut values: Vec<Value> = rungs.iter().map(|n| json!(n)).collect();
    let current = get_path(base, &toolbrake_config::key_parts(key))
        .cloned()
        .unwrap_or(Value::Null);
    match current.as_u64() {
        Some(n) if !rungs.iter().any(|r| u64::from(*r) == n) => {
            let at = rungs
                .iter()
                .position(|r| u64::from(*r) > n)
                .unwrap_or(rungs.len());
            values.insert(at, current.clone());
        }
        _ => {}
    }
    if off {
        values.push(json!("off"));
    }
    let at = values
        .iter()
        .position(|v| *v == current)
        .unwrap_or(values.len() / 2);
    (values, at)
}

fn step(values: &[Value], at: usize, by: isize) -> Value {
    let i = (at as isize + by).clamp(0, values.len() as isize - 1) as usize;
    values[i].clone()
}

/// The default sweep around `base`: the base; the base with the varied keys at their
/// defaults (when that differs); each key one step stricter and one and two steps looser
/// (two stricter at the loose end of its ladder); and five combined variations: every
/// key one step stricter, one and two steps looser, the repeat gates one step looser,
/// the failure gates one step looser. About 30 settings.
pub fn default_sweep(base: &Config) -> Vec<Setting> {
    let mut b = Builder::new(base);
    let defaults = Config::default().to_value();
    let ladders: Vec<(&str, Vec<Value>, usize)> = KNOBS
        .iter()
        .map(|(k, rungs, off)| {
            let (values, at) = ladder(&b.base, k, rungs, *off);
            (*k, values, at)
        })
        .collect();
    // Every candidate below is valid by construction (rungs inside each key's range); a
    // combination the core refuses is left out rather than failing the sweep.
    let default_changes: Vec<(String, Value)> = KNOBS
        .iter()
        .filter_map(|(k, _, _)| {
            get_path(&defaults, &toolbrake_config::key_parts(k)).map(|v| (k.to_string(), v.clone()))
        })
        .collect();
    let _ = b.add(Some("defaults"), default_changes);
    for (key, values, at) in &ladders {
        let steps: &[isize] = if at + 2 < values.len() {
            &[-1, 1, 2]
        } else {
            &[-2, -1, 1]
        };
        for &by in steps {
            let _ = b.add(None, vec![(key.to_string(), step(values, *at, by))]);
        }
    }
    let combined: [(&'static str, isize, &[&str]); 5] = [
        ("all stricter", -1, &[]),
        ("all looser", 1, &[]),
        ("all much looser", 2, &[]),
        ("repeats looser", 1, REPEAT_KEYS),
        ("failures looser", 1, FAILURE_KEYS),
    ];
    for (name, by, only) in combined {
        let changes = ladders
            .iter()
            .filter(|(k, _, _)| only.is_empty() || only.contains(k))
            .map(|(k, values, at)| (k.to_string(), step(values, *at, by)))
            .collect();
        let _ = b.add(Some(name), changes);
    }
    b.settings
}

/// The steps of the calibration ladder around the base, strictest first.
const LADDER_STEPS: std::ops::RangeInclusive<isize> = -3..=6;

/// The ladder calibration walks: every key of the default sweep but the window stepped
/// together, from three steps stricter than the base to six looser (each key clamped at
/// its ladder's ends, so the loosest turns off every gate that can be), strictest first,
/// without repeats. Every rung is at least as loose as the one before it in every key, so
/// a run that a rung leaves unharmed is, but for the order of its stops, left unharmed by
/// the looser ones ([`crate::calibrate::rung_score`] counts the exceptions against the
/// promise). Returns the ladder and the base's position in it.
pub fn calibration_ladder(base: &Config) -> (Vec<Setting>, usize) {
    let b = Builder::new(base);
    let ladders: Vec<(&str, Vec<Value>, usize)> = KNOBS
        .iter()
        .filter(|(k, _, _)| *k != "breaker.window")
        .map(|(k, rungs, off)| {
            let (values, at) = ladder(&b.base, k, rungs, *off);
            (*k, values, at)
        })
        .collect();
    let mut out: Vec<Setting> = Vec::new();
    let mut base_at = 0;
    for by in LADDER_STEPS {
        let changes: Vec<(String, Value)> = ladders
            .iter()
            .map(|(k, values, at)| (k.to_string(), step(values, *at, by)))
            .filter(|(k, v)| get_path(&b.base, &toolbrake_config::key_parts(k)) != Some(v))
            .collect();
        let Ok(config) = apply(&b.base, &changes) else {
            continue;
        };
        if by == 0 {
            base_at = out.len();
        }
        if out.last().is_some_and(|s| s.config == config) {
            if by == 0 {
                base_at = out.len() - 1;
            }
            continue;
        }
        let distance = changes
            .iter()
            .map(|(k, v)| distance(get_path(&b.base, &toolbrake_config::key_parts(k)), v))
            .sum();
        out.push(Setting {
            name: (by == 0).then_some("base"),
            changes,
            config,
            distance,
        });
    }
    (out, base_at)
}

/// A `--sweep KEY=V1,V2,…` value: the key (as the user wrote it) and its values.
pub fn parse_sweep_arg(arg: &str) -> Result<(String, Vec<Value>), String> {
    let (key, values) = arg.split_once('=').ok_or_else(|| {
        format!("--sweep {arg:?} must be KEY=V1,V2,… (e.g. streak.max_repeats=3,4,5)")
    })?;
    let values: Vec<Value> = values
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|v| {
            if let Ok(i) = v.parse::<i64>() {
                json!(i)
            } else if let Ok(b) = v.parse::<bool>() {
                json!(b)
            } else {
                json!(v.trim_matches('"'))
            }
        })
        .collect();
    if values.is_empty() {
        return Err(format!("--sweep {arg:?} names no value after `=`"));
    }
    Ok((key.trim().to_string(), values))
}

/// The dotted key `--sweep` means by `key`: `streak.X` and `breaker.X` as written, a bare
/// `X` (or `limits.X`) found in the one table that has it. Only single values can be swept
/// (not lists or tables); `breaker.limits` takes any fingerprint prefix.
fn resolve_key(base: &Value, key: &str) -> Result<String, String> {
    let parts = toolbrake_config::key_parts(key);
    let candidates: Vec<Vec<String>> = match parts.first().map(String::as_str) {
        Some("streak" | "breaker") => vec![parts.clone()],
        _ => ["streak", "breaker"]
            .iter()
            .map(|t| {
                std::iter::once(t.to_string())
                    .chain(parts.iter().cloned())
                    .collect()
            })
            .collect(),
    };
    let sweepable = |p: &Vec<String>| {
        let is_limit = p.len() == 3 && p[0] == "breaker" && p[1] == "limits" && !p[2].is_empty();
        is_limit
            || matches!(
                get_path(base, p),
                Some(Value::Number(_) | Value::String(_) | Value::Bool(_))
            )
    };
    let found: Vec<&Vec<String>> = candidates.iter().filter(|p| sweepable(p)).collect();
    match found.as_slice() {
        [one] => Ok(one
            .iter()
            .map(|p| {
                if p.contains('.') {
                    format!("{p:?}")
                } else {
                    p.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(".")),
        [] => Err(format!(
            "--sweep: `{key}` is not a setting that takes one value (e.g. {})",
            default_keys().join(", ")
        )),
        _ => Err(format!(
            "--sweep: `{key}` is in both [streak] and [breaker]; write streak.{key} or breaker.{key}"
        )),
    }
}

/// The sweep `--sweep` asks for: the base, then every combination of the values given
/// (the product of the lists), each validated as a configuration file would be.
pub fn grid_sweep(base: &Config, grid: &[(String, Vec<Value>)]) -> Result<Vec<Setting>, String> {
    let mut b = Builder::new(base);
    let mut keys: Vec<String> = Vec::new();
    for (key, _) in grid {
        let k = resolve_key(&b.base, key)?;
        if keys.contains(&k) {
            return Err(format!(
                "--sweep names `{k}` twice; give its values in one list"
            ));
        }
        keys.push(k);
    }
    let total = grid
        .iter()
        .try_fold(1usize, |n, (_, vs)| n.checked_mul(vs.len()))
        .filter(|n| *n < MAX_SETTINGS)
        .ok_or_else(|| {
            format!(
                "--sweep makes more than {} settings (the product of its lists); sweep fewer values",
                MAX_SETTINGS - 1
            )
        })?;
    for n in 0..total {
        let mut rest = n;
        let mut changes = Vec::with_capacity(grid.len());
        for ((_, values), key) in grid.iter().zip(&keys).rev() {
            changes.push((key.clone(), values[rest % values.len()].clone()));
            rest /= values.len();
        }
        changes.reverse();
        b.add(None, changes).map_err(|e| format!("--sweep: {e}"))?;
    }
    Ok(b.settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values a sweep gives `key` when it varies that key alone.
    fn alone(settings: &[Setting], key: &str) -> Vec<String> {
        settings
            .iter()
            .filter(|s| s.name.is_none() && s.changes.len() == 1 && s.changes[0].0 == key)
            .map(|s| shown(&s.changes[0].1))
            .collect()
    }
    use toolbrake_config::ConfigToml;

    fn config(toml: &str) -> Config {
        Config::from_toml_str(toml, &no_env).unwrap()
    }

    #[test]
    fn the_default_sweep_has_about_thirty_distinct_settings_around_the_base() {
        let settings = default_sweep(&Config::default());
        assert!((28..=31).contains(&settings.len()), "{}", settings.len());
        assert_eq!(settings[0].label(), "(base)");
        for (i, a) in settings.iter().enumerate() {
            for b in &settings[i + 1..] {
                assert_ne!(a.config, b.config, "{} and {}", a.label(), b.label());
            }
        }
        // Each key is varied alone, one step stricter and two looser.
        assert_eq!(alone(&settings, "streak.max_repeats"), ["2", "4", "5"]);
        assert_eq!(alone(&settings, "breaker.limits.exact"), ["10", "16", "20"]);
        assert_eq!(alone(&settings, "breaker.window"), ["12", "24", "32"]);
    }

    #[test]
    fn a_custom_base_is_swept_around_its_own_values_and_against_the_defaults() {
        let base = config("[streak]\nmax_repeats = 7\n[breaker]\nfail_limit = \"off\"\n");
        let settings = default_sweep(&base);
        let defaults = settings
            .iter()
            .find(|s| s.name == Some("defaults"))
            .expect("the defaults are judged beside a custom base");
        assert_eq!(
            defaults.toml(),
            "[streak]\nmax_repeats = 3\n\n[breaker]\nfail_limit = 5\n"
        );
        // 7 is not a rung: it is put between 6 and 8.
        assert_eq!(alone(&settings, "streak.max_repeats"), ["6", "8", "10"]);
        // Off is the loosest rung: only stricter values are left.
        assert_eq!(alone(&settings, "breaker.fail_limit"), ["10", "12"]);
    }

    #[test]
    fn the_calibration_ladder_steps_every_gate_together_strictest_first() {
        let (ladder, base_at) = calibration_ladder(&Config::default());
        assert_eq!(ladder[base_at].label(), "(base)");
        assert!(base_at > 0 && base_at + 1 < ladder.len(), "{base_at}");
        let repeats = |s: &Setting| s.config.streak.max_repeats();
        for pair in ladder.windows(2) {
            assert!(repeats(&pair[0]) <= repeats(&pair[1]));
            assert_ne!(pair[0].config, pair[1].config);
        }
        let loosest = ladder.last().unwrap().toml();
        assert!(loosest.contains("fail_limit = \"off\""), "{loosest}");
        assert!(!loosest.contains("window"), "{loosest}");
    }

    #[test]
    fn a_grid_is_every_combination_validated_and_keys_are_resolved() {
        let grid = vec![
            parse_sweep_arg("max_repeats=2,3").unwrap(),
            parse_sweep_arg("limits.exact=8,off").unwrap(),
        ];
        let settings = grid_sweep(&Config::default(), &grid).unwrap();
        let labels: Vec<String> = settings.iter().map(Setting::label).collect();
        assert_eq!(
            labels,
            [
                "(base)",
                "streak.max_repeats=2, breaker.limits.exact=8",
                "streak.max_repeats=2, breaker.limits.exact=off",
                "breaker.limits.exact=8",
                "breaker.limits.exact=off",
            ]
        );
        assert_eq!(
            settings[1].edit(),
            json!({"streak": {"max_repeats": 2}, "breaker": {"limits": {"exact": 8}}})
        );
        let e = grid_sweep(
            &Config::default(),
            &[parse_sweep_arg("breaker.window=2").unwrap()],
        )
        .unwrap_err();
        assert!(e.contains("breaker.window"), "{e}");
        let e = grid_sweep(
            &Config::default(),
            &[parse_sweep_arg("enabled=false").unwrap()],
        )
        .unwrap_err();
        assert!(e.contains("both [streak] and [breaker]"), "{e}");
        let big: Vec<_> = (0..4)
            .map(|i| {
                let key = ["max_repeats", "window", "fail_limit", "cycle_limit"][i];
                (key.to_string(), (2..8).map(|n| json!(n)).collect())
            })
            .collect();
        assert!(grid_sweep(&Config::default(), &big)
            .unwrap_err()
            .contains("more than 999"));
    }
}
