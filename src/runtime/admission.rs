//! How many sessions run at once (`server.maxConcurrentSessions`) and how many may wait for a
//! slot (`server.maxQueuedSessions`). Past both, a request is refused at once; a request whose
//! client leaves while it waits gives its place back (its future is dropped).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A running session's slot; dropping it lets the next waiting request in.
pub struct SessionSlot {
    _permit: OwnedSemaphorePermit,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{running} sessions are running and {queued} are waiting, the configured maximum")]
pub struct Overloaded {
    pub running: usize,
    pub queued: usize,
}

pub struct Admission {
    slots: Arc<Semaphore>,
    max_running: usize,
    waiting: AtomicUsize,
    max_waiting: usize,
}

/// Counts a waiter for as long as it waits.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Admission {
    pub fn new(max_running: usize, max_waiting: usize) -> Self {
        let max_running = max_running.max(1);
        Self {
            slots: Arc::new(Semaphore::new(max_running)),
            max_running,
            waiting: AtomicUsize::new(0),
            max_waiting,
        }
    }

    /// A slot now, after waiting in line, or `Overloaded` when the line is full.
    pub async fn admit(&self) -> Result<SessionSlot, Overloaded> {
        if let Ok(permit) = self.slots.clone().try_acquire_owned() {
            return Ok(SessionSlot { _permit: permit });
        }
        let position = self.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&self.waiting);
        if position >= self.max_waiting {
            return Err(Overloaded {
                running: self.max_running,
                queued: position,
            });
        }
        // The semaphore is never closed, so acquiring only waits.
        match self.slots.clone().acquire_owned().await {
            Ok(permit) => Ok(SessionSlot { _permit: permit }),
            Err(_) => Err(Overloaded {
                running: self.max_running,
                queued: position,
            }),
        }
    }

    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn at_the_limits_requests_wait_and_past_them_they_are_refused() {
        let admission = Arc::new(Admission::new(2, 1));
        let first = admission.admit().await.expect("slot 1");
        let _second = admission.admit().await.expect("slot 2");
        let waiter = {
            let admission = admission.clone();
            tokio::spawn(async move { admission.admit().await.map(|_| ()) })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(admission.waiting(), 1, "the third waits");
        assert_eq!(
            admission.admit().await.err(),
            Some(Overloaded {
                running: 2,
                queued: 1
            }),
            "the fourth is refused"
        );
        drop(first);
        assert_eq!(
            waiter.await.expect("joined"),
            Ok(()),
            "a freed slot goes to the waiter"
        );
    }

    #[tokio::test]
    async fn a_waiter_that_leaves_gives_its_place_back() {
        let admission = Arc::new(Admission::new(1, 1));
        let _held = admission.admit().await.expect("slot");
        let leaving = {
            let admission = admission.clone();
            tokio::spawn(async move { admission.admit().await.map(|_| ()) })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        leaving.abort();
        let _ = leaving.await;
        assert_eq!(admission.waiting(), 0);
        let next = tokio::time::timeout(Duration::from_millis(50), admission.admit()).await;
        assert!(
            next.is_err(),
            "the line has room again: the next request waits rather than being refused"
        );
    }
}
