//! What a store tells this replica's background loops when it commits: messages added to the
//! webhook outbox, schedules created or changed. Each is a [`Notify`] keeping one permit, so a
//! loop busy when it came still sees it. Other replicas' changes reach their loops at their
//! next look (at most a second).

use tokio::sync::Notify;

#[derive(Debug, Default)]
pub struct StoreSignals {
    pub(crate) deliveries_added: Notify,
    pub(crate) schedules_changed: Notify,
}
