//! The one way a run starts, for every headend (OpenAI, Anthropic, runs, per-user chat, CLI and
//! the ones to come): [`Runtime::start_run`] refuses runs while draining, joins a retried
//! submission (`requestId`) to its first run, waits for admission (a `requestId` is claimed
//! only once admitted, so no submission joins a refused one), opens the user's
//! conversation when the run continues one, and spawns the session task. That task records the
//! run and its events, answers from (or fills) the response cache, counts the run in the
//! metrics and saves a conversation's answer before it hands the result over.
//! Before admission a run is counted against its key's limits (`crate::limits`); it settles
//! them (usage, run slot) when it ends.
//!
//! Headends only translate: they build a [`RunSubmission`] from their wire format and turn the
//! [`RunHandle`]'s events into their frames. They never spawn sessions or touch the recorder.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::DropGuard;
use tracing::Instrument;

use super::admission::{Overloaded, SessionSlot};
use super::continuation::ClientToolError;
use super::conversation::ConversationTurn;
use super::turns::{ConversationSeat, TurnLost, TurnTaken};
use super::{Runtime, run_events, session_span};
use crate::agent::SessionRequest;
use crate::agent::approval::{Checkpoint, DecidedCall, SessionEnd};
use crate::agent::client_tools::ClientTools;
use crate::agent::{AgentResult, EventSink, RunControl, SamplingParams};
use crate::config::agent_file::{Finalization, Transport};
use crate::config::{AgentSpec, BusyPolicy, OnDisconnect};
use crate::limits::{KeyReservation, LimitRefusal, LimitedKey};
use crate::llm::ChatMessage;
use crate::store::{NewRun, StoreError};
use crate::vocabulary::RunEvent;

/// The longest `requestId` kept: ids are stored for a day, so their size is bounded.
pub const MAX_REQUEST_ID_CHARS: usize = 256;
/// How long a run whose id is handed out before its end waits for its start to be stored.
const STORED_WAIT: Duration = Duration::from_secs(2);
/// How often it looks meanwhile (its session task may not have queued the start yet).
const STORED_POLL: Duration = Duration::from_millis(2);
/// How long a run's end waits to be written before followers here are sent to the store.
const END_WRITE_WAIT: Duration = Duration::from_secs(10);
/// How long a submission repeating a `requestId` waits for the run of the first to be
/// recorded (or its claim forgotten) before it joins that run anyway, and how often it looks.
const CLAIMED_RUN_WAIT: Duration = Duration::from_secs(5);
const CLAIMED_RUN_POLL: Duration = Duration::from_millis(25);
/// How often an admitted submission claims a `requestId` whose earlier claims were forgotten
/// (their runs could not start) before it gives up.
const CLAIM_ATTEMPTS: usize = 3;

/// Events buffered per run before the session waits for a slow consumer.
const RUN_EVENT_BUFFER: usize = 256;

/// The most a spawned session task may hold inline. A task is moved (copied) several times on
/// its way into the scheduler; the session itself is boxed inside it.
const MAX_SESSION_TASK_BYTES: usize = 2048;

/// What a headend asks to run, in agentd's terms.
#[derive(Debug, Clone)]
pub struct RunSubmission {
    pub agent: Arc<AgentSpec>,
    /// The user's task for this run.
    pub prompt: String,
    /// Earlier messages sent with the request (a conversation's stored history comes first).
    pub history: Vec<ChatMessage>,
    pub overrides: SamplingParams,
    /// Output format for this run (`markdown`, `text`, `json`, …); the agent's when `None`.
    pub format: Option<String>,
    /// JSON schema of the `json` output for this run; the agent's when `None`.
    pub schema: Option<Value>,
    /// The caller's user: recorded with the run, part of its cache key, and given to
    /// `userScoped` tools.
    pub user_id: Option<String>,
    /// A client's idempotency key: a retried submission with the same id (and user) joins the
    /// first run instead of starting another.
    pub request_id: Option<String>,
    /// The user's conversation this run continues or starts: its history is loaded, the prompt
    /// stored before the run and the answer after it. Needs `user_id`.
    pub conversation: Option<ConversationTurn>,
    /// Tool transport for this run; the agent's `transport` when `None`.
    pub transport: Option<Transport>,
    /// The API key the run is counted against (`auth.keys[].limits`); `None` when the caller's
    /// key has no limits, or there is no key (the CLI, a keyless server).
    pub key: Option<LimitedKey>,
    /// What a client that stops taking the run's events does to the run: one that left, or that
    /// accepted nothing for `server.writeTimeoutSeconds`, cancels it (`cancel`) or is only no
    /// longer fed (`continue`). OpenAI and Anthropic streams always cancel.
    pub on_disconnect: OnDisconnect,
    /// Tools the client brought (SPEC §9.2), checked by `start_run`.
    pub client_tools: ClientTools,
    /// The admin that submits this run acting for `user_id` (`key:ID`, or `admin`): recorded
    /// with the run.
    pub acted_by: Option<String>,
    /// The key that submitted it (usage by key).
    pub key_id: Option<String>,
    /// The key's and the request's budget, the lower of each limit (SPEC §14).
    pub budget: crate::vocabulary::budget::RunBudget,
    /// What the message does when its conversation is still answering another (SPEC §13);
    /// the agent's `busy` when `None`.
    pub busy: Option<BusyPolicy>,
    /// The run's own webhook receiver (`webhook: {url}`), told when it ends or waits (SPEC §13).
    pub webhook: Option<String>,
    /// The run answers a background response (`resp_{run id}`): its end is announced as
    /// `response.completed` / `response.failed` / `response.cancelled` (SPEC §13).
    pub announced_response: bool,
    /// Files sent with the prompt (SPEC §11), stored already; kept with the user's message.
    pub attachments: Vec<crate::vocabulary::Attachment>,
    /// The run's id is handed to the client before the run ends (a background run or response,
    /// an A2A task), to be asked about later: the run is in the store before
    /// [`Runtime::start_run`] returns, so a replica that dies at once leaves it to be found
    /// (and ended `owner_lost`) instead of unknown.
    pub handed_out: bool,
}

impl RunSubmission {
    /// A submission of `prompt` to `agent` with every option at the agent's defaults.
    pub fn new(agent: Arc<AgentSpec>, prompt: impl Into<String>) -> Self {
        Self {
            agent,
            prompt: prompt.into(),
            history: Vec::new(),
            overrides: SamplingParams::default(),
            format: None,
            schema: None,
            user_id: None,
            request_id: None,
            conversation: None,
            transport: None,
            key: None,
            on_disconnect: OnDisconnect::Cancel,
            client_tools: ClientTools::default(),
            acted_by: None,
            key_id: None,
            budget: Default::default(),
            busy: None,
            webhook: None,
            announced_response: false,
            attachments: Vec::new(),
            handed_out: false,
        }
    }
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("the server is shutting down and takes no new runs")]
    ShuttingDown,
    #[error(transparent)]
    Overloaded(#[from] Overloaded),
    #[error("no conversation `{0}` for this user")]
    ConversationNotFound(String),
    /// The conversation is answering (or has queued) another message, and `busy` is `reject`.
    #[error("the conversation is answering another message")]
    ConversationBusy,
    #[error("a conversation belongs to a user, and this run has none")]
    ConversationWithoutUser,
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The caller's key is past one of its limits.
    #[error(transparent)]
    Limited(#[from] LimitRefusal),
    /// The submission repeated an earlier one's `request_id`: no new run was started, and
    /// `run_id` (which may still be going) is the one it asked for.
    #[error("this request id already started run `{run_id}`")]
    AlreadySubmitted { run_id: String },
    #[error("a request id is 1 to {MAX_REQUEST_ID_CHARS} characters; this one has {length}")]
    InvalidRequestId { length: usize },
    /// The output format or JSON schema the submission asked for cannot be used.
    #[error("the requested output cannot be used: {0}")]
    InvalidOutput(String),
    /// The client's tools or tool results cannot be used.
    #[error(transparent)]
    ClientTools(#[from] ClientToolError),
}

/// A run in progress: its events, a way to cancel it, and its result when it ends.
pub struct RunHandle {
    pub run_id: String,
    /// The conversation the run continues or started, when it belongs to one.
    pub conversation_id: Option<String>,
    /// The run's events in order; the n-th event received is the one stored with seq n (the SSE
    /// `id` of SPEC §4.2), so a stream resumed from the store continues where this one stopped.
    pub events: mpsc::Receiver<RunEvent>,
    /// `stop` asks for a graceful final turn, `abort` ends the run now.
    pub control: RunControl,
    /// The result, handed over once the run is recorded (and a conversation's answer saved).
    pub result: oneshot::Receiver<AgentResult>,
}

impl RunHandle {
    /// Aborts the run when the returned guard is dropped (the client that started it left),
    /// unless the guard is disarmed first.
    pub fn abort_on_drop(&self) -> DropGuard {
        self.control.abort.clone().drop_guard()
    }

    /// The result alone, for a headend that answers once the run ends: the events are let go,
    /// so the run never waits for a reader of them (nor counts as a client that stopped reading).
    pub fn into_result(self) -> oneshot::Receiver<AgentResult> {
        self.result
    }
}

/// A client's idempotency key in the store: the `requestId` within the user's own key space
/// (every caller without a user shares one).
struct RequestKey {
    user_key: String,
    id: String,
}

impl RequestKey {
    fn checked(user_id: Option<&str>, id: &str) -> Result<Self, StartError> {
        let length = id.chars().count();
        if length == 0 || length > MAX_REQUEST_ID_CHARS {
            return Err(StartError::InvalidRequestId { length });
        }
        Ok(Self {
            user_key: user_id.unwrap_or_default().to_string(),
            id: id.to_string(),
        })
    }
}

/// A format or schema the submission asks for must compile before the run starts (the agent's
/// own were checked when it loaded): a bad one is the client's error, not a failed run.
fn check_requested_output(submission: &RunSubmission) -> Result<(), StartError> {
    if submission.format.is_none() && submission.schema.is_none() {
        return Ok(());
    }
    let agent = &submission.agent;
    let format = submission.format.as_deref().unwrap_or(&agent.output_format);
    let schema = submission.schema.as_ref().or(agent.output_schema.as_ref());
    crate::agent::final_report::FinalReportSpec::new(format, schema)
        .map(drop)
        .map_err(|error| StartError::InvalidOutput(error.to_string()))
}

/// How a session task begins: a new run, or a run continuing from its checkpoint once its
/// waiting calls are decided.
pub(super) enum SessionStart {
    New(SessionRequest),
    Resumed {
        request: SessionRequest,
        checkpoint: Box<Checkpoint>,
        decisions: Vec<DecidedCall>,
        /// The seq of the run's last stored event: its events number on from here.
        last_seq: i64,
    },
}

impl SessionStart {
    pub(super) fn request(&self) -> &SessionRequest {
        match self {
            Self::New(request) | Self::Resumed { request, .. } => request,
        }
    }

    fn last_seq(&self) -> i64 {
        match self {
            Self::New(_) => 0,
            Self::Resumed { last_seq, .. } => *last_seq,
        }
    }
}

/// Everything a session task is started with.
pub(super) struct SessionTask {
    /// `None` only for a resumed run that found the server full: it runs anyway, its wait
    /// having been its queue.
    pub slot: Option<SessionSlot>,
    pub key_reservation: Option<KeyReservation>,
    pub new_run: NewRun,
    pub conversation: Option<(String, String)>,
    /// The run answers a message that must first wait for its conversation's turn, then is
    /// stored after the history it loads.
    pub awaits_turn: bool,
    /// The run's own webhook URL.
    pub webhook: Option<String>,
    /// Whether the run answers a background response whose end is announced.
    pub announced_response: bool,
    pub on_disconnect: OnDisconnect,
    pub control: RunControl,
    pub start: SessionStart,
}

/// JSON asked of a `finalization: text` agent (`response_format` json_schema, Responses
/// `text.format`) is answered through the final-report tool for this run, so the answer is
/// validated against the schema as a report agent's is, rather than returned as free text.
fn with_json_finalization(mut submission: RunSubmission) -> RunSubmission {
    let wants_json = submission.format.as_deref() == Some("json");
    if wants_json && submission.agent.finalization == Finalization::Text {
        let mut agent = (*submission.agent).clone();
        agent.finalization = Finalization::Report;
        submission.agent = Arc::new(agent);
    }
    submission
}

/// What the session task must do once the run ends, besides recording it.
pub(super) struct RunEnding {
    pub slot: Option<SessionSlot>,
    /// The key's run slot and budget, settled when the run ends.
    pub key_reservation: Option<KeyReservation>,
    pub new_run: NewRun,
    /// `(user, conversation)` whose answer is saved.
    pub conversation: Option<(String, String)>,
    /// The run whose answer covers this run's message (`busy: steer`): it stores that answer.
    pub answered_by: Option<String>,
    /// The run's own webhook URL.
    pub webhook: Option<String>,
    /// Whether the run answers a background response whose end is announced.
    pub announced_response: bool,
    pub result: oneshot::Sender<AgentResult>,
}

impl Runtime {
    /// Starts a run of `submission` (see the module comment for everything this does). A
    /// repeated `request_id` starts nothing: [`StartError::AlreadySubmitted`] names its run.
    pub async fn start_run(
        self: &Arc<Self>,
        mut submission: RunSubmission,
    ) -> Result<RunHandle, StartError> {
        if self.is_draining() {
            return Err(StartError::ShuttingDown);
        }
        check_requested_output(&submission)?;
        self.prepare_continuation(&mut submission).await?;
        let submission = with_json_finalization(submission);
        let run_id = uuid::Uuid::now_v7().to_string();
        let request = match &submission.request_id {
            Some(id) => Some(RequestKey::checked(submission.user_id.as_deref(), id)?),
            None => None,
        };
        if let Some(request) = &request
            && let Some(claimed) = self
                .store
                .requested_run(&request.user_key, &request.id)
                .await?
            && let Some(joined) = self.claim_outcome(request, claimed).await?
        {
            // Joined without being counted: the first submission was admitted.
            return Err(StartError::AlreadySubmitted { run_id: joined });
        }
        let handed_out = submission.handed_out;
        let handle = self
            .admit_and_spawn(run_id, submission, request.as_ref())
            .await?;
        if handed_out {
            self.until_stored(&handle.run_id).await;
        }
        Ok(handle)
    }

    /// Waits (up to [`STORED_WAIT`]) until the run's start is in the store.
    async fn until_stored(&self, run_id: &str) {
        let deadline = tokio::time::Instant::now() + STORED_WAIT;
        loop {
            self.recorder.flush().await;
            match self.store.get_run(run_id).await {
                Ok(Some(_)) => return,
                Ok(None) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(STORED_POLL).await;
                }
                Ok(None) => {
                    tracing::warn!(%run_id, "the run's start is not stored yet; its id is handed out anyway");
                    return;
                }
                Err(error) => {
                    tracing::warn!(%error, %run_id, "could not check that the run's start is stored");
                    return;
                }
            }
        }
    }

    /// Records `request` as this admitted run's in the store (every replica sees it, restarts
    /// keep it), or joins the run an earlier admitted submission with it started.
    async fn claim_request(&self, request: &RequestKey, run_id: &str) -> Result<(), StartError> {
        for _ in 0..CLAIM_ATTEMPTS {
            let claimed = self
                .store
                .claim_request(&request.user_key, &request.id, run_id, chrono::Utc::now())
                .await?;
            let Some(claimed) = claimed else {
                return Ok(());
            };
            if let Some(joined) = self.claim_outcome(request, claimed).await? {
                return Err(StartError::AlreadySubmitted { run_id: joined });
            }
        }
        Err(StartError::Store(StoreError::Conflict {
            what: "request",
            id: request.id.clone(),
        }))
    }

    /// What became of the run `claimed`, which an earlier submission claimed `request` for:
    /// `Some(run id)` once it is recorded, `None` once the claim is forgotten (that run could
    /// not start after all; the caller starts its own). A claim is only made once its run was
    /// admitted, so after [`CLAIMED_RUN_WAIT`] without either the run is taken as started.
    async fn claim_outcome(
        &self,
        request: &RequestKey,
        mut claimed: String,
    ) -> Result<Option<String>, StoreError> {
        let deadline = tokio::time::Instant::now() + CLAIMED_RUN_WAIT;
        loop {
            if self.recorded_run(&claimed).await?.is_some() {
                return Ok(Some(claimed));
            }
            match self
                .store
                .requested_run(&request.user_key, &request.id)
                .await?
            {
                Some(now_claimed) => claimed = now_claimed,
                None => return Ok(None),
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(Some(claimed));
            }
            tokio::time::sleep(CLAIMED_RUN_POLL).await;
        }
    }

    /// Counts the run against its key, waits for a session slot, and only then claims its
    /// `requestId`: a submission refused here (429, 503) leaves no claim, so a concurrent one
    /// with the same id never joins a run that does not exist. A run that cannot start after
    /// its claim (its conversation is gone, the store failed) forgets it.
    async fn admit_and_spawn(
        self: &Arc<Self>,
        run_id: String,
        submission: RunSubmission,
        request: Option<&RequestKey>,
    ) -> Result<RunHandle, StartError> {
        let key_reservation = self.limits.admit(submission.key.as_ref(), &run_id).await?;
        // Admitted before anything is stored: a refused request leaves no trace.
        let slot = self.admission.admit().await?;
        let Some(request) = request else {
            return self
                .open_and_spawn(run_id, slot, key_reservation, submission)
                .await;
        };
        self.claim_request(request, &run_id).await?;
        let started = self
            .open_and_spawn(run_id.clone(), slot, key_reservation, submission)
            .await;
        if started.is_err() {
            // The run never existed: a retry must start it rather than join nothing.
            if let Err(error) = self
                .store
                .forget_request(&request.user_key, &request.id, &run_id)
                .await
            {
                tracing::warn!(%error, "could not forget the request id of a run that did not start");
            }
        }
        started
    }

    /// Finds (or creates) the user's conversation when the run continues one and queues its
    /// message for the conversation's turn, then starts the session of an admitted run (which
    /// waits for that turn before it loads the history).
    async fn open_and_spawn(
        self: &Arc<Self>,
        run_id: String,
        slot: SessionSlot,
        key_reservation: Option<KeyReservation>,
        submission: RunSubmission,
    ) -> Result<RunHandle, StartError> {
        let conversation = match &submission.conversation {
            Some(turn) => {
                let user = submission
                    .user_id
                    .as_deref()
                    .ok_or(StartError::ConversationWithoutUser)?;
                let agent = &submission.agent;
                let id = self
                    .resolve_conversation(user, agent, turn, &title_text(&submission))
                    .await?;
                let seat = ConversationSeat {
                    user_id: user.to_string(),
                    conversation_id: id,
                };
                let policy = submission.busy.unwrap_or(agent.busy);
                let message = (
                    submission.prompt.as_str(),
                    submission.attachments.as_slice(),
                );
                self.ask_for_turn(&seat, &run_id, &agent.name, message, policy)
                    .await?;
                Some((seat.user_id, seat.conversation_id))
            }
            None => None,
        };
        let key_budget = submission
            .key
            .as_ref()
            .and_then(|key| key.limits.run_budget)
            .unwrap_or_default();
        // A conversation's history is loaded (its files' content with it) once the run holds
        // its turn; a request's own history and the prompt's files are loaded here.
        let mut history = submission.history;
        let mut attachments = submission.attachments;
        self.load_attachments(&submission.agent, &mut history, &mut attachments)
            .await;
        let request = SessionRequest {
            run_id,
            agent: submission.agent,
            prompt: submission.prompt,
            history,
            overrides: submission.overrides,
            conversation_id: conversation.as_ref().map(|(_, id)| id.clone()),
            format: submission.format,
            schema: submission.schema,
            user_id: submission.user_id,
            transport: submission.transport,
            client_tools: submission.client_tools,
            budget: submission.budget.lowest(key_budget),
            budget_raise: Default::default(),
            attachments,
            parent: None,
        };
        Ok(self.spawn_session(
            slot,
            key_reservation,
            request,
            conversation,
            (
                submission.on_disconnect,
                submission.webhook,
                submission.announced_response,
            ),
            (submission.acted_by, submission.key_id),
        ))
    }

    /// Starts the session task of a new run.
    fn spawn_session(
        self: &Arc<Self>,
        slot: SessionSlot,
        key_reservation: Option<KeyReservation>,
        request: SessionRequest,
        conversation: Option<(String, String)>,
        (on_disconnect, webhook, announced_response): (OnDisconnect, Option<String>, bool),
        (acted_by, key_id): (Option<String>, Option<String>),
    ) -> RunHandle {
        let new_run = NewRun {
            id: request.run_id.clone(),
            agent: request.agent.name.clone(),
            user_id: request.user_id.clone(),
            conversation_id: request.conversation_id.clone(),
            // The store keeps microseconds: the run reads the same from memory and from it.
            created_at: chrono::SubsecRound::trunc_subsecs(chrono::Utc::now(), 6),
            owner: Some(self.replica.id.clone()),
            acted_by,
            key_id,
        };
        self.launch(SessionTask {
            slot: Some(slot),
            key_reservation,
            awaits_turn: conversation.is_some(),
            webhook,
            announced_response,
            new_run,
            conversation,
            on_disconnect,
            control: RunControl::child_of(&self.shutdown),
            start: SessionStart::New(request),
        })
    }

    /// Starts a session task. The run's start, every event (even when nobody listens any
    /// more) and its end are queued for the store in that order; the end is queued before the
    /// result is handed over, so a read that flushes the recorder first sees the finished run.
    /// A run that stops to wait for approvals is parked in the store instead
    /// ([`Runtime::park`]).
    pub(super) fn launch(self: &Arc<Self>, task: SessionTask) -> RunHandle {
        let SessionTask {
            slot,
            key_reservation,
            new_run,
            conversation,
            awaits_turn,
            webhook,
            announced_response,
            on_disconnect,
            control,
            start,
        } = task;
        let (sink, session_events) = EventSink::channel(RUN_EVENT_BUFFER);
        let (listener, events) = mpsc::channel(RUN_EVENT_BUFFER);
        let (result_tx, result) = oneshot::channel();
        let run_id = new_run.id.clone();
        let conversation_id = conversation.as_ref().map(|(_, id)| id.clone());
        let first_seq = start.last_seq();
        let live = self
            .live
            .started_after(new_run.clone(), control.clone(), first_seq);
        let span = session_span(start.request());
        let meter = key_reservation.as_ref().and_then(KeyReservation::meter);
        let ending = Box::new(RunEnding {
            slot,
            key_reservation,
            new_run,
            conversation,
            answered_by: None,
            webhook,
            announced_response,
            result: result_tx,
        });
        let client = run_events::Client {
            events: listener,
            write_timeout: Duration::from_secs(self.config.server.write_timeout_seconds),
            on_disconnect,
            abort: control.abort.clone(),
        };
        let runtime = Arc::clone(self);
        let session_control = control.clone();
        let seat = conversation_seat(ending.conversation.as_ref());
        let start = Box::new(start);
        let task = async move {
            if first_seq == 0 {
                runtime.recorder.run_started(ending.new_run.clone()).await;
            }
            let tee = run_events::tee(session_events, client, &runtime.recorder, &live, first_seq);
            // Boxed: the session's state machine is ~25 KB, and unboxed it made the task
            // itself that large, copied three times on every spawn (callgrind: ~15 % of
            // agentd's instructions per request went to those copies).
            let run = Box::pin(runtime.run_in_turn(
                (seat, awaits_turn),
                start,
                sink,
                session_control,
                meter,
            ));
            let ((end, answered_by), tail) = tokio::join!(run, tee);
            let mut ending = ending;
            ending.answered_by = answered_by;
            match end {
                // Boxed too: saving a conversation's answer would otherwise grow every task.
                SessionEnd::Finished(result) => {
                    Box::pin(runtime.finish_run(*ending, *result, tail, &live)).await
                }
                SessionEnd::Waiting(checkpoint) => {
                    let last_seq = tail.last_seq;
                    let mut tail = tail;
                    let records = std::mem::take(&mut tail.held_records);
                    runtime.recorder.last_events(records).await;
                    let client = tail.release(&live).await;
                    Box::pin(runtime.park(*ending, checkpoint, last_seq, client)).await
                }
            }
        }
        .instrument(span);
        debug_assert!(
            std::mem::size_of_val(&task) <= MAX_SESSION_TASK_BYTES,
            "the session task is {} bytes: box what made it grow",
            std::mem::size_of_val(&task)
        );
        self.sessions.spawn(task);
        RunHandle {
            run_id,
            conversation_id,
            events,
            control,
            result,
        }
    }

    /// Records the run's end with the webhook messages announcing it (one transaction), saves
    /// a conversation's answer, frees the slot, adds the run's usage to its key's budget, and
    /// once the end is in the store (or [`END_WRITE_WAIT`] passed) hands the result and the
    /// run's closing events over and leaves followers to the store: whoever saw a run end
    /// reads it ended, on any replica.
    async fn finish_run(
        &self,
        ending: RunEnding,
        result: AgentResult,
        mut tail: run_events::Tail,
        live: &super::live::LiveRun,
    ) {
        let RunEnding {
            slot,
            key_reservation,
            new_run,
            conversation,
            answered_by,
            webhook,
            announced_response,
            result: result_tx,
        } = ending;
        let run_id = result.run_id.clone();
        let event = super::webhooks::RunWebhookEvent::of_end(&result);
        let mut outcome: crate::store::RunOutcome = (&result).into();
        if announced_response {
            // A background response's own webhook hears of it as a response.
            outcome.notices = self.run_notices(event, &new_run, Some(&result), None);
            let response = self.response_notices(&new_run, &result, webhook.as_deref());
            outcome.notices.extend(response);
        } else {
            outcome.notices = self.run_notices(event, &new_run, Some(&result), webhook.as_deref());
        }
        // A2A push notices of the end, from the run as it is about to be stored.
        let ended = crate::store::RunRecord::ended(&new_run, &outcome);
        outcome.notices.extend(self.push_notices(&ended).await);
        let closing = std::mem::take(&mut tail.held_records);
        let stored = self
            .recorder
            .run_finished_with(new_run, outcome, closing)
            .await;
        if let Some(seat) = conversation_seat(conversation.as_ref()) {
            if answered_by.is_none() {
                self.save_answer(&seat, &result).await;
            }
            // After the answer: the next message is stored after it.
            self.release_turn(&run_id).await;
        }
        drop(slot);
        if let Some(reservation) = key_reservation {
            reservation.finish(&result).await;
        }
        if tokio::time::timeout(END_WRITE_WAIT, stored).await.is_err() {
            tracing::warn!(%run_id, "the run's end is not stored yet; its followers now read the store");
        }
        self.live.finished(&run_id);
        let _ = result_tx.send(result);
        drop(tail.release(live).await);
        self.live.retired(&run_id);
    }
}

impl Runtime {
    /// Runs the session once the run's message holds its conversation's turn (when it waits
    /// for one): the message is stored then, after the history the run answers. A message that
    /// joined the answer in progress instead follows that answer; the run that answered it is
    /// returned with the end.
    async fn run_in_turn(
        self: &Arc<Self>,
        (seat, awaits_turn): (Option<ConversationSeat>, bool),
        mut start: Box<SessionStart>,
        sink: EventSink,
        control: RunControl,
        meter: Option<Arc<dyn crate::vocabulary::budget::SpendMeter>>,
    ) -> (SessionEnd, Option<String>) {
        let waiting_seat = seat.as_ref().filter(|_| awaits_turn);
        if let (Some(seat), SessionStart::New(request)) = (waiting_seat, &mut *start) {
            let opened = match self
                .await_turn(seat, &request.run_id, &request.agent.name, &sink, &control)
                .await
            {
                Ok(TurnTaken::Joined { head }) => {
                    let result = self
                        .answer_as_joined(&head, &request.run_id, &sink, &control)
                        .await;
                    return (SessionEnd::Finished(Box::new(result)), Some(head));
                }
                Ok(TurnTaken::Holding) => self
                    .take_the_floor(
                        &request.agent,
                        &seat.user_id,
                        &seat.conversation_id,
                        &request.prompt,
                        &request.attachments,
                    )
                    .await
                    .map_err(TurnLost::Store),
                Err(lost) => Err(lost),
            };
            match opened {
                Ok(mut history) => {
                    history.append(&mut request.history);
                    request.history = history;
                }
                Err(lost) => {
                    let result = lost.result(&request.run_id);
                    return (SessionEnd::Finished(Box::new(result)), None);
                }
            }
        }
        let end = self.run_measured(*start, sink, control, meter, seat).await;
        (end, None)
    }
}

/// A `(user, conversation)` pair as the conversation's seat.
fn conversation_seat(conversation: Option<&(String, String)>) -> Option<ConversationSeat> {
    conversation.map(|(user_id, conversation_id)| ConversationSeat {
        user_id: user_id.clone(),
        conversation_id: conversation_id.clone(),
    })
}

/// What a new conversation is titled after: the prompt, or the names of the files sent alone.
fn title_text(submission: &RunSubmission) -> String {
    if !submission.prompt.trim().is_empty() {
        return submission.prompt.clone();
    }
    let names: Vec<&str> = submission
        .attachments
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    names.join(", ")
}
