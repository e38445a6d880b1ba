//! The printed result: markdown tables with the direct and through-agentd numbers side by side,
//! the added time and the ratio, and the targets of issue 11 checked where they apply.

use crate::load::Summary;
use crate::mock::Shape;

#[derive(Default)]
pub struct Report {
    rates: Vec<String>,
    added: Vec<String>,
    summary: Vec<String>,
    follow: Vec<String>,
    notes: Vec<String>,
}

fn ms(value: f64) -> String {
    format!("{value:.3}")
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}

impl Report {
    pub fn note(&mut self, line: String) {
        eprintln!("{line}");
        self.notes.push(line);
    }

    pub fn rate_row(
        &mut self,
        target: &str,
        rate: f64,
        s: &Summary,
        lag_p99: f64,
        sustained: bool,
    ) {
        let line = format!(
            "| {rate} | {target} | {} | {} | {} | {} | {}/{} | {} | {} |",
            ms(s.p50),
            ms(s.p90),
            ms(s.p99),
            ms(s.max),
            s.errors,
            s.count,
            ms(lag_p99),
            if sustained { "yes" } else { "no" }
        );
        eprintln!("{line}");
        self.rates.push(line);
    }

    /// `target`'s latency beside the direct one at `rate`; agentd's at 1000 req/s is checked.
    pub fn added_row(&mut self, target: &str, rate: f64, direct: &Summary, through: &Summary) {
        let line = format!(
            "| {rate} | {target} | {} | {} | {:.2}x | {:.2}x |",
            ms(through.p50 - direct.p50),
            ms(through.p99 - direct.p99),
            through.p50 / direct.p50,
            through.p99 / direct.p99
        );
        self.added.push(line);
        if target == "agentd" && rate == 1000.0 {
            let (p50, p99) = (through.p50 - direct.p50, through.p99 - direct.p99);
            self.summary.push(format!(
                "| 1. added p50 at 1000 req/s | {} ms | ≤ 0.3 ms | {} |",
                ms(p50),
                verdict(p50 <= 0.3)
            ));
            self.summary.push(format!(
                "| 1. added p99 at 1000 req/s | {} ms | ≤ 2 ms | {} |",
                ms(p99),
                verdict(p99 <= 2.0)
            ));
        }
    }

    /// The highest sustained rate of each target of scenario 1 (`direct` first): agentd's
    /// against the direct rate is the target; the others are context (the relay is the ceiling
    /// of any proxy on this box, so agentd / relay is what agentd's own work costs).
    pub fn throughput(&mut self, maxima: &[(&str, f64)]) {
        let rate_of = |name: &str| maxima.iter().find(|(n, _)| *n == name).map_or(0.0, |m| m.1);
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b * 100.0 } else { f64::NAN };
        let (direct, agentd, relay) = (rate_of("direct"), rate_of("agentd"), rate_of("relay"));
        self.summary.push(format!(
            "| 1. max sustained rate, agentd / direct | {agentd} / {direct} req/s = {:.0} % | ≥ 50 % | {} |",
            ratio(agentd, direct), verdict(agentd >= 0.5 * direct)));
        for (name, max) in maxima
            .iter()
            .filter(|(n, _)| !matches!(*n, "direct" | "agentd"))
        {
            self.summary.push(format!(
                "| 1. max sustained rate, {name} / direct | {max} / {direct} req/s = {:.0} % | — | |",
                ratio(*max, direct)
            ));
        }
        self.summary.push(format!(
            "| 1. max sustained rate, agentd / relay | {agentd} / {relay} req/s = {:.0} % | — | |",
            ratio(agentd, relay)
        ));
    }

    /// agentd (this build) against another build of scenario 1 (`--compare`).
    pub fn compare_row(&mut self, name: &str, max: f64, agentd: f64) {
        self.summary.push(format!(
            "| 1. max sustained rate, agentd / {name} | {agentd} / {max} req/s = {:.2} | ≥ 1 (no slower) | {} |",
            if max > 0.0 { agentd / max } else { f64::NAN },
            verdict(agentd >= max)
        ));
    }

    /// Scenario 6: the delay of every `output` event on replica B after replica A.
    pub fn follow_rows(&mut self, m: &crate::follow::Measured, spread: std::time::Duration) {
        let d = crate::follow::summarize(&m.delays);
        let burst = crate::follow::summarize(&m.burst_max);
        let line = format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {}/{} |",
            m.concurrent,
            m.runs,
            d.count,
            ms(d.p50),
            ms(d.p90),
            ms(d.p99),
            ms(d.max),
            ms(burst.p50),
            m.complete,
            m.runs
        );
        eprintln!("{line}");
        self.follow.push(line);
        let case = if m.concurrent == 1 {
            "1 run at a time".to_string()
        } else {
            format!("{} runs at once", m.concurrent)
        };
        self.summary.push(format!(
            "| 6. follow delay B − A, p99, {case} | {} ms | ≤ 100 ms | {} |",
            ms(d.p99),
            verdict(d.p99 <= 100.0)
        ));
        self.summary.push(format!(
            "| 6. follow delay B − A, p50, {case} | {} ms | ≤ 5 ms (aim) | {} |",
            ms(d.p50),
            verdict(d.p50 <= 5.0)
        ));
        self.summary.push(format!(
            "| 6. runs B followed with every seq once, in order, equal to A, {case} | {}/{} | all | {} |",
            m.complete,
            m.runs,
            verdict(m.complete == m.runs)
        ));
        self.note(format!(
            "6. {case} ({} runs, {} at a time, each batch started over {} ms): output events per run {}–{}; followers attached at most {:.1} ms after the 202, first output at A at least {:.1} ms after it ({})",
            m.runs,
            m.concurrent,
            spread.as_millis(),
            m.output_events_per_run.0,
            m.output_events_per_run.1,
            m.attach_max_ms,
            m.first_output_min_ms,
            if m.first_output_min_ms > m.attach_max_ms {
                "both followers were attached before any output existed"
            } else {
                "SOME FOLLOWER ATTACHED AFTER OUTPUT BEGAN: A's times include replay"
            }
        ));
        if m.reformatted > 0 {
            self.note(format!(
                "6. {case}: {} events came to B with the same JSON as on A but other bytes (key order, spaces: B reads them back from the store)",
                m.reformatted
            ));
        }
        for defect in m.defects.iter().take(20) {
            self.note(format!("6. {case}: {defect}"));
        }
        if m.defects.len() > 20 {
            self.note(format!("6. {case}: … {} defects in all", m.defects.len()));
        }
    }

    pub fn stream_rows(
        &mut self,
        shape: &Shape,
        rate: f64,
        first: (&Summary, &Summary),
        last: (&Summary, &Summary),
    ) {
        let added_first = first.1.p50 - first.0.p50;
        self.summary.push(format!(
            "| 2. added time to first content, p50 (p99) | {} ({}) ms | ≤ 1 ms | {} |",
            ms(added_first),
            ms(first.1.p99 - first.0.p99),
            verdict(added_first <= 1.0)
        ));
        self.summary.push(format!(
            "| 2. added time to last byte, p50 (p99) | {} ({}) ms | — | |",
            ms(last.1.p50 - last.0.p50),
            ms(last.1.p99 - last.0.p99)
        ));
        self.notes.push(format!(
            "2. streaming `{}` at {rate}/s: first content direct p50 {} p99 {}, agentd p50 {} p99 {}; last byte direct p50 {} p99 {}, agentd p50 {} p99 {}; errors direct {} agentd {}",
            shape.model(), ms(first.0.p50), ms(first.0.p99), ms(first.1.p50), ms(first.1.p99),
            ms(last.0.p50), ms(last.0.p99), ms(last.1.p50), ms(last.1.p99), last.0.errors, last.1.errors));
    }

    pub fn open_stream_row(
        &mut self,
        target: &str,
        count: usize,
        completed: usize,
        s: &Summary,
        rss: Option<(u64, u64)>,
    ) {
        let mut line = format!(
            "3. {count} open streams {target}: {completed} completed, last byte p50 {} max {} ms",
            ms(s.p50),
            ms(s.max)
        );
        if let Some((baseline, peak)) = rss {
            let per_stream = (peak.saturating_sub(baseline)) as f64 / count as f64;
            line.push_str(&format!(
                "; agentd RSS {baseline} KiB idle → {peak} KiB with all open"
            ));
            self.summary.push(format!(
                "| 3. agentd RSS per open stream ({completed}/{count} completed) | {per_stream:.1} KiB | ≤ 64 KiB | {} |",
                verdict(per_stream <= 64.0 && completed == count)));
        }
        eprintln!("{line}");
        self.notes.push(line);
    }

    pub fn turn_rows(
        &mut self,
        turns: usize,
        runs: &Summary,
        direct: &Summary,
        tool: Option<&Summary>,
        exported_ms: Option<f64>,
    ) {
        let tool_p50 = tool.map_or(0.0, |t| t.p50);
        let per_turn = (runs.p50 - direct.p50 - (turns - 1) as f64 * tool_p50) / turns as f64;
        self.notes.push(format!(
            "4. {turns}-turn run p50 {} ms (errors {}/{}); the same {turns} upstream calls direct p50 {} ms; MCP echo over stdio p50 {} ms; agentd_overhead_seconds mean per run {}",
            ms(runs.p50), runs.errors, runs.count, ms(direct.p50), ms(tool_p50),
            exported_ms.map_or("n/a".into(), |v| format!("{v:.3} ms"))));
        self.summary.push(format!(
            "| 4. agentd time per turn, p50 (run − upstream − tool) / {turns} | {} ms | ≤ 1 ms | {} |",
            ms(per_turn), verdict(per_turn <= 1.0)));
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str("## Targets\n\n| measure | value | target | |\n|---|---|---|---|\n");
        for line in &self.summary {
            out.push_str(line);
            out.push('\n');
        }
        out.push_str("\n## 1. Non-streaming single turn, open loop (latency in ms)\n\n");
        out.push_str("| req/s | target | p50 | p90 | p99 | max | errors | generator lag p99 | sustained |\n|---|---|---|---|---|---|---|---|---|\n");
        for line in &self.rates {
            out.push_str(line);
            out.push('\n');
        }
        out.push_str("\n| req/s | target | added p50 ms | added p99 ms | p50 ratio | p99 ratio |\n|---|---|---|---|---|---|\n");
        for line in &self.added {
            out.push_str(line);
            out.push('\n');
        }
        if !self.follow.is_empty() {
            out.push_str(
                "\n## 6. Cross-replica follow: delay of each `output` event on B after A (ms)\n\n",
            );
            out.push_str("| runs followed at once | runs | output events | p50 | p90 | p99 | max | p50 of each B batch's largest delay | runs complete on B |\n|---|---|---|---|---|---|---|---|---|\n");
            for line in &self.follow {
                out.push_str(line);
                out.push('\n');
            }
        }
        out.push_str("\n## Details\n\n");
        for line in &self.notes {
            out.push_str("- ");
            out.push_str(line.trim_start());
            out.push('\n');
        }
        out
    }
}
