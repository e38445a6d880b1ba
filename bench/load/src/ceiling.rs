//! Scenario 11: the event-write ceiling of one PostgreSQL with 1, 2 and 3 replicas writing.
//! Scenario 6's runs (background, 40 `output` events 25 ms apart) are started on the writing
//! replicas and each one is followed on the run's own replica and on another, which reads the
//! events back from the store: one writer's runs are followed on a second replica that runs
//! nothing, two or three writers follow each other's in a ring. Each step starts `runs`
//! runs spread evenly over one second and reports the events written per second (every event
//! of every run, over the step's window) and the delay of each `output` event on the follower
//! after its own replica; the ladder of a replica count stops at the first step whose p99
//! delay exceeds 100 ms or whose runs do not all arrive complete, measured twice (the delay
//! holds the recorder's 50 ms flush window by construction, so p99 sits at 60–100 ms on a
//! quiet box and one stall of the shared machine fails a step: as in scenario 7, a failed step
//! is measured once more before the ladder stops).

use std::time::Duration;

use crate::follow::{self, Measured};

/// Steps stop climbing above this p99 follow delay (ms).
pub const DELAY_P99_LIMIT_MS: f64 = 100.0;

/// Runs of a step are started over this long.
const STEP_SPREAD: Duration = Duration::from_secs(1);

/// One step of one replica count.
pub struct Step {
    pub writers: usize,
    pub measured: Measured,
}

impl Step {
    pub fn passed(&self) -> bool {
        let delay = follow::summarize(&self.measured.delays);
        delay.p99 <= DELAY_P99_LIMIT_MS && self.measured.complete == self.measured.runs
    }
}

/// Who writes and who follows: writer `i`'s runs are followed on `i + 1` (a ring among the
/// writers; one writer is followed on the second replica, which writes nothing).
pub fn pairs(replicas: &[String], writers: usize) -> Vec<(String, String)> {
    let ring = writers.max(2).min(replicas.len());
    (0..writers.min(replicas.len()))
        .map(|i| (replicas[i].clone(), replicas[(i + 1) % ring].clone()))
        .collect()
}

/// Climbs `steps` (runs per second over all writers) for `writers` writing replicas among
/// `replicas`, until a step fails; returns every step measured.
pub async fn climb(
    client: &reqwest::Client,
    replicas: &[String],
    writers: usize,
    steps: &[usize],
    mut each: impl FnMut(&Step),
) -> Vec<Step> {
    let pairs = pairs(replicas, writers);
    let mut measured = Vec::new();
    for &runs in steps {
        let mut passed = false;
        for _ in 0..2 {
            let Some(total) = step(client, &pairs, runs).await else {
                return measured;
            };
            let step = Step {
                writers,
                measured: total,
            };
            each(&step);
            passed = step.passed();
            measured.push(step);
            if passed {
                break;
            }
        }
        if !passed {
            break;
        }
    }
    measured
}

/// `runs` runs started over [`STEP_SPREAD`], shared by the writers, all followed at once.
async fn step(
    client: &reqwest::Client,
    pairs: &[(String, String)],
    runs: usize,
) -> Option<Measured> {
    let per_writer = runs.div_ceil(pairs.len().max(1));
    let parts = futures_util::future::join_all(
        pairs
            .iter()
            .map(|(a, b)| follow::measure(client, (a, b), "follow", per_writer, 1, STEP_SPREAD)),
    )
    .await;
    let mut parts = parts.into_iter();
    let mut total = parts.next()?;
    for part in parts {
        total.absorb(part);
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_writer_is_followed_on_the_second_replica_and_more_in_a_ring() {
        let replicas: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let names = |w| {
            pairs(&replicas, w)
                .into_iter()
                .map(|(a, b)| format!("{a}>{b}"))
                .collect::<Vec<_>>()
        };
        assert_eq!(names(1), ["a>b"]);
        assert_eq!(names(2), ["a>b", "b>a"]);
        assert_eq!(names(3), ["a>b", "b>c", "c>a"]);
    }
}
