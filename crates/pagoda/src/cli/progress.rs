//! Progress for long runs: a bar with live throughput on a terminal, plain periodic lines
//! otherwise (CI logs, pipes).

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// A progress reporter over `total` units.
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
    label: String,
    unit: String,
    total: u64,
    start: Instant,
    last_line: Instant,
    done: u64,
    message: String,
}

impl Progress {
    /// Starts a reporter. `unit` names what is counted ("writes", "cycles").
    pub fn new(label: &str, unit: &str, total: u64) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::new(total);
            let style = ProgressStyle::with_template(&format!(
                "{{prefix}} [{{elapsed_precise}}] {{wide_bar}} {{percent}}% {{human_pos}}/{{human_len}} {unit} \
                 ({{per_sec}}, eta {{eta}}) {{msg}}"
            ))
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            b.set_style(style);
            b.set_prefix(label.to_string());
            b
        });
        let now = Instant::now();
        Self {
            bar,
            label: label.to_string(),
            unit: unit.to_string(),
            total,
            start: now,
            last_line: now,
            done: 0,
            message: String::new(),
        }
    }

    /// Sets the absolute position.
    pub fn set(&mut self, done: u64) {
        self.done = done;
        if let Some(b) = &self.bar {
            b.set_position(done);
        } else if self.last_line.elapsed() >= Duration::from_secs(5) {
            self.last_line = Instant::now();
            eprintln!("{}", self.line());
        }
    }

    /// Sets the position and a free-form status (e.g. live throughput when the bar counts
    /// seconds).
    pub fn set_with_message(&mut self, done: u64, message: String) {
        if let Some(b) = &self.bar {
            b.set_message(message.clone());
        }
        self.message = message;
        self.set(done);
    }

    fn line(&self) -> String {
        let secs = self.start.elapsed().as_secs_f64().max(1e-9);
        let rate = self.done as f64 / secs;
        let pct = if self.total == 0 {
            100.0
        } else {
            100.0 * self.done as f64 / self.total as f64
        };
        let eta = if rate > 0.0 {
            (self.total.saturating_sub(self.done)) as f64 / rate
        } else {
            0.0
        };
        // A bar that counts seconds (timed runs) has no rate of its own: the message has it.
        let rate = if self.unit == "s" {
            String::new()
        } else {
            format!("{rate:.0} {}/s, ", self.unit)
        };
        format!(
            "{}: {pct:.0}% {}/{} {} ({rate}elapsed {secs:.0}s, eta {eta:.0}s) {}",
            self.label, self.done, self.total, self.unit, self.message
        )
    }

    /// Ends the bar (clearing it on a terminal; printing a last line otherwise).
    pub fn finish(self) {
        match &self.bar {
            Some(b) => b.finish_and_clear(),
            None => eprintln!("{}", self.line()),
        }
    }
}
