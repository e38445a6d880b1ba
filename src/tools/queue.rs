//! Tool queues (`queues.<name>.concurrent`, contract §1): a semaphore per queue bounding how
//! many calls of the MCP servers and REST tools bound to it run at once, with the depth, slots
//! in use and wait time exported as `ai_agent_queue_*`. The `default` queue always exists.
//! This module only hands out slots; it never runs a tool.

use std::collections::BTreeMap;
use std::sync::Arc;

use prometheus::{Histogram, IntGauge};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::config::QueueConfig;
use crate::config::tools::DEFAULT_QUEUE;
use crate::telemetry::Metrics;

/// Upper bound of the implicit `default` queue's concurrency.
const DEFAULT_QUEUE_MAX: usize = 64;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum QueueError {
    #[error("queue {0:?} is not defined in `queues`")]
    Missing(String),
}

/// Every configured queue, `default` included.
#[derive(Clone, Default)]
pub struct ToolQueues {
    queues: BTreeMap<String, Arc<ToolQueue>>,
}

impl ToolQueues {
    /// Builds the configured queues and adds `default` (min(64, max(1, 2 × cores))) unless the
    /// configuration defines it.
    pub fn new(config: &BTreeMap<String, QueueConfig>, metrics: &Metrics) -> Self {
        let mut queues: BTreeMap<String, Arc<ToolQueue>> = config
            .iter()
            .map(|(name, queue)| {
                let queue = ToolQueue::new(name, queue.concurrent, metrics);
                (name.clone(), Arc::new(queue))
            })
            .collect();
        queues.entry(DEFAULT_QUEUE.to_string()).or_insert_with(|| {
            Arc::new(ToolQueue::new(
                DEFAULT_QUEUE,
                default_concurrency(),
                metrics,
            ))
        });
        Self { queues }
    }

    pub fn get(&self, name: &str) -> Result<Arc<ToolQueue>, QueueError> {
        self.queues
            .get(name)
            .cloned()
            .ok_or_else(|| QueueError::Missing(name.to_string()))
    }
}

/// min(64, max(1, 2 × available cores)).
pub fn default_concurrency() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    (cores * 2).clamp(1, DEFAULT_QUEUE_MAX)
}

/// One queue: a fair (FIFO) semaphore plus its metric handles.
pub struct ToolQueue {
    name: String,
    capacity: usize,
    slots: Arc<Semaphore>,
    depth: IntGauge,
    in_use: IntGauge,
    wait_ms: Histogram,
}

impl ToolQueue {
    pub fn new(name: &str, capacity: usize, metrics: &Metrics) -> Self {
        let capacity = capacity.max(1);
        Self {
            name: name.to_string(),
            capacity,
            slots: Arc::new(Semaphore::new(capacity)),
            depth: metrics.queue_depth.with_label_values(&[name]),
            in_use: metrics.queue_in_use.with_label_values(&[name]),
            wait_ms: metrics.queue_wait_duration_ms.with_label_values(&[name]),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Waits for a slot; the slot is given back when the returned guard drops. A caller that
    /// gives up (its future is dropped) leaves the queue without taking a slot.
    pub async fn acquire(&self) -> QueueSlot {
        let started = Instant::now();
        let waiting = GaugeHold::new(&self.depth);
        // The semaphore is owned here and never closed, so acquiring cannot fail; should it
        // ever, the call runs unqueued rather than failing.
        let permit = Arc::clone(&self.slots).acquire_owned().await.ok();
        drop(waiting);
        self.wait_ms
            .observe(started.elapsed().as_secs_f64() * 1000.0);
        QueueSlot {
            _permit: permit,
            _in_use: GaugeHold::new(&self.in_use),
        }
    }
}

/// A held queue slot.
pub struct QueueSlot {
    _permit: Option<OwnedSemaphorePermit>,
    _in_use: GaugeHold,
}

/// Holds a gauge up by one while it lives.
struct GaugeHold(IntGauge);

impl GaugeHold {
    fn new(gauge: &IntGauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for GaugeHold {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn queues(config: serde_json::Value) -> (ToolQueues, Metrics) {
        let metrics = Metrics::new().expect("metrics");
        let config: BTreeMap<String, QueueConfig> =
            serde_json::from_value(config).expect("queue config");
        (ToolQueues::new(&config, &metrics), metrics)
    }

    #[test]
    fn default_is_added_and_missing_queues_are_named() {
        let (queues, _) = queues(serde_json::json!({"slow": {"concurrent": 2}}));
        let default = queues.get("default").expect("default exists");
        assert_eq!(default.capacity(), default_concurrency());
        assert!((1..=64).contains(&default.capacity()));
        assert_eq!(queues.get("slow").expect("slow").capacity(), 2);
        assert_eq!(
            queues.get("nope").err(),
            Some(QueueError::Missing("nope".into()))
        );
    }

    #[test]
    fn a_configured_default_wins() {
        let (queues, _) = queues(serde_json::json!({"default": {"concurrent": 3}}));
        assert_eq!(queues.get("default").expect("default").capacity(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn at_capacity_callers_wait_and_are_measured() {
        let (queues, metrics) = queues(serde_json::json!({"one": {"concurrent": 1}}));
        let queue = queues.get("one").expect("queue");
        let first = queue.acquire().await;
        let waiter = {
            let queue = Arc::clone(&queue);
            tokio::spawn(async move {
                let _slot = queue.acquire().await;
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        let text = metrics.render();
        assert!(
            text.contains(r#"ai_agent_queue_depth{queue="one"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"ai_agent_queue_in_use{queue="one"} 1"#),
            "{text}"
        );
        assert!(
            !waiter.is_finished(),
            "the second caller waits for the slot"
        );
        drop(first);
        waiter.await.expect("waiter");
        let text = metrics.render();
        assert!(
            text.contains(r#"ai_agent_queue_depth{queue="one"} 0"#),
            "{text}"
        );
        assert!(
            text.contains(r#"ai_agent_queue_in_use{queue="one"} 0"#),
            "{text}"
        );
        assert!(
            text.contains(r#"ai_agent_queue_wait_duration_ms_count{queue="one"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"ai_agent_queue_wait_duration_ms_bucket{queue="one",le="10"} 1"#)
                && text
                    .contains(r#"ai_agent_queue_wait_duration_ms_bucket{queue="one",le="50"} 2"#),
            "the first caller did not wait, the second waited 50 ms: {text}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_caller_giving_up_leaves_the_queue() {
        let (queues, metrics) = queues(serde_json::json!({"one": {"concurrent": 1}}));
        let queue = queues.get("one").expect("queue");
        let _held = queue.acquire().await;
        let gave_up = tokio::time::timeout(Duration::from_millis(10), queue.acquire()).await;
        assert!(gave_up.is_err());
        assert!(
            metrics
                .render()
                .contains(r#"ai_agent_queue_depth{queue="one"} 0"#)
        );
    }
}
