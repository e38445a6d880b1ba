//! Runs in progress by id, so `POST /v1/runs/{id}/cancel` can reach them, and the run each
//! `requestId` started, so a retried submission joins the first run instead of starting another.
//! Request ids are remembered for the most recent runs of this process only.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use crate::agent::RunControl;

/// How many request ids are remembered.
const REMEMBERED_REQUESTS: usize = 10_000;

#[derive(Default)]
pub struct LiveRuns {
    running: Mutex<HashMap<String, RunControl>>,
    requests: Mutex<Requests>,
}

#[derive(Default)]
struct Requests {
    runs: HashMap<(Option<String>, String), String>,
    order: VecDeque<(Option<String>, String)>,
}

impl LiveRuns {
    pub fn started(&self, run_id: &str, control: RunControl) {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(run_id.to_string(), control);
    }

    pub fn ended(&self, run_id: &str) {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(run_id);
    }

    /// The controls of a run still in progress.
    pub fn control(&self, run_id: &str) -> Option<RunControl> {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(run_id)
            .cloned()
    }

    /// Forgets a request id whose run never started, so a retry starts it.
    pub fn forget_request(&self, user: Option<&str>, request_id: &str) {
        let key = (user.map(str::to_string), request_id.to_string());
        let mut requests = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
        requests.runs.remove(&key);
        requests.order.retain(|k| *k != key);
    }

    /// The run an earlier submission with this request id started, or `None` after recording
    /// `run_id` as this request id's run. Request ids are scoped per user.
    pub fn claim_request(
        &self,
        user: Option<&str>,
        request_id: &str,
        run_id: &str,
    ) -> Option<String> {
        let key = (user.map(str::to_string), request_id.to_string());
        let mut requests = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(existing) = requests.runs.get(&key) {
            return Some(existing.clone());
        }
        requests.runs.insert(key.clone(), run_id.to_string());
        requests.order.push_back(key);
        while requests.order.len() > REMEMBERED_REQUESTS {
            if let Some(oldest) = requests.order.pop_front() {
                requests.runs.remove(&oldest);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_id_maps_to_its_first_run_per_user() {
        let live = LiveRuns::default();
        assert_eq!(live.claim_request(Some("alice"), "r1", "run-a"), None);
        assert_eq!(
            live.claim_request(Some("alice"), "r1", "run-b"),
            Some("run-a".into())
        );
        assert_eq!(
            live.claim_request(Some("bob"), "r1", "run-c"),
            None,
            "another user's id is another request"
        );
    }

    #[test]
    fn a_forgotten_request_id_starts_a_new_run() {
        let live = LiveRuns::default();
        assert_eq!(live.claim_request(Some("alice"), "r1", "run-a"), None);
        live.forget_request(Some("alice"), "r1");
        assert_eq!(live.claim_request(Some("alice"), "r1", "run-b"), None);
        assert_eq!(
            live.claim_request(Some("alice"), "r1", "run-c"),
            Some("run-b".into())
        );
    }

    #[test]
    fn old_request_ids_are_forgotten_past_the_limit() {
        let live = LiveRuns::default();
        for i in 0..=REMEMBERED_REQUESTS {
            live.claim_request(None, &i.to_string(), "run");
        }
        assert_eq!(live.claim_request(None, "0", "new"), None);
        assert_eq!(
            live.claim_request(None, &REMEMBERED_REQUESTS.to_string(), "x"),
            Some("run".into())
        );
    }

    #[test]
    fn running_controls_are_found_until_the_run_ends() {
        let live = LiveRuns::default();
        live.started("r", RunControl::default());
        assert!(live.control("r").is_some());
        live.ended("r");
        assert!(live.control("r").is_none());
    }
}
