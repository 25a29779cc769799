//! Shared text formatting for the trace views: numbers, durations, headings and colour.
//!
//! One place decides how a number or a duration reads so that `show`, `steps`, `diff` and
//! `report` agree. Colour is on only when stdout is a terminal and `NO_COLOR` is unset, so
//! piped output (and every test) is plain text.

/// Display width of a section heading line (`── Title ───…`).
pub const HEADING_WIDTH: usize = 49;

/// Whether to emit ANSI colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Style {
    /// True to colour.
    pub color: bool,
}

impl Style {
    /// Plain text.
    pub const PLAIN: Style = Style { color: false };

    /// Colour as `--color`, `NO_COLOR` and `CLICOLOR_FORCE` decide for stdout.
    pub fn for_stdout() -> Style {
        Style {
            color: crate::output::color_stdout(),
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    /// Bold text (headings).
    pub fn bold(&self, text: &str) -> String {
        self.paint("1", text)
    }

    /// Dim text (secondary detail).
    pub fn dim(&self, text: &str) -> String {
        self.paint("2", text)
    }

    /// Green text (success).
    pub fn green(&self, text: &str) -> String {
        self.paint("32", text)
    }

    /// Red text (failure).
    pub fn red(&self, text: &str) -> String {
        self.paint("31", text)
    }

    /// Yellow text (warnings, runtime/untrusted).
    pub fn yellow(&self, text: &str) -> String {
        self.paint("33", text)
    }

    /// `── Title ───…` padded to [`HEADING_WIDTH`], bold when colouring.
    pub fn heading(&self, title: &str) -> String {
        let used = 3 + title.chars().count() + 1;
        let pad = HEADING_WIDTH.saturating_sub(used).max(2);
        self.bold(&format!("── {title} {}", "─".repeat(pad)))
    }

    /// `✓` in green or `✗` in red.
    pub fn mark(&self, ok: bool) -> String {
        if ok {
            self.green("✓")
        } else {
            self.red("✗")
        }
    }

    /// A status word coloured by meaning (`ok` green, failures red, others plain).
    pub fn status(&self, status: &str) -> String {
        match status {
            "ok" | "completed" | "success" => self.green(status),
            "failed" | "error" | "crashed" | "terminated" | "refused" | "canceled"
            | "timed_out" => self.red(status),
            _ => self.yellow(status),
        }
    }
}

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Milliseconds as `850ms`, `1.7s`, `2m 05s` or `1h 02m`.
pub fn duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if ms < 3_600_000 {
        format!("{}m {:02}s", ms / 60_000, (ms / 1000) % 60)
    } else {
        format!("{}h {:02}m", ms / 3_600_000, (ms / 60_000) % 60)
    }
}

/// An optional duration, `—` when absent.
pub fn opt_duration(ms: Option<u64>) -> String {
    ms.map_or_else(|| "—".to_string(), duration)
}

/// Bytes as `512 B`, `1.5 KiB`, `2.0 MiB`.
pub fn bytes(n: u64) -> String {
    if n < 1024 {
        format!("{n} B")
    } else if n < 1024 * 1024 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0))
    }
}

/// Unix milliseconds as RFC 3339 UTC with milliseconds (`2026-11-29T23:57:44.123Z`).
pub fn timestamp(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Cut `text` to at most `max` characters, ending in `…` when cut.
pub fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// A session id shortened for tables: `ses_0192…4d51`.
pub fn short_id(id: &str) -> String {
    if id.len() > 16 && id.is_ascii() {
        format!("{}…{}", &id[..8], &id[id.len() - 4..])
    } else {
        id.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_durations_read_like_upstream() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(2200), "2,200");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(duration(999), "999ms");
        assert_eq!(duration(1700), "1.7s");
        assert_eq!(duration(125_000), "2m 05s");
        assert_eq!(timestamp(1_795_992_735_682), "2026-11-29T22:52:15.682Z");
        assert_eq!(timestamp(0), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn headings_are_49_wide() {
        let h = Style::PLAIN.heading("Pulled at runtime");
        assert_eq!(h, "── Pulled at runtime ────────────────────────────");
        assert_eq!(h.chars().count(), HEADING_WIDTH);
    }
}
