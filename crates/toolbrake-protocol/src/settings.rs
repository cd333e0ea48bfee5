//! The `[protocol]` table of `toolbrake.toml`: settings of `replay` and `serve`.

use toolbrake_config::show;
use toolbrake_core::config::{unknown_key, ConfigError};

/// The `[protocol]` table: settings of `replay` and `serve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtocolSettings {
    /// Input lines longer than this are error lines (default 16 MiB).
    pub max_line_bytes: usize,
}

impl Default for ProtocolSettings {
    fn default() -> Self {
        ProtocolSettings {
            max_line_bytes: 16 << 20,
        }
    }
}

/// Reads and validates the `[protocol]` table (absent: the defaults).
pub fn protocol_table(v: Option<&toml::Value>) -> Result<ProtocolSettings, ConfigError> {
    let mut p = ProtocolSettings::default();
    let Some(v) = v else { return Ok(p) };
    let t = v.as_table().ok_or_else(|| ConfigError {
        key: "protocol".into(),
        value: show(v),
        rule: "must be a table".into(),
    })?;
    for (k, val) in t {
        match k.as_str() {
            "max_line_bytes" => match val.as_integer() {
                Some(n) if (1024..=(1i64 << 32)).contains(&n) => p.max_line_bytes = n as usize,
                _ => {
                    return Err(ConfigError {
                        key: "protocol.max_line_bytes".into(),
                        value: show(val),
                        rule: "must be an integer from 1024 to 4294967296".into(),
                    })
                }
            },
            _ => return Err(unknown_key("protocol", k, &["max_line_bytes"])),
        }
    }
    Ok(p)
}
