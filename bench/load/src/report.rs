//! The printed result: markdown tables with the direct and through-agentd numbers side by side,
//! the added time and the ratio, and the targets of issues 11 and 27 checked where they apply.

use crate::load::Summary;
use crate::mock::Shape;

#[derive(Default)]
pub struct Report {
    rates: Vec<String>,
    added: Vec<String>,
    summary: Vec<String>,
    follow: Vec<String>,
    capacity: Vec<String>,
    closed: Vec<String>,
    head_of_line: Vec<String>,
    ceiling: Vec<String>,
    memory: Vec<String>,
    notes: Vec<String>,
}

fn percent(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b * 100.0 } else { f64::NAN }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// CPUs of this machine.
fn cpus() -> f64 {
    std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
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
    /// against the relay's is the target (issue 27: ≥ 70 %; the relay is the ceiling of any
    /// proxy on this box, so agentd / relay is what agentd's own work costs); agentd / direct
    /// was round one's target and stays as context.
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
            "| 1. max sustained rate, agentd / relay | {agentd} / {relay} req/s = {:.0} % | ≥ 70 % | {} |",
            ratio(agentd, relay),
            verdict(agentd >= 0.7 * relay)
        ));
        if maxima.iter().any(|(n, _)| *n == "nginx") {
            let nginx = rate_of("nginx");
            self.summary.push(format!(
                "| 1. max sustained rate, agentd / nginx | {agentd} / {nginx} req/s = {:.0} % | — | |",
                ratio(agentd, nginx)
            ));
        }
    }

    /// Scenario 7: one step of one target.
    pub fn capacity_row(
        &mut self,
        target: &str,
        step: &crate::capacity::Step,
        gap: std::time::Duration,
    ) {
        let expected = step.streams as f64 * 1000.0 / gap.as_millis().max(1) as f64;
        let per_chunk = |cpu: f64| {
            if step.chunks > 0 {
                format!("{:.1}", cpu * 1e6 / step.chunks as f64)
            } else {
                "—".into()
            }
        };
        let line = format!(
            "| {target} | {} | {:.0} / {expected:.0} | {} | {} | {} | {}/{} | {} | {} | {} |",
            step.streams,
            step.chunks_per_second(),
            ms(step.gap_p50),
            ms(step.gap_p99),
            ms(step.gap_max),
            step.failed,
            step.started,
            step.server_cpu.map_or("—".into(), per_chunk),
            per_chunk(step.generator_cpu),
            if step.passed(expected) { "yes" } else { "no" }
        );
        eprintln!("{line}");
        self.capacity.push(line);
    }

    /// Scenario 7's headline: each target's highest passing N, agentd against relay and nginx.
    pub fn capacity_summary(&mut self, best: &[(&str, usize)], highest_step: usize) {
        let of = |name: &str| best.iter().find(|(n, _)| *n == name).map(|b| b.1);
        let agentd = of("agentd").unwrap_or(0);
        let shown = |n: usize| {
            if n == highest_step {
                format!("≥ {n}")
            } else {
                n.to_string()
            }
        };
        for (name, n) in best {
            self.notes.push(format!(
                "7. {name}: highest passing step {} streams",
                shown(*n)
            ));
        }
        for peer in ["relay", "nginx"] {
            if let Some(n) = of(peer) {
                let ratio = percent(agentd as f64, n as f64);
                self.summary.push(format!(
                    "| 7. streaming capacity (50 chunks/s each, gap p99 ≤ 100 ms), agentd / {peer} | {} / {} streams = {ratio:.0} % | ≥ 50 % | {} |",
                    shown(agentd),
                    shown(n),
                    verdict(ratio >= 50.0)
                ));
            }
        }
    }

    /// Scenario 8: one target of one case.
    pub fn closed_row(
        &mut self,
        case: &str,
        target: &str,
        m: &crate::load::Closed,
        (cpu, driver_cpu): (Option<f64>, f64),
    ) {
        let total = m.sent as f64;
        let per_request = |cpu: f64| {
            if total > 0.0 {
                format!("{:.0}", cpu * 1e6 / total)
            } else {
                "—".into()
            }
        };
        let line = format!(
            "| {case} | {target} | {} | {:.0} | {} | {} | {} | {}/{} | {} | {} |",
            m.connections,
            m.per_second(),
            ms(m.latency.p50),
            ms(m.latency.p99),
            ms(m.latency.max),
            m.errors,
            m.completed + m.errors,
            cpu.map_or("—".into(), per_request),
            per_request(driver_cpu),
        );
        eprintln!("{line}");
        self.closed.push(line);
    }

    /// Scenario 8's ratios: agentd against nginx (the target) and the relay.
    pub fn closed_summary(&mut self, case: &str, rates: &[(&str, f64)]) {
        let of = |name: &str| rates.iter().find(|(n, _)| *n == name).map(|r| r.1);
        let agentd = of("agentd").unwrap_or(0.0);
        for (peer, target) in [("nginx", Some(50.0)), ("relay", None)] {
            let Some(rate) = of(peer) else { continue };
            let ratio = percent(agentd, rate);
            self.summary.push(format!(
                "| 8. closed loop, {case}, agentd / {peer} | {agentd:.0} / {rate:.0} req/s = {ratio:.0} % | {} |{} |",
                target.map_or("—".into(), |t| format!("≥ {t:.0} %")),
                target.map_or(String::new(), |t| format!(" {}", verdict(ratio >= t)))
            ));
        }
    }

    /// Scenario 11: one step of one replica count; `cpu` is the CPU seconds of the replicas,
    /// of PostgreSQL and of the whole machine in it, and its wall-clock seconds.
    pub fn ceiling_row(&mut self, step: &crate::ceiling::Step, cpu: [f64; 4]) {
        let m = &step.measured;
        let delay = crate::follow::summarize(&m.delays);
        let line = format!(
            "| {} | {} | {:.0} | {} | {} | {} | {}/{} | {:.2} / {:.2} / {:.2} of {:.2} | {} |",
            step.writers,
            m.runs,
            m.events_per_second(),
            ms(delay.p50),
            ms(delay.p99),
            ms(delay.max),
            m.complete,
            m.runs,
            cpu[0],
            cpu[1],
            cpu[2],
            cpu[3] * cpus(),
            if step.passed() { "yes" } else { "no" }
        );
        eprintln!("{line}");
        self.ceiling.push(line);
        for defect in m.defects.iter().take(3) {
            self.notes.push(format!(
                "11. {} writer(s), {} runs: {defect}",
                step.writers, m.runs
            ));
        }
    }

    /// Scenario 11's headline: the highest passing step of each replica count.
    pub fn ceiling_summary(&mut self, writers: usize, steps: &[crate::ceiling::Step]) {
        let best = steps
            .iter()
            .filter(|s| s.passed())
            .max_by_key(|s| s.measured.runs);
        let failed = steps.last().filter(|s| !s.passed());
        self.summary.push(format!(
            "| 11. event-write ceiling, {writers} replica(s) writing to one PostgreSQL: highest step with follow p99 ≤ 100 ms | {} | — | {} |",
            best.map_or("none passed".into(), |s| format!(
                "{:.0} events/s ({} runs/s)",
                s.measured.events_per_second(),
                s.measured.runs
            )),
            failed.map_or("every step passed".into(), |s| format!(
                "next step {:.0} events/s: p99 {} ms",
                s.measured.events_per_second(),
                ms(crate::follow::summarize(&s.measured.delays).p99)
            ))
        ));
    }

    /// Scenario 10: one target, its small streams alone and beside the large requests.
    pub fn head_of_line_rows(&mut self, m: &crate::head_of_line::Measured, words: usize) {
        let large = format!(
            "{} answered, {} errors; p50 {} / p99 {} ms; {} ms CPU each",
            m.large.count - m.large.errors,
            m.large.errors,
            ms(m.large.p50),
            ms(m.large.p99),
            m.cpu_per_large
                .map_or("—".into(), |cpu| format!("{:.1}", cpu * 1e3))
        );
        for (case, step, large) in [
            ("alone", &m.alone, "—".to_string()),
            ("with large requests", &m.with_large, large),
        ] {
            let line = format!(
                "| {} | {case} | {} | {:.0} | {} | {} | {} | {}/{} | {large} |",
                m.target,
                step.streams,
                step.chunks_per_second(),
                ms(step.gap_p50),
                ms(step.gap_p99),
                ms(step.gap_max),
                step.failed,
                step.started,
            );
            eprintln!("{line}");
            self.head_of_line.push(line);
        }
        self.summary.push(format!(
            "| 10. head-of-line, {}: small streams' gap p99 alone → beside ~{words}-token requests | {} → {} ms (max {} → {}) | ≤ 100 ms, no failed stream | {} |",
            m.target,
            ms(m.alone.gap_p99),
            ms(m.with_large.gap_p99),
            ms(m.alone.gap_max),
            ms(m.with_large.gap_max),
            verdict(m.with_large.gap_p99 <= crate::capacity::GAP_P99_LIMIT_MS && m.with_large.failed == 0)
        ));
    }

    /// Scenario 9 (a): a fresh agentd's RSS, 2 s after /health answered.
    pub fn idle_rss(&mut self, kib: u64) {
        self.summary.push(format!(
            "| 9. idle RSS of a fresh agentd | {kib} KiB ({}) | ≤ 30 MiB | {} |",
            mib(kib),
            verdict(kib <= 30 * 1024)
        ));
    }

    /// Scenario 9 (b): agentd's RSS through the soak against its baseline, errors and p99 per
    /// bucket.
    pub fn soak(
        &mut self,
        soak: &crate::scenarios::Soak,
        rss: &[(std::time::Duration, u64)],
        buckets: &[(std::time::Duration, Summary, f64)],
    ) {
        let baseline = rss
            .iter()
            .find(|(at, _)| *at >= soak.baseline_after)
            .or(rss.first())
            .map(|(at, kib)| (*at, *kib));
        let samples = rss
            .iter()
            .map(|(at, kib)| format!("{}s {kib}", at.as_secs()))
            .collect::<Vec<_>>()
            .join(", ");
        self.memory.push(format!(
            "9. soak at {} req/s for {} s, agentd RSS (KiB) every {} s: {samples}",
            soak.rate,
            soak.seconds,
            soak.sample_every.as_secs()
        ));
        let errors: usize = buckets.iter().map(|(_, s, _)| s.errors).sum();
        let sent: usize = buckets.iter().map(|(_, s, _)| s.count).sum();
        if let Some((at, base)) = baseline {
            let after: Vec<u64> = rss
                .iter()
                .filter(|(t, _)| *t >= at)
                .map(|(_, kib)| *kib)
                .collect();
            let (min, max) = (
                after.iter().copied().min().unwrap_or(base),
                after.iter().copied().max().unwrap_or(base),
            );
            let deviation = after
                .iter()
                .map(|&kib| (kib as f64 - base as f64) / base.max(1) as f64 * 100.0)
                .fold(
                    0.0f64,
                    |worst, d| if d.abs() > worst.abs() { d } else { worst },
                );
            self.memory.push(format!(
                "9. baseline {base} KiB (the sample at {} s); after it min {min} KiB, max {max} KiB; largest deviation {deviation:+.1} %",
                at.as_secs()
            ));
            self.summary.push(format!(
                "| 9. soak RSS, largest deviation from the baseline ({base} KiB at {} s; {errors}/{sent} errors) | {deviation:+.1} % | ± 5 % | {} |",
                at.as_secs(),
                verdict(deviation.abs() <= 5.0 && errors == 0)
            ));
        } else {
            self.memory
                .push("9. no RSS sample (the soak was shorter than one sampling interval)".into());
        }
        self.memory
            .push("| until | requests | errors | p50 ms | p99 ms | max ms | generator lag p99 ms |\n|---|---|---|---|---|---|---|".into());
        for (at, s, lag) in buckets {
            self.memory.push(format!(
                "| {:.0} s | {} | {} | {} | {} | {} | {} |",
                at.as_secs_f64(),
                s.count,
                s.errors,
                ms(s.p50),
                ms(s.p99),
                ms(s.max),
                ms(*lag)
            ));
        }
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
                "| 3. agentd RSS per open idle stream ({completed}/{count} completed) | {per_stream:.1} KiB | ≤ 32 KiB | {} |",
                verdict(per_stream <= 32.0 && completed == count)));
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
        if !self.rates.is_empty() {
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
        }
        let tables: [(&str, &str, &[String]); 5] = [
            (
                "6. Cross-replica follow: delay of each `output` event on B after A (ms)",
                "| runs followed at once | runs | output events | p50 | p90 | p99 | max | p50 of each B batch's largest delay | runs complete on B |",
                &self.follow,
            ),
            (
                "7. Streaming capacity: N streams of 50 chunks/s each (gaps between content frames in ms)",
                "| target | streams | chunks/s delivered / expected | gap p50 | gap p99 | gap max | failed/started streams | server CPU µs per chunk | generator CPU µs per chunk | passed |",
                &self.capacity,
            ),
            (
                "8. Closed loop (latency in ms)",
                "| case | target | connections | req/s | p50 | p99 | max | errors | server CPU µs per request | driver CPU µs per request |",
                &self.closed,
            ),
            (
                "10. Head-of-line: paced small streams alone and beside large requests (gaps in ms)",
                "| target | case | streams | chunks/s delivered | gap p50 | gap p99 | gap max | failed/started streams | large requests in the window |",
                &self.head_of_line,
            ),
            (
                "11. Event-write ceiling of one PostgreSQL (follow delay on another replica, ms)",
                "| replicas writing | runs started in 1 s | events written/s | delay p50 | delay p99 | delay max | runs complete | CPU s: replicas / PostgreSQL / machine, of the machine's | passed |",
                &self.ceiling,
            ),
        ];
        for (title, header, rows) in tables {
            if !rows.is_empty() {
                out.push_str(&format!("\n## {title}\n\n"));
                push_table(&mut out, header, rows);
            }
        }
        if !self.memory.is_empty() {
            out.push_str("\n## 9. Memory soak\n\n");
            for line in &self.memory {
                out.push_str(line);
                out.push_str(if line.starts_with('|') { "\n" } else { "\n\n" });
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

/// A markdown table: `header`, its separator row, then `rows`.
fn push_table(out: &mut String, header: &str, rows: &[String]) {
    out.push_str(header);
    out.push('\n');
    let columns = header.matches('|').count().saturating_sub(1);
    out.push_str(&"|---".repeat(columns));
    out.push_str("|\n");
    for line in rows {
        out.push_str(line);
        out.push('\n');
    }
}
