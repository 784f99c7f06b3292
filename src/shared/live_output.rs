//! What a running program prints, handed to a caller that shows progress
//! ([`ToolContext::report_progress`]): the terminal's foreground commands and
//! execute_code's scripts, so an MCP client sees both the same way.

use hermes_runtime::ToolContext;
use std::time::{Duration, Instant};

/// Output as it arrives, passed on in whole lines, without a marker line the program's
/// runner printed, ANSI codes or secrets (as the result will be), at most every
/// [`LiveOutput::EVERY`] and [`LiveOutput::MAX_CHARS`] at a time. Pushing `""` now and
/// then lets lines waiting for their batch go once it is due.
pub struct LiveOutput<'a> {
    ctx: &'a ToolContext,
    /// What the output is redacted against (a command's own text is not a leak).
    command: &'a str,
    marker: Option<String>,
    partial: String,
    lines: String,
    sent_at: Instant,
}

impl<'a> LiveOutput<'a> {
    pub const EVERY: Duration = Duration::from_millis(250);
    pub const MAX_CHARS: usize = 4000;

    /// `marker`: lines holding it are the runner's own bookkeeping and are left out.
    pub fn new(ctx: &'a ToolContext, command: &'a str, marker: Option<String>) -> LiveOutput<'a> {
        LiveOutput {
            ctx,
            command,
            marker,
            partial: String::new(),
            lines: String::new(),
            sent_at: Instant::now(),
        }
    }

    pub fn push(&mut self, text: &str) {
        if !self.ctx.reports_progress() {
            return;
        }
        self.partial.push_str(text);
        while let Some(end) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=end).collect();
            self.take(line);
        }
        // A line that never ends (a progress bar redrawn with \r) goes as it is.
        if self.partial.len() > Self::MAX_CHARS {
            let line = std::mem::take(&mut self.partial);
            self.take(line);
        }
        if !self.lines.is_empty() && self.sent_at.elapsed() >= Self::EVERY {
            self.flush();
        }
    }

    fn take(&mut self, line: String) {
        let marked = self.marker.as_ref().is_some_and(|m| line.contains(m));
        if !marked && self.lines.len() < Self::MAX_CHARS {
            self.lines.push_str(&line);
        }
    }

    /// Sends the whole lines held back now (at the end of the output).
    pub fn flush(&mut self) {
        if self.lines.is_empty() {
            return;
        }
        let lines = std::mem::take(&mut self.lines);
        let text = hermes_command_guard::strip_ansi(&lines);
        let text = hermes_environments::output::redact(text.trim_end(), self.command);
        let clipped: String = text.chars().take(Self::MAX_CHARS).collect();
        self.ctx.report_progress(&clipped);
        self.sent_at = Instant::now();
    }
}
